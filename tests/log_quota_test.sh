#!/usr/bin/env bash
# Job logs cannot fill the coordinator's disk (issue #27, "Disk"), on a real
# coordinator and worker on loopback (one worker, 2 CPU slots).
#
#   quota         --log-quota-per-job 64KiB. A 1-rank job logging every step
#                 (training.log_interval_steps=1, 4,000 steps: about 460 KB
#                 stored) runs beside a quiet job. The noisy job's files on
#                 the coordinator hold at most 64 KiB; `ringmaster logs`
#                 shows one marker first, "... N lines (M bytes) dropped: the
#                 job's log quota of 64 KiB is full ...", then the newest
#                 lines up to the rank's last one, where N + the lines shown
#                 = the lines the rank wrote (the worker's own copy). The
#                 quiet job's logs are whole (every line its rank wrote, no
#                 marker) and its checkpoints are committed.
#   disk_reserve  --disk-reserve larger than the disk (1PiB): the coordinator
#                 is under its reserve from the start. A job runs, commits its
#                 checkpoints (SQLite keeps working) and succeeds, while its
#                 log lines are refused (RESOURCE_EXHAUSTED to the worker,
#                 which keeps going); /metrics says disk_low and counts the
#                 refused lines; /healthz still answers 200 and names
#                 disk_low.
#
# Usage: log_quota_test.sh SCENARIO CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
scenario=$1
shift
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
case "$scenario" in
  quota) start_coordinator --log-quota-per-job 64KiB ;;
  disk_reserve)
    "$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "127.0.0.1:$mport" \
      --heartbeat-interval 500ms --disk-reserve 1PiB >>"$state/coordinator.log" 2>&1 &
    pids+=($!)
    ;;
  *) fail "unknown scenario $scenario" ;;
esac
start_worker n1 2
wait_nodes_ready 1

# A 1-rank job: STEPS steps, a line every LOG_EVERY steps, a checkpoint every 1,000.
submit() {
  rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1 \
    --set parallelism.data=1 --set data.batch_size=8 --set training.steps="$1" --set training.log_interval_steps="$2" \
    --set checkpoint.interval_steps=1000 --set lr_schedule.warmup_steps=5 2>&1
}
succeeded() { job_in_state "$1" JOB_STATE_SUCCEEDED; }
worker_lines() { wc -l <"$state/n1/jobs/$1/gen-1/rank-0.log"; }
# The lines of `ringmaster logs JOB` once it shows as many as the rank wrote
# (counting the marker's N): the worker ships them after the rank exits.
logs_complete() {
  rm_cli logs "$1" >"$state/$1.logs" 2>&1 || return 1
  local shown dropped
  shown=$(grep -vc "dropped: the job's log quota" "$state/$1.logs")
  dropped=$(sed -nE "s/^\[rank 0\] \.\.\. ([0-9]+) lines \([0-9]+ bytes\) dropped: the job's log quota.*/\1/p" "$state/$1.logs")
  [ $((shown + ${dropped:-0})) -eq "$(worker_lines "$1")" ]
}

