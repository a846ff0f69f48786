#!/usr/bin/env bash
# Two teams share a two-worker loopback cluster (2 CPU slots each) through
# queues (docs/operations.md): team-a and team-b have a nominal quota of 2
# CPU slots each.
#
#   1. alice (team-a) submits a 4-rank job with no restarts to spare and no
#      periodic checkpoints: it runs on all 4 slots, borrowing team-b's idle
#      quota (`ringmaster queues` shows the borrowing);
#   2. bob (team-b) submits a 2-rank job: alice's job is preempted, checkpoint
#      first, and waits; bob's job starts within the grace period + 10 s;
#   3. once bob's job is done, alice's resumes from the preemption's
#      checkpoint and succeeds with 0 restarts used, its final weights equal
#      to an uninterrupted `ringmaster-trainer --nproc 4` run's (1e-5);
#   4. bob may not submit to team-a (PERMISSION_DENIED), nobody to an unknown
#      queue (INVALID_ARGUMENT); `ringmaster usage` equals the placements'
#      durations in the timeline within 1%; a SIGHUP with a broken file
#      keeps the queues.
#
# Usage: queues_test.sh CLI COORDINATOR WORKER TRAINER SPEC DIFF
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
diff_tool=$(realpath "$6")
grace=20

(umask 077
 for user in alice bob; do
   openssl rand -hex 24 >"$state/$user.token"
   echo "$(cat "$state/$user.token") $user" >>"$state/tokens"
 done
 openssl rand -hex 24 >"$state/root.token"
 echo "$(cat "$state/root.token") root admin" >>"$state/tokens")
cat >"$state/queues.yaml" <<'YAML'
fair_share:
  half_life: 1h
queues:
  - name: team-a
    members: [alice]
    nominal: {gpus: 0, cpu_slots: 2}
  - name: team-b
    members: [bob]
    nominal: {gpus: 0, cpu_slots: 2}
YAML
as() { local user=$1; shift; "$cli" --coordinator "$addr" --token-file "$state/$user.token" "$@"; }
rm_cli() { as root "$@"; }  # cluster_lib's helpers ask as the admin
start_coordinator --token-file "$state/tokens" --queues "$state/queues.yaml" --preemption-grace ${grace}s
start_worker n1 2
start_worker n2 2
wait_nodes_ready 2

steps=3000
run=(--set training.steps=$steps --set training.eval_interval_steps=1000000 --set training.log_interval_steps=20
     --set checkpoint.interval_steps=0 --set checkpoint.keep=5 --set restart.max_restarts=0
     --set resources.nodes=2 --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1
     --set parallelism.data=4)

