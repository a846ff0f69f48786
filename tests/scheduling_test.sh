#!/usr/bin/env bash
# Gang scheduling on a real cluster (coordinator/core/scheduler.h has the rules).
#
# Part 1: 2 workers x 1 CPU slot, four 2-rank gangs (capacity for one at a
# time): A runs; B and C (priority 0) and then D (priority 5) queue. While they
# run, polling `jobs --output json` and the trainer processes: a queued job
# has no placement and no trainer; never two gangs hold ranks at once (a
# partial gang would need that). Order of placement: A, D (priority), B, C
# (FIFO).
#
# Part 2 (backfill): a third worker with 2 slots, labelled pool=big. R (1 rank,
# pool=big) runs there; the head H (1 node x 2 ranks: only the big node can
# ever hold it) is blocked and reserves it. S_fit (1 rank, any node) runs at
# once on a small node ahead of H (backfilled: it cannot delay H); S_delay
# (1 rank, pool=big) would take the big node's free slot and delay H, so it
# waits. Then R is cancelled: H runs, then S_delay.
# Usage: scheduling_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
start_local_cluster "$@" 1 1

# submit [--set k=v ...]: a tiny MLP job, 1 CPU per rank; prints its id.
submit() {
  local out
  out=$(rm_cli submit "$spec" --set resources.cpus_per_rank=1 --set training.log_interval_steps=20 \
    --set checkpoint.interval_steps=0 --set lr_schedule.warmup_steps=5 "$@" 2>&1) || fail "submit $*: $out"
  job_id_of "$out"
}
gang=(--set resources.nodes=2 --set resources.ranks_per_node=1 --set parallelism.data=2)
single=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set parallelism.data=1)

