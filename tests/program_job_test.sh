#!/usr/bin/env bash
# A user's own PyTorch program (examples/pytorch_ddp: DDP over Gloo, the
# Python SDK) as a program job, through a real coordinator and workers:
#   - an uninterrupted run, the reference;
#   - the same run with one rank kill -9'd after a committed checkpoint,
#     rendezvous through MASTER_ADDR/MASTER_PORT: the job restarts from that
#     checkpoint, succeeds, and ends with the reference's weights (1e-6);
#   - the same with ringmaster.torch.store() (the coordinator's key-value
#     store) instead of MASTER_ADDR.
# Scenario drain: `ringmaster nodes drain` of the program's node: the
# program saves on the SDK's request, the job moves to the other node with 0
# restarts used, resumes from that checkpoint and succeeds.
# Usage: program_job_test.sh CLI COORDINATOR WORKER TRAINER SPEC SDK-INIT JOB-YAML kill|drain
# (SDK-INIT: the SDK tree's ringmaster/__init__.py)
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
sdk=$(dirname "$(dirname "$(realpath "$6")")")
job_yaml=$(realpath "$7")
scenario=$8
export PATH=/usr/local/bin:/usr/bin:/bin  # /usr/bin/python3 (Debian's torch), not a shim
cluster_init "$1" "$2" "$3" "$4"
start_coordinator
start_worker n1 2 --python-sdk "$sdk"
[ "$scenario" = drain ] && start_worker n2 2 --python-sdk "$sdk"
wait_nodes_ready "$([ "$scenario" = drain ] && echo 2 || echo 1)"

steps=60
# The program's rank processes of this cluster's job JOB with RANK=R.
rank_pid() {
  local job=$1 rank=$2 pid env
  for pid in $(pgrep -f "train.py" || true); do
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    grep -qx "RINGMASTER_RANK_CONTEXT=$state/n[12]/ranks/$job/.*" <<<"$env" && grep -qx "RANK=$rank" <<<"$env" &&
      echo "$pid"
  done
  return 0
}
has_rank_pid() { [ -n "$(rank_pid "$1" "$2")" ]; }
committed_step() {
  rm_cli checkpoints "$1" -o json |
    python3 -c "import json, sys; print(max([int(c['step']) for c in json.load(sys.stdin).get('checkpoints', []) if c.get('complete')] or [0]))"
}
has_commit() { [ "$(committed_step "$1" 2>/dev/null)" -ge 20 ]; }

# submit STORE FINAL [STEP-SECONDS]: the example with STORE rendezvous, its
# final weights to FINAL; prints the job id.
submit() {
  local out
  out=$(rm_cli submit "$job_yaml" \
    --set "program.command=[python3, train.py, --steps, $steps, --checkpoint-every, 20, --report-every, 5, --store, $1, --final-weights, $2, --step-seconds, ${3:-0}]")
  job_id_of "$out"
}

