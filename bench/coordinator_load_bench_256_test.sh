#!/usr/bin/env bash
# The coordinator load benchmark at 256 nodes x 8 GPUs (2,048 ranks), with
# its goals enforced: it fails when a phase does not complete or a goal is
# missed. The goals are scaled from the 2,048-node ones and leave room for a
# loaded 2-core machine (measured on one, load ~2: registration 0.16-0.28 s,
# NCCL id 0.37 s, p99 0.8 ms, VmHWM 53-56 MB):
#   every node READY with its session        < 1 s    (2,048 nodes: < 1 s)
#   submit -> NCCL id at all 2,048 ranks     < 2 s    (16,384 ranks: < 3 s)
#   heartbeat -> lease grant p99             < 10 ms  (the same)
#   coordinator VmHWM                        < 160 MB (2,048 nodes: < 512 MB)
# Usage: coordinator_load_bench_256_test.sh BENCH COORDINATOR
set -uo pipefail
bench=$(realpath "$1") coordinator=$(realpath "$2")
out=$(timeout 300 "$bench" --coordinator "$coordinator" --nodes 256 --gpus 8 --duration 5 --phase-timeout 30 \
  --enforce-goals --goal-registration 1 --goal-nccl-id 2 --goal-p99 10 --goal-peak-mb 160 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the benchmark exited $rc (a phase did not complete or a goal was missed: see above)"; exit 1; }
for row in "registration: 256 nodes x 8 GPUs READY" "NCCL unique id at all 2048 ranks" "lease grant p99" \
  "coordinator VmHWM" "all phases completed" "coordinator exited 0"; do
  grep -qF "$row" <<<"$out" || { echo "FAIL: no \"$row\" in the output"; exit 1; }
done
if grep -q "MISS" <<<"$out"; then echo "FAIL: a goal was missed"; exit 1; fi
echo "PASS"