# 1. alice borrows team-b's idle quota.
out=$(as alice submit "$spec" "${run[@]}" 2>&1) || fail "alice's submit: $out"
job=$(job_id_of "$out")
[ "$(job_field "$job" 'r["job"]["spec"]["queue"]')" = team-a ] || fail "alice's job is not in her default queue team-a"
stepping() { [ "$(job_field "$job" 'r["job"].get("progress", {}).get("step", 0)')" -ge "$1" ]; }
wait_until 60 "job $job did not reach step 40" stepping 40
queue_json() { rm_cli queues -o json; }
queues_out=$(rm_cli queues) || fail "ringmaster queues failed"
echo "$queues_out"
borrowed=$(queue_json | python3 -c "import json, sys
q = [q for q in json.load(sys.stdin)['queues'] if q['name'] == 'team-a'][0]
print(q.get('used', {}).get('cpuSlots', 0), q.get('borrowed', {}).get('cpuSlots', 0))")
[ "$borrowed" = "4 2" ] || fail "team-a uses/borrows '$borrowed' CPU slots, want '4 2'"
# bob sees his own queue only.
[ "$(as bob queues -o json | python3 -c 'import json, sys; print([q["name"] for q in json.load(sys.stdin)["queues"]])')" = "['team-b']" ] ||
  fail "bob sees queues other than his own"

# 4. membership and unknown queues.
denied=$(as bob submit "$spec" --set queue=team-a 2>&1) && fail "bob could submit to team-a"
grep -q "PERMISSION_DENIED\|not a member of queue team-a" <<<"$denied" || fail "bob's refusal does not say why: $denied"
unknown=$(as alice submit "$spec" --set queue=team-z 2>&1) && fail "alice could submit to team-z"
grep -q "unknown queue" <<<"$unknown" || fail "the unknown queue's refusal does not say why: $unknown"

# 2. bob's job reclaims team-b's quota.
out=$(as bob submit "$spec" --set training.steps=200 --set resources.nodes=1 --set resources.ranks_per_node=2 \
  --set resources.cpus_per_rank=1 --set parallelism.data=2 2>&1) || fail "bob's submit: $out"
bjob=$(job_id_of "$out")
wait_until $((grace + 30)) "bob's job $bjob did not start" job_in_state "$bjob" JOB_STATE_RUNNING
asked=$(event_reason "$job" PREEMPTION_REQUESTED) || fail "alice's job has no PREEMPTION_REQUESTED event"
echo "preemption: $asked"
grep -q "team-b" <<<"$asked" || fail "the preemption does not say who reclaimed: $asked"
stopped=$(event_reason "$job" PREEMPTED) || fail "alice's job has no PREEMPTED event"
echo "stopped: $stopped"
grep -qE "checkpoint at step [1-9][0-9]* written" <<<"$stopped" || fail "alice's job was not stopped after its checkpoint"
step=$(grep -oE 'step [0-9]+' <<<"$stopped" | head -1 | tr -dc 0-9)
waited=$(python3 -c "import datetime as d, sys
p = lambda t: d.datetime.fromisoformat(t.rstrip('Z')[:26])
print(round((p(sys.argv[2]) - p(sys.argv[1])).total_seconds(), 1))" "$(event_time "$bjob" SUBMITTED)" "$(event_time "$bjob" PLACED)")
awk -v w="$waited" -v g=$grace 'BEGIN { exit !(w <= g + 10) }' ||
  fail "bob's job waited ${waited}s for its placement (> grace ${grace}s + 10s)"

# 3. alice's job waits for bob's, then resumes from the preemption's checkpoint.
wait_until 120 "bob's job $bjob did not succeed" job_in_state "$bjob" JOB_STATE_SUCCEEDED
wait_until 300 "alice's job $job did not succeed" job_in_state "$job" JOB_STATE_SUCCEEDED
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "the preemption used one of alice's restarts"
resumed=$(event_reason "$job" RESTARTING)
echo "resumed: $resumed"
grep -q "resuming from step $step\$" <<<"$resumed" || fail "alice's job did not resume from the preemption checkpoint (step $step)"
ref="$state/ref"
timeout 600 "$trainer" --spec "$spec" "${run[@]}" --nproc 4 --threads 1 --checkpoint-dir "$ref" >"$state/ref.log" 2>&1 ||
  { tail -20 "$state/ref.log"; fail "the uninterrupted --nproc 4 reference failed"; }
worst=$(final_weights_difference "$diff_tool" "$ref" "$job" $steps) || fail "no committed checkpoint of step $steps"
awk -v w="$worst" 'BEGIN { exit !(w != "" && w <= 1e-5) }' ||
  fail "alice's final weights differ from the uninterrupted run's by $worst (> 1e-5)"

# `ringmaster usage` equals the placements' durations (from the timeline) within 1%.
rm_cli describe "$job" -o json >"$state/job.json" || fail "describe $job failed"
rm_cli usage --by job -o json >"$state/usage.json" || fail "ringmaster usage failed"
as alice usage --by user -o json >"$state/usage-alice.json" || fail "ringmaster usage as alice failed"
python3 - "$job" "$state/job.json" "$state/usage.json" "$state/usage-alice.json" <<'PY' || fail "usage does not match the placements"
import datetime as d, json, sys
job, described, usage, mine = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
t = lambda e: d.datetime.fromisoformat(e["time"].rstrip("Z")[:26])
held, start = 0.0, None
for e in described["events"]:
    if e["kind"] in ("JOB_EVENT_KIND_PLACED", "JOB_EVENT_KIND_RESTARTING"):
        start = t(e)
    elif e["kind"] in ("JOB_EVENT_KIND_PREEMPTED", "JOB_EVENT_KIND_SUCCEEDED") and start is not None:
        held += 4 * (t(e) - start).total_seconds()
        start = None
row = [r for r in usage["rows"] if r["key"] == job][0]
got = row.get("cpuSlotSeconds", 0)
print(f"usage: {got:.2f} CPU-slot-seconds over {row.get('placements')} placements; timeline: {held:.2f}")
assert abs(got - held) <= 0.01 * held, (got, held)
assert int(row.get("placements", 0)) == 2, row
assert [r["key"] for r in mine["rows"]] == ["alice"], mine  # alice sees her own usage only
PY

# A broken queues file on SIGHUP: refused, the queues in force stay.
echo "queues: [{name: team-a}]" >"$state/queues.yaml"
kill -HUP "$coordinator_pid"
refused() { grep -q "SIGHUP: the queues in force stay" "$state/coordinator.log"; }
wait_until 10 "the coordinator did not refuse the broken queues file" refused
[ "$(rm_cli queues -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["queues"]))')" = 2 ] ||
  fail "the broken queues file replaced the queues in force"
kill -0 "$coordinator_pid" || fail "the coordinator died on SIGHUP"
echo "PASS: team-a's job $job borrowed, was preempted at step $step for team-b's $bjob (placed after ${waited}s), resumed and succeeded with 0 restarts; weights within $worst of an uninterrupted run"
