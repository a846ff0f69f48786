#!/usr/bin/env bash
# deploy/prometheus with Debian's promtool: the scrape configurations check
# clean (with their rule files), the rules check clean, and the alerts' unit
# tests (promtool test rules) pass. The API-server discovery variant
# (prometheus-kubernetes-sd.yml) needs an upstream build: Debian's promtool
# does not know kubernetes_sd_configs, and that file alone is skipped then.
set -uo pipefail
cd deploy/prometheus || { echo "FAIL: no deploy/prometheus in $(pwd)"; exit 1; }
command -v promtool >/dev/null || { echo "SKIP: promtool not found (Debian package prometheus; scripts/install-deps.sh test)"; exit 0; }
failed=0
check() {  # check WHAT COMMAND...: runs it, fails on a non-zero exit or a warning
  local what=$1; shift
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] || grep -qiE 'warn|error' <<<"$out"; then
    echo "FAIL: $what (exit $rc):"; echo "$out"; failed=1
  else
    echo "ok: $what"
  fi
}
check "promtool check config prometheus.yml" promtool check config prometheus.yml
check "promtool check config prometheus-kubernetes.yml" promtool check config prometheus-kubernetes.yml
out=$(promtool check config prometheus-kubernetes-sd.yml 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q 'field kubernetes_sd_configs not found' <<<"$out"; then
  echo "SKIP: prometheus-kubernetes-sd.yml: this promtool is built without kubernetes_sd_configs (Debian's is)"
else
  check "promtool check config prometheus-kubernetes-sd.yml" promtool check config prometheus-kubernetes-sd.yml
fi
check "promtool check rules" promtool check rules rules/recording.yml rules/alerts.yml
check "promtool test rules" promtool test rules tests/alerts_test.yml
# Every alert has a unit test.
for alert in $(sed -n 's/^ *- alert: *//p' rules/alerts.yml); do
  grep -q "alertname: $alert\$" tests/alerts_test.yml || { echo "FAIL: alert $alert has no test in tests/alerts_test.yml"; failed=1; }
done
# Every alert links to its section of docs/runbook.md, and the section exists.
runbook=../../docs/runbook.md
[ -f "$runbook" ] || { echo "FAIL: no docs/runbook.md beside deploy/"; failed=1; }
for alert in $(sed -n 's/^ *- alert: *//p' rules/alerts.yml); do
  anchor=$(tr 'A-Z' 'a-z' <<<"$alert")
  grep -A30 -- "- alert: $alert\$" rules/alerts.yml | grep -q "runbook_url: \"docs/runbook.md#$anchor\"" ||
    { echo "FAIL: alert $alert has no runbook_url docs/runbook.md#$anchor"; failed=1; }
  grep -q "^## $alert\$" "$runbook" 2>/dev/null || { echo "FAIL: docs/runbook.md has no section ## $alert"; failed=1; }
done
[ $failed -eq 0 ] && echo "PASS: deploy/prometheus checks clean, its alert tests pass, every alert has a runbook section"
exit $failed
