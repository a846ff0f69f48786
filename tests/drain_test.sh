#!/usr/bin/env bash
# Drains on a two-worker loopback cluster, with a running 2-rank job that has
# no restarts to spare (max_restarts 0) and no periodic checkpoints, so that
# only a drain's own checkpoint lets it move without losing its steps.
#
#   drain            `ringmaster nodes drain` of the job's node: the ranks
#                    checkpoint, the job moves to the other node, resumes
#                    from that checkpoint and succeeds; restarts 0; the node
#                    stays cordoned and takes no new job until uncordoned.
#   rolling_upgrade  for each node in turn: drain, stop its worker, start it
#                    again (the "upgrade": a new worker process with a new
#                    label), uncordon. The job moves twice and succeeds with
#                    restarts 0.
#
# Usage: drain_test.sh SCENARIO CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
scenario=$1
shift
start_local_cluster "$@" 2 2

steps=3000
[ "$scenario" = rolling_upgrade ] && steps=5000
out=$(rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=2 \
  --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.steps=$steps \
  --set training.eval_interval_steps=1000000 --set training.log_interval_steps=20 \
  --set checkpoint.interval_steps=0 --set restart.max_restarts=0 2>&1) || fail "submit: $out"
job=$(job_id_of "$out")
progress() { job_field "$job" 'r["job"].get("progress", {}).get("step", 0)'; }
stepping() { [ "$(progress)" -ge "$1" ]; }
wait_until 60 "job $job did not reach step 40" stepping 40
node_of_job() { job_field "$job" 'r["job"]["placement"]["ranks"][0]["hostname"]'; }
node_state() {
  rm_cli nodes -o json | python3 -c "import json, sys
n = [n for n in json.load(sys.stdin)['nodes'] if n['hostname'] == '$1'][0]
print(n['state'], n.get('cordonedBy', '-'), n.get('draining', False))"
}
drained_count() { job_field "$job" 'len([e for e in r["events"] if e["kind"] == "JOB_EVENT_KIND_NODE_DRAINED"])'; }

# Drains NODE, which runs the job: checks the move, the checkpoint it resumed
# from, and that no restart was used.
drain_job_node() {
  local node=$1 before moved_from resumed ckpt
  [ "$(job_state "$job")" = JOB_STATE_RUNNING ] || fail "job $job is $(job_state "$job") before draining $node"
  before=$(drained_count)
  rm_cli nodes drain "$node" --reason "drain_test" --timeout 120s >"$state/drain-$node.txt" 2>&1 ||
    { cat "$state/drain-$node.txt"; fail "nodes drain $node exited non-zero"; }
  cat "$state/drain-$node.txt"
  grep -q "drained: nothing runs there" "$state/drain-$node.txt" || fail "nodes drain $node did not wait for the end"
  [ "$(drained_count)" -eq $((before + 1)) ] || fail "no new NODE_DRAINED event after draining $node"
  read -r st by dr <<<"$(node_state "$node")"
  [ "$st" = NODE_STATE_CORDONED ] && [ "$by" = operator ] && [ "$dr" = False ] ||
    fail "$node after the drain: state $st, cordoned by $by, draining $dr (want CORDONED, operator, False)"
  # The checkpoint the drain asked for: committed after the request, resumed from.
  ckpt=$(job_field "$job" "[e['reason'] for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_NODE_DRAINED'][$before]")
  echo "moved: $ckpt"
  grep -qE "moved off node $node, which is being drained: checkpoint at step [1-9][0-9]* written" <<<"$ckpt" ||
    fail "the move was not made after a drain checkpoint: $ckpt"
  step=$(grep -oE 'step [0-9]+' <<<"$ckpt" | tr -dc 0-9)
  wait_until 60 "job $job did not restart after the drain of $node" job_in_state "$job" JOB_STATE_RUNNING
  resumed=$(job_field "$job" "[e['reason'] for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_RESTARTING'][$before]")
  echo "restarted: $resumed"
  grep -q "restart after NodeDrained (not counted against max_restarts 0)" <<<"$resumed" ||
    fail "the restart after the drain was counted: $resumed"
  grep -q "resuming from step $step\$" <<<"$resumed" || fail "did not resume from the drain checkpoint (step $step)"
  [ "$(node_of_job)" != "$node" ] || fail "job $job is still placed on the drained node $node"
  [ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "the drain used a restart"
}

worker_pid() { pgrep -f -- "--state-dir $state/$1 --trainer" | head -1; }

first=$(node_of_job)
other=$([ "$first" = n1 ] && echo n2 || echo n1)
case "$scenario" in
  drain)
    drain_job_node "$first"
    # A cordoned node takes no new job, even with free slots (the other node's
    # are taken by the job); uncordoned, it does.
    out=$(rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=2 \
      --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.steps=200 2>&1) || fail "submit: $out"
    pinned=$(job_id_of "$out")
    sleep 2
    [ "$(job_state "$pinned")" = JOB_STATE_QUEUED ] || fail "job $pinned is $(job_state "$pinned") on cordoned $first"
    rm_cli nodes uncordon "$first" >/dev/null || fail "nodes uncordon $first failed"
    wait_until 60 "job $pinned did not run after $first was uncordoned" job_in_state "$pinned" JOB_STATE_SUCCEEDED
    ;;
  rolling_upgrade)
    for node in "$first" "$other"; do
      drain_job_node "$node"
      pid=$(worker_pid "$node")
      [ -n "$pid" ] || fail "no worker process for $node"
      kill -TERM "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && fail "the worker of $node did not stop within 10 s"
      start_worker "$node" 2 --label upgraded=yes
      # This node's own label: the other node, upgraded first, has it too.
      upgraded() {
        [ "$(rm_cli nodes -o json | python3 -c "import json, sys
n = [n for n in json.load(sys.stdin)['nodes'] if n['hostname'] == '$node'][0]
print(n.get('labels', {}).get('upgraded', '-'), n['state'])")" = "yes NODE_STATE_CORDONED" ]
      }
      wait_until 30 "the upgraded worker of $node did not register (cordoned)" upgraded
      rm_cli nodes uncordon "$node" >/dev/null || fail "nodes uncordon $node failed"
      [ "$(node_state "$node" | cut -d' ' -f1)" = NODE_STATE_READY ] || fail "$node is not READY after uncordon"
      echo "$node upgraded and back in service"
    done
    [ "$(drained_count)" -eq 2 ] || fail "the job moved $(drained_count) times, not 2"
    ;;
  *) fail "unknown scenario $scenario" ;;
esac

wait_until 300 "job $job did not succeed" job_in_state "$job" JOB_STATE_SUCCEEDED
[ "$(job_field "$job" 'r["job"].get("restarts", 0)')" = 0 ] || fail "job $job used a restart"
echo "PASS: $scenario: job $job moved $(drained_count) time(s) by drains, resumed from each drain checkpoint, succeeded with 0 restarts"
