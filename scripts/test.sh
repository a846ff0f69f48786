#!/usr/bin/env bash
# Installs what is missing and runs every test: once with CUDA (where the
# toolkit is installed; GPU tests skip without a device) and once CPU-only
# (--config=cpu; without the tests tagged heavy, which the first run covers).
# Ends with the line "N passed, N failed, N skipped".
# Usage: scripts/test.sh [extra bazel test flags]
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build test || { echo "0 passed, 1 failed"; exit 1; }

logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
total_p=0 total_f=0 total_s=0 rc=0

# run_config LABEL TAG_FILTER [bazel flags]: one `bazel test //...`, counted.
run_config() {
  local label=$1 filter=$2
  shift 2
  local log="$logdir/$label.log"
  echo "=== bazel test //... ($label)"
  bazel test "$@" ${filter:+--test_tag_filters=$filter} //... 2>&1 | tee "$log" |
    grep -vE '^\s*$|linux-sandbox|^\(|^INFO: From ' || true
  local status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] || rc=1
  local testlogs
  testlogs=$(bazel info "$@" bazel-testlogs 2>/dev/null)
  local out
  out=$(python3 scripts/test_summary.py "$label" "$log" "$testlogs")
  echo "$out" | grep -v '^counts '
  read -r _ p f s <<<"$(echo "$out" | grep '^counts ')"
  total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + s))
  # A build failure leaves no test line: make sure it still counts as failed.
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then total_f=$((total_f + 1)); fi
}

run_config cuda-if-present "" "$@"
# The end-to-end trainings tagged "heavy" (the examples to their accuracy
# goals, every parallel layout through a cluster: half of the suite's time)
# run once, above: the CPU-only build runs the same CPU code paths.
echo "(cpu-only: the tests tagged heavy ran in the first configuration only)"
run_config cpu-only -heavy --config=cpu "$@"

echo "${total_p} passed, ${total_f} failed, ${total_s} skipped"
[ "$rc" -eq 0 ] && [ "$total_f" -eq 0 ]
