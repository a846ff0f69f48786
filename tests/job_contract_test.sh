#!/usr/bin/env bash
# What a cluster refuses, and says why, on a loopback cluster of
# one coordinator and one worker with 2 CPU slots:
#   - a spec the trainer rejects fails the job at once, no restart used;
#   - a checkpoint.directory outside the coordinator's allowed roots is
#     refused at submission, naming the field;
#   - a data.path outside the worker's data roots fails the job at once,
#     naming the field;
#   - a job no registered node could run (a GPU job on a CPU-only cluster)
#     says why in submit (a warning), jobs and describe while it waits;
#   - a data.path inside the roots that holds no data fails the job at once
#     (the trainer rejects its input), no restart used.
# Usage: job_contract_test.sh CLI COORDINATOR WORKER TRAINER SPEC GPT_SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
gpt_spec=$(realpath "$6")
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
start_coordinator
mkdir -p "$state/data"
start_worker n1 2 --data-roots "/usr/share/datasets,$state/data"
wait_nodes_ready 1

small=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1
       --set parallelism.data=1 --set training.steps=20 --set lr_schedule.warmup_steps=2
       --set lr_schedule.decay_steps=10 --set restart.max_restarts=3)

# 1. A spec only the trainer can judge: a corpus shorter than one context
#    window. The job fails at once: no restart can fix its data.
printf 'too short' >"$state/data/tiny.txt"
out=$(timeout 120 "$cli" --coordinator "$addr" submit "$gpt_spec" --wait "${small[@]}" \
  --set data.path="$state/data/tiny.txt" 2>&1)
rc=$?
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
[ $rc -ne 0 ] || fail "submit --wait of a spec the trainer rejects exited 0"
[ "$(job_state "$job")" = JOB_STATE_FAILED ] || fail "job $job is $(job_state "$job"), not FAILED"
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "job $job used restarts on a spec error"
[ "$(job_field "$job" 'r["job"]["reason"]')" = Unrecoverable ] || fail "job $job's reason is not Unrecoverable"
message=$(job_field "$job" 'r["job"]["message"]')
grep -q "tiny.txt: training split: .* fewer than one window" <<<"$message" || fail "the job's message does not say why: $message"
grep -q "exited with code 78" <<<"$message" || fail "the trainer did not exit unrecoverable: $message"
grep -q "not restarted: a restart cannot fix this" <<<"$message" || fail "the message does not say why: $message"
echo "PASS: a spec the trainer rejects: FAILED at once, 0 restarts ($message)"

# 2. checkpoint.directory outside the allowed roots: refused at submission.
out=$(rm_cli submit "$spec" "${small[@]}" --set checkpoint.directory=/etc/other-job 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "a checkpoint.directory outside the roots was accepted: $out"
grep -q "checkpoint.directory: /etc/other-job is not within a checkpoint root" <<<"$out" ||
  fail "the refusal does not name checkpoint.directory: $out"
echo "PASS: checkpoint.directory outside the allowed roots refused: $(tail -1 <<<"$out")"

# 3. data.path outside the worker's data roots (here: its own state
#    directory): the job fails at once, and no trainer ever reads the file.
out=$(timeout 60 "$cli" --coordinator "$addr" submit "$spec" --wait "${small[@]}" \
  --set data.path="$state/n1" 2>&1)
rc=$?
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
[ $rc -ne 0 ] || fail "a data.path outside the data roots ran"
[ "$(job_state "$job")" = JOB_STATE_FAILED ] || fail "job $job is $(job_state "$job"), not FAILED"
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "job $job used restarts"
message=$(job_field "$job" 'r["job"]["message"]')
grep -q "data.path: $state/n1 is outside this node's data roots" <<<"$message" ||
  fail "the message does not name data.path: $message"
[ -z "$(trainer_pids "$job")" ] && [ ! -e "$state/n1/ranks/$job/gen-1/rank-0/rank.json" ] ||
  fail "a trainer was started for job $job"
echo "PASS: data.path outside the data roots: FAILED at once ($message)"

# 4. A GPU job on this CPU-only cluster: submit warns, jobs and describe say why.
out=$(rm_cli submit "$spec" "${small[@]}" --set resources.device=cuda 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "submit of a GPU job failed: $out"
job=$(job_id_of "$out")
grep -q "warning: no node registered now could run this job: needs 1 node with 1 free GPU each" <<<"$out" ||
  fail "submit did not warn: $out"
grep -q "set resources.device: cpu" <<<"$out" || fail "the warning does not suggest the fix: $out"
rm_cli jobs >"$state/jobs.txt" 2>&1 || fail "jobs failed"
grep -qE "^$job .*QUEUED \(unschedulable\)" "$state/jobs.txt" || { cat "$state/jobs.txt"; fail "jobs does not mark $job unschedulable"; }
grep -q "^$job: needs 1 node with 1 free GPU each" "$state/jobs.txt" || { cat "$state/jobs.txt"; fail "jobs does not say why"; }
rm_cli describe "$job" >"$state/describe.txt" 2>&1 || fail "describe failed"
grep -q "Unschedulable: *needs 1 node with 1 free GPU each" "$state/describe.txt" ||
  { cat "$state/describe.txt"; fail "describe does not say why"; }
rm_cli cancel "$job" >/dev/null || fail "cancel failed"
echo "PASS: a GPU job on a CPU-only cluster: warned at submit, jobs and describe say why"

# 5. A data.path within the roots where there is no data: the trainer rejects
#    its input, the job fails at once, no restart burnt.
out=$(timeout 120 "$cli" --coordinator "$addr" submit "$gpt_spec" --wait "${small[@]}" \
  --set data.path="$state/data/missing.txt" 2>&1)
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
[ "$(job_state "$job")" = JOB_STATE_FAILED ] || fail "job $job is $(job_state "$job"), not FAILED"
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "job $job used restarts on missing data"
message=$(job_field "$job" 'r["job"]["message"]')
grep -q "data.path: .*missing.txt" <<<"$message" || fail "the message does not name data.path: $message"
echo "PASS: a data.path with no data: FAILED at once, 0 restarts ($message)"