# The drain: the program (reporting through the SDK) is asked for a
# checkpoint, saves it, and the job moves to the other node, restarts unused.
if [ "$scenario" = drain ]; then
  job=$(submit ringmaster "$state/drained.pt" 0.1)
  [ -n "$job" ] || fail "submit printed no job id"
  stepping() { [ "$(job_field "$job" 'r["job"].get("progress", {}).get("step", 0)')" -ge 10 ]; }
  wait_until 60 "job $job reported no progress to step 10" stepping
  first=$(job_field "$job" 'r["job"]["placement"]["ranks"][0]["hostname"]')
  rm_cli nodes drain "$first" --reason program_job_test --timeout 120s >"$state/drain.txt" 2>&1 ||
    { cat "$state/drain.txt"; fail "nodes drain $first exited non-zero"; }
  moved=$(event_reason "$job" NODE_DRAINED)
  grep -qE "moved off node $first, which is being drained: checkpoint at step [1-9][0-9]* written" <<<"$moved" ||
    fail "the program was not moved after a checkpoint of its own: $moved"
  wait_until 120 "job $job did not succeed after the drain" job_in_state "$job" JOB_STATE_SUCCEEDED
  [ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "the drain used a restart"
  [ "$(job_field "$job" 'r["job"]["placement"]["ranks"][0]["hostname"]')" != "$first" ] ||
    fail "job $job ended on the drained node $first"
  resumed=$(event_reason "$job" RESTARTING)
  grep -q "resuming from step $(grep -oE 'step [0-9]+' <<<"$moved" | tr -dc 0-9)\$" <<<"$resumed" ||
    fail "did not resume from the drain's checkpoint: $resumed"
  echo "drained: $moved; $resumed; 0 restarts used"

  # A program that never talks to Ringmaster: a drain stops it at once
  # (SIGTERM first), it starts again on the other node, restarts unused;
  # a cancel stops it too.
  cat >"$state/silent.sh" <<'SH'
trap 'echo "got SIGTERM"; exit 0' TERM
echo "silent rank $RANK of $WORLD_SIZE, master $MASTER_ADDR:$MASTER_PORT"
while :; do sleep 0.1; done
SH
  rm_cli nodes uncordon "$first" >/dev/null || fail "uncordon $first"
  out=$(rm_cli submit "$job_yaml" --set "program.command=[sh, $state/silent.sh]" --set restart.max_restarts=0)
  silent=$(job_id_of "$out")
  [ -n "$silent" ] || fail "submit of the silent program printed no job id: $out"
  wait_until 30 "the silent program $silent did not run" job_in_state "$silent" JOB_STATE_RUNNING
  on=$(job_field "$silent" 'r["job"]["placement"]["ranks"][0]["hostname"]')
  said_hello() { local log; log=$(rm_cli logs "$silent" --rank 0 2>&1); grep -q "silent rank 0 of 2, master 127.0.0.1:29" <<<"$log"; }
  wait_until 30 "the silent program printed nothing" said_hello
  rm_cli nodes drain "$on" --reason program_job_test --timeout 60s >"$state/drain2.txt" 2>&1 ||
    { cat "$state/drain2.txt"; fail "nodes drain $on exited non-zero"; }
  grep -q "the program reports no progress" <<<"$(event_reason "$silent" NODE_DRAINED)" ||
    fail "the silent program was not stopped at once: $(event_reason "$silent" NODE_DRAINED)"
  log=$(rm_cli logs "$silent" --rank 0 --generation 1 2>&1)
  grep -q "got SIGTERM" <<<"$log" || fail "the silent program got no SIGTERM: $log"
  wait_until 30 "the silent program did not run again" job_in_state "$silent" JOB_STATE_RUNNING
  [ "$(job_field "$silent" 'r["job"].get("restarts", 0)')" = 0 ] || fail "the drain of the silent program used a restart"
  rm_cli cancel "$silent" >/dev/null || fail "cancel $silent"
  wait_until 30 "the silent program was not cancelled" job_in_state "$silent" JOB_STATE_CANCELLED
  echo "PASS: the SDK program saved on request and moved; the silent one was stopped (SIGTERM), moved and cancelled"
  exit 0
fi

# The README's and job.yaml's own line, as written: the live progress line,
# then SUCCEEDED.
out=$(cd "$(dirname "$job_yaml")/../.." && timeout 300 "$cli" --coordinator "$addr" submit examples/pytorch_ddp/job.yaml --follow 2>&1) ||
  fail "submit examples/pytorch_ddp/job.yaml --follow failed: $out"
grep -qE "step [0-9]+/200 .*loss [0-9.]+ .*samples/s" <<<"$out" || fail "no progress line in: $out"
grep -q SUCCEEDED <<<"$out" || fail "no SUCCEEDED in: $out"
echo "submit examples/pytorch_ddp/job.yaml --follow: $(grep -c . <<<"$out") lines, SUCCEEDED"

ref=$(submit env "$state/ref.pt")
[ -n "$ref" ] || fail "submit printed no job id"
wait_until 120 "the uninterrupted run $ref did not succeed" job_in_state "$ref" JOB_STATE_SUCCEEDED
[ -s "$state/ref.pt" ] || fail "the uninterrupted run wrote no final weights"
echo "reference run $ref succeeded"

# killed_run STORE: kill -9 rank 1 once a checkpoint is committed; the job
# must resume from it (restarts 1) and end with the reference's weights.
killed_run() {
  local store=$1 job pid resumed difference
  job=$(submit "$store" "$state/$store.pt" 0.15)
  [ -n "$job" ] || fail "submit ($store) printed no job id"
  wait_until 120 "$job ($store) committed no checkpoint" has_commit "$job"
  wait_until 10 "$job ($store): no rank 1 process" has_rank_pid "$job" 1
  pid=$(rank_pid "$job" 1)
  kill -9 $pid
  echo "killed rank 1 (pid $pid) of $job after step $(committed_step "$job") was committed"
  wait_until 180 "$job ($store) did not succeed after the kill" job_in_state "$job" JOB_STATE_SUCCEEDED
  [ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 1 ] || fail "$job ($store): expected 1 restart"
  resumed=$(job_field "$job" "[e['reason'] for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_RESTARTING'][0]")
  grep -q "resuming from step" <<<"$resumed" || fail "$job ($store) did not resume from a checkpoint: $resumed"
  log=$(rm_cli logs "$job" --rank 0 2>&1)
  grep -q "resumed from" <<<"$log" || fail "$job ($store): rank 0 did not resume"
  difference=$(/usr/bin/python3 -c "import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert a.keys() == b.keys(), 'different parameters'
print(max((a[k].double() - b[k].double()).abs().max().item() for k in a))" "$state/ref.pt" "$state/$store.pt")
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1e-6 else 1)" "$difference" ||
    fail "$job ($store): final weights differ from the uninterrupted run's by $difference"
  echo "$job ($store): $resumed; final weights within $difference of the uninterrupted run's"
}
killed_run env
killed_run ringmaster
echo "PASS"
