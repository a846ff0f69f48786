#!/usr/bin/env bash
# Failure scenarios on a real cluster: a coordinator and 2 or 3
# workers, each worker in its own network namespace ("node"), joined by a
# bridge in the test's private network namespace; a 2-rank data-parallel MLP
# job (1 rank per node) with a checkpoint every 10 steps.
#
#   trainer_kill     kill -9 rank 0 mid-step: detected <= 5 s, resumed, completes
#   trainer_stop     SIGSTOP rank 1: detected within the progress timeout, its
#                    state dump is in its log, restarted, completes
#   worker_kill      kill -9 a worker: its lease lapses, the job restarts on the
#                    spare node, completes
#   elastic_shrink   kill -9 a worker of an elastic job (min_nodes 1) with no
#                    spare node: once the node is lost the job continues on the
#                    other one, data-parallel size 1, and completes
#   partition_short  a node's link cut for less than the lease: nothing restarts
#   partition_long   a node's link cut for longer than the lease: node lost,
#                    restart on the spare node, completes
#   coordinator_kill_0, coordinator_kill_20
#                    kill -9 the coordinator, restart it after 0 s / 20 s: the
#                    running generation is adopted (no restart), completes
#
# Every scenario asserts: the job SUCCEEDED (no job lost); each (generation,
# rank) was started once (never two gangs in one generation); a restart lost
# less than two checkpoint intervals of steps (the newest checkpoint is
# written in the background while training goes on); no process is left
# behind. It
# prints "RESULT <scenario> detection_s=... restart_s=... steps_lost=...".
# Usage: failure_test.sh SCENARIO CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
if [ -z "${RM_FAILURE_NETNS:-}" ]; then
  # A private network (and user) namespace: the bridge, the nodes' links and
  # every address live and die with this test.
  RM_FAILURE_NETNS=1 exec unshare -rn -- bash "$0" "$@"
fi
scenario=$1
spec=$(realpath "$6")
source "$(dirname "$(realpath "$0")")/failure_lib.sh"

interval=10      # checkpoint interval (steps)
steps=200
progress_timeout=6
nodes=2
case $scenario in worker_kill | partition_long) nodes=3 ;; esac  # a spare node to restart on

start_cluster "$2" "$3" "$4" "$5" "$nodes"
elastic=()
[ "$scenario" = elastic_shrink ] && elastic=(--set restart.elastic.min_nodes=1)
job=$(submit_job "$steps" "$interval" "$progress_timeout" "${elastic[@]}")
echo "job $job"
wait_step 15 || fail "rank 0 never reached step 15"

case $scenario in
  trainer_kill)
    inject_at=$(now); kill -KILL "$(rank_pid 1 0)" ;;
  trainer_stop)
    inject_at=$(now); kill -STOP "$(rank_pid 1 1)" ;;
  worker_kill | elastic_shrink)
    inject_at=$(now); kill -KILL "${worker_pids[2]}" ;;
  partition_short)
    inject_at=$(now); partition 2; sleep 1; heal 2 ;;
  partition_long)
    inject_at=$(now); partition 2; sleep 6; heal 2 ;;
  coordinator_kill_0 | coordinator_kill_20)
    inject_at=$(now); kill -KILL "$coordinator_pid"; wait "$coordinator_pid" 2>/dev/null
    sleep "${scenario#coordinator_kill_}"
    start_coordinator ;;
  *) fail "unknown scenario $scenario" ;;
esac
[ "$scenario" = worker_kill ] && { sleep 3; start_node_worker 2; }  # it comes back, its ranks gone

wait_until 300 "job $job did not end" job_over "$job"
wait_until 15 "trainers left after the job ended" no_trainers
analyze "$job" "$scenario" "$inject_at" "$interval" "$progress_timeout" || fail "checks failed"
[ "$scenario" = trainer_stop ] && {
  grep -rlq "=== ringmaster state dump" "$state"/w2/jobs/"$job"/gen-1/rank-1.log ||
    fail "the stopped rank's log has no state dump"
  grep -A1 "=== ringmaster state dump" "$state"/w2/jobs/"$job"/gen-1/rank-1.log | tail -1
}
stop_daemons || fail "trainers left after the daemons stopped: $(trainer_pids)"
echo "PASS: $scenario"
