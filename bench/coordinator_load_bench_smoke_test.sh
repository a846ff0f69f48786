#!/usr/bin/env bash
# The coordinator load benchmark, small: 8 nodes x 2 GPUs, a 2 s heartbeat
# window. It must complete every phase (exit 0) and print every row of its
# table; the numbers themselves are not checked.
# Usage: coordinator_load_bench_smoke_test.sh BENCH COORDINATOR
set -uo pipefail
bench=$(realpath "$1") coordinator=$(realpath "$2")
out=$(timeout 120 "$bench" --coordinator "$coordinator" --nodes 8 --gpus 2 --duration 2 --channels 2 \
  --phase-timeout 30 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the benchmark exited $rc"; exit 1; }
for row in "registration: 8 nodes x 2 GPUs READY" "every Session granted a lease" \
  "StartRanks received by all 8 nodes" "NCCL unique id at all 16 ranks" "lease grant p50" \
  "lease grant p99" "lease grant max" "job SUCCEEDED" "coordinator VmHWM" "coordinator VmRSS" \
  "all phases completed" "coordinator exited 0"; do
  grep -qF "$row" <<<"$out" || { echo "FAIL: no \"$row\" in the output"; exit 1; }
done
echo "PASS"
