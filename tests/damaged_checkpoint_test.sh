#!/usr/bin/env bash
# A damaged committed checkpoint is never fatal: one byte of the
# newest committed checkpoint is flipped and a trainer killed -9. The next
# generation finds the damage, the coordinator marks that checkpoint bad
# (timeline, `checkpoints`) and restarts from the one before, without using a
# restart, and the job succeeds. SCENARIO:
#   flip                the byte alone: the checkpoint's manifest tells
#   rewritten_manifest  and the manifest rewritten to match the altered file:
#                       only the SHA-256s the coordinator recorded at commit
#                       tell
# Usage: damaged_checkpoint_test.sh SCENARIO CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
scenario=$1
shift
case $scenario in flip | rewritten_manifest) ;; *) echo "unknown scenario $scenario"; exit 2 ;; esac
start_local_cluster "$@" 2

steps=300
out=$(rm_cli submit "$spec" --set training.steps=$steps --set training.eval_interval_steps=1000000 \
  --set training.log_interval_steps=30 --set checkpoint.interval_steps=30 --set checkpoint.keep=5 \
  --set lr_schedule.warmup_steps=5 --set lr_schedule.decay_steps=$((steps - 5)) --set resources.nodes=1 \
  --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1 --set parallelism.data=2 \
  --set restart.max_restarts=1 2>&1) || fail "submit failed: $out"
job=$(job_id_of "$out")

checkpoints() { rm_cli checkpoints "$job" -o json | python3 -c "import json, sys; print($1)"; }
two_checkpoints() { [ "$(checkpoints 'len(json.load(sys.stdin).get("checkpoints", []))')" -ge 2 ]; }
wait_until 300 "job $job committed no two checkpoints" two_checkpoints

# Freeze the job so that the newest checkpoint stays the newest, damage it,
# kill one trainer, let the other go on (and fail its collective).
frozen=$(trainer_pids "$job")
[ -n "$frozen" ] || fail "no trainer of job $job is running"
kill -STOP $frozen
# A commit the stopped rank 0 sent just before the stop still lands: read the
# newest checkpoint until two reads half a second apart agree (a commit is a
# loopback round trip of milliseconds), else the resume would use a newer,
# intact one.
newest=$(checkpoints 'json.load(sys.stdin)["checkpoints"][0]')
for _ in $(seq 10); do
  sleep 0.5
  again=$(checkpoints 'json.load(sys.stdin)["checkpoints"][0]')
  [ "$again" = "$newest" ] && break
  newest=$again
done
path=$(python3 -c "import ast, sys; print(ast.literal_eval(sys.argv[1])['path'])" "$newest")
step=$(python3 -c "import ast, sys; print(ast.literal_eval(sys.argv[1])['step'])" "$newest")
python3 - "$path" "$scenario" <<'EOF'
import hashlib, json, os, sys
path, scenario = sys.argv[1], sys.argv[2]
model = os.path.join(path, "model.safetensors")
with open(model, "r+b") as f:
    f.seek(os.path.getsize(model) // 2)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0xFF]))
if scenario == "rewritten_manifest":  # the manifest now vouches for the altered file
    manifest = os.path.join(path, "MANIFEST.json")
    m = json.load(open(manifest))
    for entry in m["files"]:
        if entry["name"] == "model.safetensors":
            entry["sha256"] = hashlib.sha256(open(model, "rb").read()).hexdigest()
    json.dump(m, open(manifest, "w"))
EOF
victim=$(pgrep -f -- "--rank-context $state/.*/$job/gen-1/rank-1/rank.json" | head -1)
kill -9 "$victim"
# The frozen ranks go on only once generation 1 is over: rank 0 may have been
# stopped between writing a newer checkpoint and committing it, and that
# commit, sent before the coordinator knew of the kill, would be resumed from
# instead of the damaged one (it is fenced once the generation is over).
gen1_over() { [ "$(job_field "$job" 'r["job"]["state"] != "JOB_STATE_RUNNING" or int(r["job"]["generation"]) >= 2')" = True ]; }
wait_until 60 "generation 1 of job $job did not end after the kill" gen1_over
kill -CONT $frozen 2>/dev/null
echo "flipped a byte of step $step ($path, $scenario) and killed rank 1"

wait_until 600 "job $job did not succeed" job_in_state "$job" JOB_STATE_SUCCEEDED
damaged=$(event_reason "$job" CHECKPOINT_DAMAGED) || fail "no CHECKPOINT_DAMAGED event"
grep -q "checkpoint at step $step (generation 1) is damaged" <<<"$damaged" || fail "the damage event names another checkpoint: $damaged"
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 1 ] || fail "the damaged checkpoint used a restart"
resumes=$(job_field "$job" '"|".join(e["reason"] for e in r["events"] if e["kind"] == "JOB_EVENT_KIND_RESTARTING")')
echo "restarts: $resumes"
grep -q "resuming from step $step" <<<"$resumes" || fail "no generation tried the newest checkpoint first"
last=$(grep -oE 'resuming from step [0-9]+' <<<"${resumes##*|}" | grep -oE '[0-9]+$')
[ -n "$last" ] && [ "$last" -lt "$step" ] || fail "the last restart did not resume from an earlier checkpoint: $resumes"
rm_cli checkpoints "$job" >"$state/checkpoints.txt" || fail "checkpoints failed"
grep -qE "^$step +1 +BAD" "$state/checkpoints.txt" || { cat "$state/checkpoints.txt"; fail "checkpoints does not show step $step as BAD"; }
echo "PASS ($scenario): damaged step $step marked bad, resumed from step $last, job succeeded with 1 restart"
