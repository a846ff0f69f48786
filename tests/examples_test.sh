#!/usr/bin/env bash
# Trains one example spec with ringmaster-trainer (one process, CPU) and checks
# the goal stated for it: a test accuracy of at least MIN, or a held-out loss
# below MAX. Usage: examples_test.sh TRAINER SPEC (accuracy MIN | loss MAX) [--set k=v ...]
set -euo pipefail
trainer=$1 spec=$2 metric=$3 bound=$4
shift 4
dir="${TEST_TMPDIR:-$(mktemp -d)}/checkpoints"
rm -rf "$dir"
start=$(date +%s)
"$trainer" --spec "$spec" --checkpoint-dir "$dir" "$@" | tee "${TEST_TMPDIR:-/tmp}/train.log"
elapsed=$(( $(date +%s) - start ))
last=$(tail -n 1 "${TEST_TMPDIR:-/tmp}/train.log")
case "$metric" in
  accuracy)
    value=${last#test_accuracy=}
    [ "$value" != "$last" ] || { echo "FAIL: last line is not test_accuracy=...: $last"; exit 1; }
    awk -v v="$value" -v b="$bound" 'BEGIN { exit !(v >= b) }' ||
      { echo "FAIL: $spec: test accuracy $value < $bound"; exit 1; } ;;
  loss)
    value=${last#test_loss=}
    [ "$value" != "$last" ] || { echo "FAIL: last line is not test_loss=...: $last"; exit 1; }
    awk -v v="$value" -v b="$bound" 'BEGIN { exit !(v < b) }' ||
      { echo "FAIL: $spec: held-out loss $value >= $bound"; exit 1; } ;;
  *) echo "unknown metric $metric"; exit 2 ;;
esac
echo "PASS: $spec: $metric $value (goal: $bound) in ${elapsed}s"
# The final checkpoint is there and verifies: a second run resumes at the end
# and reports the same evaluation without training.
again=$("$trainer" --spec "$spec" --checkpoint-dir "$dir" "$@" 2>/dev/null | tail -n 1)
[ "$again" = "$last" ] || { echo "FAIL: resuming from the final checkpoint gave '$again', expected '$last'"; exit 1; }
