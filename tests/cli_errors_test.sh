#!/usr/bin/env bash
# Bad input through the CLI against a real coordinator: every failure is one
# line on stderr, nothing on stdout, a non-zero exit, and says what went wrong.
#   - coordinator unreachable: names the address tried (exit 1)
#   - a spec with a bad field: names the field and the reason; rejected by the
#     CLI (exit 2, nothing sent) or, with --skip-local-validation, by the
#     coordinator with INVALID_ARGUMENT (exit 1); no job is created
#   - describe / cancel / logs / checkpoints of an unknown job: NOT_FOUND (exit 1)
# Usage: cli_errors_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")

# expect CODE PATTERN CLI-ARGS...: exit code CODE, stdout empty, stderr exactly
# one line matching the extended regex PATTERN.
expect() {
  local want_code=$1 pattern=$2
  shift 2
  rm_cli "$@" >"$state/out" 2>"$state/err"
  local code=$? err
  err=$(cat "$state/err")
  echo "ringmaster $* -> exit $code: $err"
  [ "$code" = "$want_code" ] || fail "ringmaster $*: exit $code, want $want_code"
  [ ! -s "$state/out" ] || fail "ringmaster $*: printed on stdout: $(head -3 "$state/out")"
  [ "$(wc -l <"$state/err")" = 1 ] || fail "ringmaster $*: want one line on stderr, got: $err"
  grep -qE "$pattern" <<<"$err" || fail "ringmaster $*: stderr does not match /$pattern/"
}

# Nothing listens on $addr yet.
for cmd in "jobs" "nodes" "describe j-1" "submit $spec"; do
  # shellcheck disable=SC2086
  expect 1 "^ringmaster: cannot reach the coordinator at $addr \(connection refused\)" $cmd
done

start_coordinator
wait_until 30 "the coordinator did not start" rm_cli jobs

bad=(--set resources.nodes=0)
field='resources\.nodes: must be >= 1, got 0'
# Blamed on the --set, not on the (valid) file.
expect 2 "^ringmaster: $field \(after --set \"resources\.nodes=0\"; .* alone is valid\)$" submit "$spec" "${bad[@]}"
expect 1 "^ringmaster: $field \(INVALID_ARGUMENT\)$" submit "$spec" "${bad[@]}" --skip-local-validation
expect 1 "^ringmaster: $field \(INVALID_ARGUMENT\)$" submit "$spec" "${bad[@]}" --skip-local-validation --output json
expect 1 "^ringmaster: optimizer\.lr: must be > 0.* \(INVALID_ARGUMENT\)$" \
  submit "$spec" --set optimizer.lr=-1 --skip-local-validation
[ "$(rm_cli jobs --output json)" = "{}" ] || fail "a rejected spec created a job: $(rm_cli jobs)"

for cmd in describe cancel logs checkpoints; do
  expect 1 "^ringmaster: job j-404 not found \(NOT_FOUND\)$" $cmd j-404
done
expect 1 "^ringmaster: job j-404 not found \(NOT_FOUND\)$" logs j-404 --follow
echo "PASS: unreachable, bad spec (INVALID_ARGUMENT) and unknown job (NOT_FOUND): one line each, non-zero exit"