# One poll: the live trainers (by job), then every job's state and placement
# (in that order: a trainer seen before the listing belongs to a job placed
# before it). Prints "FAIL ..." on a violation, "DONE" when all are terminal.
poll_gangs() {
  local trainers jobs_json
  trainers=$(for p in $(trainer_pids); do
    tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep '^RINGMASTER_JOB_ID=' | cut -d= -f2
  done)
  jobs_json=$(rm_cli jobs --output json) || return 0  # a failed call is not evidence
  TRAINERS="$trainers" python3 -c '
import json, os, sys
jobs = json.loads(sys.argv[1]).get("jobs", [])
live = {}
for j in os.environ["TRAINERS"].split():
    live[j] = live.get(j, 0) + 1
if len(live) > 1:
    print("FAIL trainers of two 2-rank gangs at once on 2 slots: %s" % live)
holding = []
for job in jobs:
    res = job["spec"]["resources"]
    state, world = job["state"], res.get("nodes", 1) * res.get("ranksPerNode", 1)
    ranks = job.get("placement", {}).get("worldSize", 0)  # a summary: the shape of the placement, not its ranks
    if state == "JOB_STATE_QUEUED" and (ranks or live.get(job["id"])):
        print("FAIL queued job %s has %d placed rank(s) and %d trainer(s)" % (job["id"], ranks, live.get(job["id"], 0)))
    if state in ("JOB_STATE_PLACED", "JOB_STATE_STARTING", "JOB_STATE_RUNNING"):
        if ranks != world:
            print("FAIL %s job %s has %d of %d ranks placed" % (state, job["id"], ranks, world))
        holding.append(job["id"])
if len(holding) > 1:
    print("FAIL two 2-rank gangs placed at once on 2 slots: %s" % holding)
if jobs and all(j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") for j in jobs):
    print("DONE")
' "$jobs_json"
}

echo "part 1: four 2-rank gangs on 2 slots"
a=$(submit "${gang[@]}" --set training.steps=300 --set name=a)
wait_until 60 "job $a did not start" job_in_state "$a" JOB_STATE_RUNNING
b=$(submit "${gang[@]}" --set training.steps=60 --set name=b)
c=$(submit "${gang[@]}" --set training.steps=60 --set name=c)
d=$(submit "${gang[@]}" --set training.steps=60 --set name=d --set priority=5)
echo "a=$a b=$b c=$c d=$d"
job_in_state "$b" JOB_STATE_QUEUED || fail "$b should queue behind $a (state $(job_state "$b"))"
polls=0 done=0
for _ in $(seq 600); do  # at most ~2 minutes
  verdict=$(poll_gangs)
  polls=$((polls + 1))
  grep -q FAIL <<<"$verdict" && { rm_cli jobs; fail "$(grep FAIL <<<"$verdict")"; }
  grep -q DONE <<<"$verdict" && { done=1; break; }
  sleep 0.1
done
[ $done -eq 1 ] || { rm_cli jobs; fail "part 1 did not finish"; }
echo "polled $polls times: no partial gang, never two gangs at once"
for j in "$a" "$b" "$c" "$d"; do
  job_in_state "$j" JOB_STATE_SUCCEEDED || fail "job $j ended $(job_state "$j")"
done
event_before "$a" PLACED "$d" PLACED || fail "$d placed before the running $a"
event_before "$d" PLACED "$b" PLACED || fail "priority: $b (0) placed before $d (5) submitted after it"
event_before "$b" PLACED "$c" PLACED || fail "FIFO: $c placed before $b, submitted before it"
event_before "$a" SUCCEEDED "$d" PLACED || fail "$d placed before $a ended"
echo "order of placement: $a, $d (priority 5), $b, $c (FIFO)"

echo "part 2: backfill"
start_worker n3 2 --label pool=big
wait_nodes_ready 3
r=$(submit "${single[@]}" --set training.steps=1000000 --set name=r --set resources.node_selector.pool=big)
wait_until 60 "job $r did not start" job_in_state "$r" JOB_STATE_RUNNING
h=$(submit --set resources.nodes=1 --set resources.ranks_per_node=2 --set parallelism.data=2 \
  --set training.steps=60 --set name=h)
s_delay=$(submit "${single[@]}" --set training.steps=60 --set name=s_delay --set resources.node_selector.pool=big)
s_fit=$(submit "${single[@]}" --set training.steps=60 --set name=s_fit)
echo "r=$r h=$h s_delay=$s_delay s_fit=$s_fit"
wait_until 60 "backfill: $s_fit did not run ahead of the blocked head $h" job_in_state "$s_fit" JOB_STATE_SUCCEEDED
# While R still runs: H blocked, S_delay held back although n3 has a free slot.
job_in_state "$r" JOB_STATE_RUNNING || fail "$r is $(job_state "$r"), not RUNNING"
job_in_state "$h" JOB_STATE_QUEUED || fail "head $h should wait for $r (state $(job_state "$h"))"
job_in_state "$s_delay" JOB_STATE_QUEUED || fail "$s_delay took the big node's slot the head $h waits for"
free_big=$(rm_cli nodes --output json | python3 -c '
import json, sys
n = [n for n in json.load(sys.stdin)["nodes"] if n["hostname"] == "n3"][0]
print(n["cpuSlots"] - sum(a.get("cpuSlots", 0) for a in n.get("allocations", [])))')
[ "$free_big" = 1 ] || fail "n3 should have 1 free slot while only $r runs, has $free_big"
event_reason "$s_fit" PLACED | grep -q backfilled || fail "$s_fit's placement does not say backfilled"
# R ends (it would run for minutes): H, then S_delay, get n3.
rm_cli cancel "$r" >/dev/null || fail "cancel $r failed"
for j in "$h" "$s_delay"; do
  wait_until 90 "job $j did not succeed" job_in_state "$j" JOB_STATE_SUCCEEDED
done
event_before "$s_fit" PLACED "$h" PLACED || fail "$s_fit was not placed before the head $h"
event_before "$h" PLACED "$s_delay" PLACED || fail "$s_delay was placed before the head $h"
echo "PASS: gangs whole, priority then FIFO, backfill only where it cannot delay the head"
