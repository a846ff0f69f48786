#!/usr/bin/env bash
# kill -9 of the coordinator with one job running, three queued and one
# cancelled, then a restart on the same --state-dir and address: every job
# (state, priority, submit time), every event of every timeline and every
# committed checkpoint is still there; the running job is adopted (same
# generation, same trainer processes, no restart) and SUCCEEDS; the queued
# jobs then run, by priority then submission order.
# Usage: coordinator_restart_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
start_local_cluster "$@" 1 1

# submit [--set k=v ...]: a tiny 2-rank MLP job over both workers; prints its
# id. keep=1000: no committed checkpoint is pruned during the test.
submit() {
  local out
  out=$(rm_cli submit "$spec" --set resources.nodes=2 --set resources.ranks_per_node=1 \
    --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.log_interval_steps=10 \
    --set lr_schedule.warmup_steps=5 --set checkpoint.keep=1000 "$@" 2>&1) || fail "submit $*: $out"
  job_id_of "$out"
}
running=$(submit --set training.steps=1500 --set checkpoint.interval_steps=50 --set name=running)
wait_until 60 "job $running did not start" job_in_state "$running" JOB_STATE_RUNNING
q1=$(submit --set training.steps=40 --set name=q1)
q2=$(submit --set training.steps=40 --set name=q2)
q3=$(submit --set training.steps=40 --set name=q3 --set priority=3)
cancelled=$(submit --set training.steps=40 --set name=cancelled)
rm_cli cancel "$cancelled" >/dev/null || fail "cancel $cancelled failed"
echo "running=$running queued=$q1 $q2 $q3(priority 3) cancelled=$cancelled"
checkpointed() { [ "$(job_field "$running" 'r["job"].get("lastCheckpoint", {}).get("step", 0)')" -ge 150 ]; }
wait_until 60 "job $running committed no checkpoint of step 150" checkpointed
running_trainers=$(trainer_pids "$running" | sort -n | paste -sd' ')

# What the coordinator knows, as JSON lines: the jobs, each job's events, its
# checkpoints (--all: complete or not).
snapshot() {
  rm_cli jobs --output json || return 1
  for j in "$running" "$q1" "$q2" "$q3" "$cancelled"; do
    rm_cli describe "$j" --output json && rm_cli checkpoints "$j" --all --output json || return 1
  done
}
snapshot >"$state/before.json" || fail "snapshot before the kill failed"
kill -KILL "$coordinator_pid"
wait "$coordinator_pid" 2>/dev/null
echo "coordinator killed (SIGKILL)"
sleep 2
start_coordinator
wait_until 30 "the coordinator did not come back" rm_cli jobs
snapshot >"$state/after.json" || fail "snapshot after the restart failed"

# Everything before is in after: the same jobs (states may only move on for
# the running job), every event unchanged and in order, every checkpoint.
python3 - "$state/before.json" "$state/after.json" "$running" <<'EOF' || fail "state lost across the restart"
import json, sys
before = [json.loads(l) for l in open(sys.argv[1])]
after = [json.loads(l) for l in open(sys.argv[2])]
running = sys.argv[3]
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("lost:", what)
        ok = False
jobs_before = {j["id"]: j for j in before[0]["jobs"]}
jobs_after = {j["id"]: j for j in after[0]["jobs"]}
check(list(jobs_before) == list(jobs_after), "job list %s != %s" % (list(jobs_before), list(jobs_after)))
for jid, jb in jobs_before.items():
    ja = jobs_after.get(jid, {})
    for field in ("spec", "submitTime", "state", "generation", "startTime"):
        check(jb.get(field) == ja.get(field), "%s of %s: %s -> %s" % (field, jid, jb.get(field), ja.get(field)))
for i in range(1, len(before), 2):
    jid = before[i]["job"]["id"]
    eb, ea = before[i].get("events", []), after[i].get("events", [])
    check(ea[:len(eb)] == eb, "events of %s" % jid)
    extra = [e["kind"] for e in ea[len(eb):]]
    if jid != running:
        check(not extra, "new events of %s: %s" % (jid, extra))
    cb = {(c["generation"], c["step"]): c for c in before[i + 1].get("checkpoints", [])}
    ca = {(c["generation"], c["step"]): c for c in after[i + 1].get("checkpoints", [])}
    for key, c in cb.items():
        check(ca.get(key) == c, "checkpoint %s of %s" % (key, jid))
    if cb:
        print("%s: %d events, %d checkpoints (steps %s..%s) kept" % (jid, len(eb), len(cb), min(int(k[1]) for k in cb), max(int(k[1]) for k in cb)))
sys.exit(0 if ok else 1)
EOF
echo "after the restart: every job, event and committed checkpoint is there"

wait_until 120 "job $running did not succeed after the restart" job_in_state "$running" JOB_STATE_SUCCEEDED
[ "$(job_field "$running" 'r["job"]["generation"]')" = 1 ] || fail "job $running was restarted, not adopted"
kinds=$(job_field "$running" '" ".join(e["kind"][15:] for e in r["events"] if e["kind"] != "JOB_EVENT_KIND_CHECKPOINT_COMMITTED")')
echo "timeline of $running: $kinds"
grep -q RECOVERED <<<"$kinds" || fail "no RECOVERED event"
! grep -qE "RESTARTING|NODE_LOST|RANK_EXITED" <<<"$kinds" || fail "$running was disturbed by the restart: $kinds"
# The ranks that finished are the ones started before the kill.
for p in $running_trainers; do
  grep -q "job $running generation 1: rank [01] (pid $p) exited with status 0" "$state"/n[12].log ||
    fail "trainer $p of $running did not run to its end"
done
for j in "$q3" "$q1" "$q2"; do
  wait_until 90 "queued job $j did not succeed" job_in_state "$j" JOB_STATE_SUCCEEDED
done
event_before "$q3" PLACED "$q1" PLACED || fail "priority: $q1 (0) placed before $q3 (3)"
event_before "$q1" PLACED "$q2" PLACED || fail "FIFO: $q2 placed before $q1, submitted before it"
job_in_state "$cancelled" JOB_STATE_CANCELLED || fail "$cancelled is $(job_state "$cancelled")"
echo "PASS: nothing lost across kill -9 of the coordinator; $running adopted and succeeded; queue ran $q3 $q1 $q2"
