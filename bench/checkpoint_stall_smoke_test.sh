#!/usr/bin/env bash
# The checkpoint stall benchmark, small (the GPT example's model, 2
# checkpoints of each mode per round): it must print the sync and async rows
# and the ratio; the times themselves are not checked.
# Usage: checkpoint_stall_smoke_test.sh BENCH SPEC
set -uo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(timeout 120 "$1" --small --spec "$2" --checkpoints 2 --interval 2 --dir "$dir/ckpt" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the benchmark exited $rc"; exit 1; }
for mode in sync async; do
  grep -qE "model=gpt_text .* mode=$mode checkpoints=4 stall_ms_median=[0-9.]+" <<<"$out" ||
    { echo "FAIL: no $mode row with 4 checkpoints"; exit 1; }
done
grep -qE "model=gpt_text stall_ratio=[0-9.]+" <<<"$out" || { echo "FAIL: no ratio row"; exit 1; }
[ ! -e "$dir/ckpt" ] || { echo "FAIL: the scratch directory was left behind"; exit 1; }
echo "PASS"
