#!/usr/bin/env bash
# Node identity (issue #27, item 3): a node acts only for the ranks placed on
# it. A loopback cluster whose coordinator requires a join token, two workers
# (1 CPU slot each) and a victim job of 1 rank. While the victim runs, a
# process that is not its worker (node_probe) sends, for the victim's rank,
# every kind of node-facing call: ReportRankExit with exit code 78, a Session
# start result marked unrecoverable, a Session progress report, a pushed log
# line, a CheckpointService.Commit, a RendezvousService.KvSet (with the
# generation's secret, read from the rank's rank.json), and a Register naming
# the victim's node (a takeover). Each is sent as:
#   - no join token, no credential, naming the victim's node    -> UNAUTHENTICATED
#   - the join token, no node credential, naming the victim's node
#                                                -> UNAUTHENTICATED or PERMISSION_DENIED
#   - the join token and a node of its own (registered with the join token:
#     its own credential), naming the victim's node            -> PERMISSION_DENIED
#   - the same node, naming itself (acting for a rank not on it) -> PERMISSION_DENIED
#   - the other real worker's credential (a rogue worker)       -> PERMISSION_DENIED
# Then: the victim is still RUNNING and succeeds (its own worker's reports,
# legitimate exits included, still work), its log has no injected line, it
# has no checkpoint of step 999999, and its progress never read 999999.
# Every check is reported; the test fails if any did.
# Usage: node_identity_test.sh CLI COORDINATOR WORKER TRAINER SPEC PROBE
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
probe=$(realpath "$6")
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
token=$state/join-token
(umask 077 && openssl rand -hex 32 >"$token")
start_coordinator --join-token-file "$token"
start_worker n1 1 --join-token-file "$token"
start_worker n2 1 --join-token-file "$token"
wait_nodes_ready 2
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$(rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1 \
  --set parallelism.data=1 --set training.steps=2500 --set training.eval_interval_steps=1000000 \
  --set training.log_interval_steps=100 --set lr_schedule.warmup_steps=5 --set checkpoint.interval_steps=500 \
  --set restart.max_restarts=0 2>&1) || fail "submit failed: $out"
job=$(job_id_of "$out")
wait_until 60 "job $job did not start running" job_in_state "$job" JOB_STATE_RUNNING
victim_host=$(job_field "$job" 'r["job"]["placement"]["ranks"][0]["hostname"]')
victim_node=$(job_field "$job" 'r["job"]["placement"]["ranks"][0]["nodeId"]')
other_host=$([ "$victim_host" = n1 ] && echo n2 || echo n1)
other_node=$(rm_cli nodes --output json | python3 -c "
import json, sys
print([n['nodeId'] for n in json.load(sys.stdin)['nodes'] if n['hostname'] == '$other_host'][0])")
context=$(find "$state/$victim_host" -path "*/$job/gen-1/rank-0/rank.json" | head -1)
[ -n "$context" ] || fail "no rank.json of job $job rank 0 under $state/$victim_host"
secret=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rendezvous"]["secret"])' "$context")
echo "victim $job rank 0 on $victim_host ($victim_node); the other worker is $other_host ($other_node)"

# attack WHO EXPECTED CALL [PROBE FLAG ...]: EXPECTED is a regex of codes.
attack() {
  local who=$1 expected=$2 call=$3
  shift 3
  local result
  result=$("$probe" "$addr" "$call" --job "$job" --generation 1 --rank 0 --secret "$secret" \
    --checkpoint-root "$state/coordinator/checkpoints" --text "INJECTED-LINE by $who" "$@" 2>&1 | tail -1)
  if grep -qE "^($expected) " <<<"$result"; then
    echo "PASS: $call as $who: $result"
  else
    bad "$call as $who was not refused with $expected: $result"
  fi
}
for call in exit start-failure progress push-logs commit rendezvous register; do
  attack "a caller without the join token" UNAUTHENTICATED "$call" --as-node "$victim_node" --takeover
  attack "a caller with the join token and no node credential" "UNAUTHENTICATED|PERMISSION_DENIED" "$call" \
    --join-token-file "$token" --as-node "$victim_node" --takeover
  attack "a node of its own naming $victim_node" PERMISSION_DENIED "$call" \
    --join-token-file "$token" --register "evil-$call" --as-node "$victim_node" --takeover
  [ "$call" = register ] && continue  # registering itself is what a node may do
  attack "a node of its own acting for a rank not on it" PERMISSION_DENIED "$call" \
    --join-token-file "$token" --register "evil2-$call"
  if [ -s "$state/$other_host/node-credential" ]; then
    attack "the worker of $other_host (its credential)" PERMISSION_DENIED "$call" \
      --join-token-file "$token" --credential-file "$state/$other_host/node-credential" --as-node "$other_node" \
      --takeover
  else
    bad "the worker of $other_host keeps no node credential in $state/$other_host/node-credential"
  fi
done

state_now=$(job_state "$job")
if [ "$state_now" = JOB_STATE_RUNNING ]; then
  echo "PASS: job $job is still RUNNING after the attacks"
else
  bad "job $job is $state_now after the attacks: $(job_field "$job" 'r["job"].get("message", "")')"
fi
step=$(job_field "$job" 'r["job"].get("progress", {}).get("step", 0)')
if [ "$step" != 999999 ]; then echo "PASS: job $job's progress is its own (step $step)"; else bad "job $job's progress reads the injected step 999999"; fi

finished() { case $(job_state "$1") in JOB_STATE_SUCCEEDED | JOB_STATE_FAILED | JOB_STATE_CANCELLED) return 0 ;; esac; return 1; }
wait_until 240 "job $job did not finish" finished "$job"
state_now=$(job_state "$job")
if [ "$state_now" = JOB_STATE_SUCCEEDED ]; then
  echo "PASS: job $job succeeded: its worker's own reports (rank exits included) are accepted"
else
  bad "job $job ended $state_now: $(job_field "$job" 'r["job"].get("message", "")')"
fi
if rm_cli logs "$job" 2>&1 | grep -q INJECTED; then
  bad "job $job's log has an injected line: $(rm_cli logs "$job" 2>&1 | grep INJECTED | head -3)"
else
  echo "PASS: job $job's log has no injected line"
fi
if rm_cli checkpoints "$job" 2>&1 | grep -qw 999999; then
  bad "job $job has a checkpoint of step 999999"
else
  echo "PASS: job $job has no forged checkpoint"
fi
if [ $failures -eq 0 ]; then
  echo "PASS: node identity: every forged node call refused; the victim succeeded"
  exit 0
fi
fail "$failures check(s) failed"