if [ "$scenario" = quota ]; then
  quiet=$(job_id_of "$(submit 2000 50)") || fail "submit (quiet)"
  noisy=$(job_id_of "$(submit 4000 1)") || fail "submit (noisy)"
  [ -n "$quiet" ] && [ -n "$noisy" ] || fail "no job ids"
  wait_until 120 "the jobs did not succeed" eval "succeeded $quiet && succeeded $noisy"
  written=$(worker_lines "$noisy")
  [ "$written" -gt 3000 ] || fail "the noisy job wrote only $written lines"
  wait_until 20 "the logs of $noisy never added up to the $written lines its rank wrote" logs_complete "$noisy"

  stored=$(find "$state/coordinator/logs/$noisy" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  echo "noisy job $noisy: the rank wrote $written lines; the coordinator stores $stored bytes of them"
  [ "$stored" -le 65536 ] || fail "the noisy job's logs take $stored bytes on the coordinator, over the 64 KiB quota"
  markers=$(grep -c "dropped: the job's log quota of 64 KiB is full" "$state/$noisy.logs")
  [ "$markers" -eq 1 ] || fail "expected exactly one quota marker in the noisy job's logs, found $markers"
  head -1 "$state/$noisy.logs" | grep -qE "^\[rank 0\] \.\.\. [0-9]+ lines \([0-9]+ bytes\) dropped: the job's log quota of 64 KiB is full" ||
    fail "the marker is not the first line: $(head -1 "$state/$noisy.logs")"
  head -1 "$state/$noisy.logs"
  tail -1 "$state/$noisy.logs" | grep -q "test_accuracy=" || fail "the newest lines were not kept: $(tail -1 "$state/$noisy.logs")"
  grep -q "step 3999/4000 " "$state/$noisy.logs" || fail "step 3999's line is missing"
  grep -q "step 1/4000 " "$state/$noisy.logs" && fail "step 1's line is still there"
  text=$(sed 1d "$state/$noisy.logs" | wc -c)
  [ "$text" -le 65536 ] || fail "logs shows $text bytes after the marker, over the quota"

  wait_until 20 "the quiet job's logs are not whole" logs_complete "$quiet"
  grep -q "dropped" "$state/$quiet.logs" && fail "the quiet job lost lines: $(grep dropped "$state/$quiet.logs")"
  rm_cli checkpoints "$quiet" >"$state/checkpoints.txt" 2>&1 || fail "checkpoints failed"
  grep -qE '\b2000\b' "$state/checkpoints.txt" || { cat "$state/checkpoints.txt"; fail "no checkpoint of step 2000 for the quiet job"; }
  echo "PASS: the noisy job's logs stay within 64 KiB behind one marker counting the dropped lines; the quiet job's logs and checkpoints are whole"
  exit 0
fi

# disk_reserve
metrics() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "http://127.0.0.1:$mport/$1"; }
job=$(job_id_of "$(submit 2000 10)") || fail "submit"
[ -n "$job" ] || fail "no job id"
wait_until 120 "the job did not succeed while the coordinator's disk is under its reserve" succeeded "$job"
rm_cli checkpoints "$job" >"$state/checkpoints.txt" 2>&1 || fail "checkpoints failed"
grep -qE '\b2000\b' "$state/checkpoints.txt" || { cat "$state/checkpoints.txt"; fail "no checkpoint of step 2000: commits were refused"; }
# (the answer is read whole before grep -q stops reading: with pipefail, the
# writer's broken pipe would fail the check)
refused() {
  local text
  text=$(metrics metrics) || return 1
  grep -qE "^ringmaster_coordinator_logs_dropped_total\{.*job=\"$job\".*reason=\"disk_low\".*\} [1-9]" <<<"$text"
}
wait_until 20 "no refused log line of $job counted in /metrics" refused
scrape=$(metrics metrics) || fail "/metrics does not answer"
grep -E '^ringmaster_coordinator_disk_(low|free_bytes|reserve_bytes)' <<<"$scrape"
grep -qE '^ringmaster_coordinator_disk_low 1' <<<"$scrape" || fail "/metrics does not say disk_low"
health=$(metrics healthz) || fail "/healthz does not answer 200"
echo "/healthz: $health"
grep -q "disk_low" <<<"$health" || fail "/healthz does not name disk_low: $health"
lines=$(rm_cli logs "$job" 2>&1 | grep -vc "dropped")
[ "$lines" -eq 0 ] || fail "$lines log lines were stored under the reserve"
grep -q "RESOURCE_EXHAUSTED\|refus" "$state/n1.log" || fail "the worker never heard that its logs were refused"
grep -q "disk" "$state/coordinator.log" || fail "the coordinator never logged that its disk is low"
echo "PASS: under the disk reserve, log lines are refused (counted, healthz names disk_low) while checkpoints commit"
