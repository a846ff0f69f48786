#!/usr/bin/env bash
# Four ranks train data-parallel (started by hand, as a worker would); rank 2 is
# killed with SIGKILL mid-training. The other three must exit non-zero with an
# error naming the failed collective within the configured timeout, and no
# trainer may be left running.
# Usage: rank_failure_test.sh TRAINER SPEC
set -uo pipefail
trainer=$1 spec=$2
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
timeout_s=10
rm -rf "$tmp/rdv" && mkdir -p "$tmp/rdv"
pids=()
for r in 0 1 2 3; do
  RINGMASTER_RANK=$r RINGMASTER_WORLD_SIZE=4 RINGMASTER_RENDEZVOUS="file:$tmp/rdv" \
    "$trainer" --spec "$spec" --set parallelism.data=4 --set resources.ranks_per_node=4 \
    --set training.steps=100000 --set lr_schedule.warmup_steps=5 --threads 1 --timeout "$timeout_s" \
    >"$tmp/rank$r.log" 2>&1 &
  pids+=($!)
done
cleanup() { kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
# Wait until training runs (rank 0 prints progress lines), then kill rank 2.
for _ in $(seq 600); do
  grep -q '^step ' "$tmp/rank0.log" 2>/dev/null && break
  sleep 0.1
done
grep -q '^step ' "$tmp/rank0.log" || { echo "FAIL: training never started"; cat "$tmp"/rank*.log; exit 1; }
kill -9 "${pids[2]}"
killed_at=$(date +%s.%N)
fail=0
for r in 0 1 3; do
  wait "${pids[$r]}"
  rc=$?
  took=$(echo "$(date +%s.%N) - $killed_at" | bc)
  msg=$(grep 'ringmaster-trainer:' "$tmp/rank$r.log" | tail -1)
  echo "rank $r: exit $rc after ${took}s: $msg"
  [ "$rc" -ne 0 ] || { echo "FAIL: rank $r exited 0"; fail=1; }
  awk -v t="$took" -v lim="$timeout_s" 'BEGIN { exit !(t <= lim + 5) }' ||
    { echo "FAIL: rank $r took ${took}s (timeout ${timeout_s}s)"; fail=1; }
  echo "$msg" | grep -qE '(allreduce|broadcast|reduce_scatter|all_gather|barrier|send|recv).*(rank|\[)' ||
    { echo "FAIL: rank $r's error does not name the collective"; fail=1; }
done
wait "${pids[2]}" 2>/dev/null
for p in "${pids[@]}"; do
  kill -0 "$p" 2>/dev/null && { echo "FAIL: trainer $p still running"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: the 3 surviving ranks stopped with an error"
exit $fail
