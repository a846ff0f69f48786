#!/usr/bin/env bash
# The scheduling benchmark, small (256 pending jobs in 4 queues on 64 nodes,
# 3 passes): it must decide every job, place some, and print its time row; the
# time itself is not checked.
# Usage: scheduler_bench_smoke_test.sh BENCH
set -uo pipefail
out=$(timeout 60 "$1" --nodes 64 --jobs 256 --queues 4 --passes 3 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the benchmark exited $rc"; exit 1; }
grep -qE "pass time over 3 passes: median [0-9.]+ ms" <<<"$out" || { echo "FAIL: no pass time row"; exit 1; }
echo "PASS"
