#!/usr/bin/env bash
# A local cluster on loopback: 1 coordinator + 2 workers x 2 CPU slots run a
# 4-rank data-parallel job to completion through the CLI; rank 0's checkpoints
# are committed and listed, `describe` shows the timeline, `logs` has every
# rank. Everything started here is stopped and reaped at the end.
# Usage: cluster_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
cli=$(realpath "$1") coordinator=$(realpath "$2") worker=$(realpath "$3") trainer=$(realpath "$4") spec=$(realpath "$5")
# Short paths: the workers' agent sockets live in their state directories.
state=$(mktemp -d /tmp/ringmaster-cluster-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  pkill -KILL -f "$state" 2>/dev/null
  rm -rf "$state"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$state"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
"$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "" --heartbeat-interval 500ms \
  >"$state/coordinator.log" 2>&1 &
pids+=($!)
for w in 1 2; do
  "$worker" --coordinator "$addr" --cpu-slots 2 --state-dir "$state/w$w" --trainer "$trainer" \
    --listen-address 127.0.0.1 --node-name "node$w" \
    --metrics-listen "" >"$state/worker$w.log" 2>&1 &
  pids+=($!)
done
rm_cli() { "$cli" --coordinator "$addr" "$@"; }
for _ in $(seq 150); do
  [ "$(rm_cli nodes 2>/dev/null | grep -c READY)" -ge 2 ] && break
  sleep 0.2
done
[ "$(rm_cli nodes 2>/dev/null | grep -c READY)" -ge 2 ] || fail "the two workers did not register"

start=$(date +%s)
out=$(timeout 600 "$cli" --coordinator "$addr" submit "$spec" --wait \
  --set resources.nodes=2 --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1 \
  --set parallelism.data=4 --set training.steps=60 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=20 --set lr_schedule.warmup_steps=5 2>&1)
rc=$?
echo "$out" | tail -5
[ $rc -eq 0 ] || fail "submit --wait exited $rc"
job=$(echo "$out" | grep -oE '\bj-[A-Za-z0-9-]+' | head -1)
[ -n "$job" ] || fail "no job id in: $out"
echo "job $job finished in $(( $(date +%s) - start ))s"

rm_cli describe "$job" >"$state/describe.txt" 2>&1 || fail "describe failed"
for s in QUEUED PLACED STARTING RUNNING SUCCEEDED; do
  grep -q "$s" "$state/describe.txt" || { cat "$state/describe.txt"; fail "the timeline has no $s"; }
done
rm_cli checkpoints "$job" >"$state/checkpoints.txt" 2>&1 || fail "checkpoints failed"
grep -qE '\b60\b' "$state/checkpoints.txt" || { cat "$state/checkpoints.txt"; fail "no committed checkpoint of step 60"; }
rm_cli logs "$job" >"$state/logs.txt" 2>&1 || fail "logs failed"
for r in 0 1 2 3; do
  grep -q "^\[rank $r\]" "$state/logs.txt" || { head "$state/logs.txt"; fail "no log line from rank $r"; }
done
echo "PASS: 4-rank job on 2 workers: succeeded, checkpoints committed, timeline and logs complete"
