#!/usr/bin/env bash
# `ringmaster cancel` of a running 2-rank job spread over 2 workers: within
# 10 s no process is left in the trainers' process groups (each rank runs in
# its own group), the job is CANCELLED with the reason given, it is not
# restarted, and the slots are free again.
# Usage: cancel_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
start_local_cluster "$@" 1 1

out=$(rm_cli submit "$spec" --set resources.nodes=2 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1 \
  --set parallelism.data=2 --set training.steps=100000 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=0 2>&1) || fail "submit: $out"
job=$(job_id_of "$out")
stepping() { [ "$(job_field "$job" 'r["job"].get("progress", {}).get("step", 0)')" -ge 20 ]; }
wait_until 60 "job $job did not reach step 20" stepping

trainers=$(trainer_pids "$job" | sort -n)
[ "$(wc -w <<<"$trainers")" -eq 2 ] || fail "expected 2 trainers of $job, found: $trainers"
pgids=()
for p in $trainers; do
  g=$(ps -o pgid= -p "$p" | tr -d ' ')
  [ "$g" = "$p" ] || fail "trainer $p is not the leader of its own process group (pgid $g)"
  pgids+=("$g")
done
echo "trainers of $job: pids/pgids ${pgids[*]}"

rm_cli cancel "$job" --reason "cancel_test" >"$state/cancel.txt" 2>&1 || { cat "$state/cancel.txt"; fail "cancel exited non-zero"; }
groups=$(IFS=,; echo "${pgids[*]}")
for _ in $(seq 50); do
  pgrep -g "$groups" >/dev/null || break
  sleep 0.2
done
left=$(pgrep -a -g "$groups")
[ -z "$left" ] || fail "processes left in the trainers' groups 10 s after cancel: $left"
echo "every process of groups ${pgids[*]} is gone"

[ "$(job_state "$job")" = JOB_STATE_CANCELLED ] || fail "job $job is $(job_state "$job"), not CANCELLED"
reason=$(job_field "$job" "[e['reason'] for e in r['events'] if e['toState'] == 'JOB_STATE_CANCELLED'][0]")
grep -q "cancel_test" <<<"$reason" || fail "the CANCELLED event does not give the reason: $reason"
[ "$(job_field "$job" 'r["job"]["generation"]')" = 1 ] || fail "the cancelled job was restarted"
# The ranks' exits were reported: their slots are free for the next job.
slots_free() {
  rm_cli nodes --output json | python3 -c '
import json, sys
sys.exit(0 if all(not n.get("allocations") for n in json.load(sys.stdin)["nodes"]) else 1)'
}
wait_until 10 "the cancelled job's slots were not released" slots_free
echo "PASS: cancelled $job: its process groups are empty, state CANCELLED, slots free"
