#!/usr/bin/env bash
# Stragglers on a two-worker loopback cluster (one CPU slot each): a running
# 2-rank data-parallel job whose rank 1 is slowed by a SIGSTOP/SIGCONT loop
# (stopped 0.3 s of every 0.4 s) is flagged within the coordinator's window
# (--straggler-steps 40): a STRAGGLER event naming rank 1 and its node, not
# rank 0 (which waits for it in the all-reduce: its step is as long, its own
# work is not). Once the loop ends, rank 1 is unflagged (STRAGGLER_RECOVERED).
#
# Usage: straggler_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
loop_pid="" slow_pid=""
# The loop first, then SIGCONT (a stopped trainer would hold up the cleanup's
# SIGTERM), then cluster_lib's cleanup.
stop_loop() {
  [ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null && wait "$loop_pid" 2>/dev/null
  [ -n "$slow_pid" ] && kill -CONT "$slow_pid" 2>/dev/null
  loop_pid=""
}
trap 'stop_loop; cluster_cleanup' EXIT

start_coordinator --straggler-factor 1.3 --straggler-steps 40
start_worker n1 1
start_worker n2 1
wait_nodes_ready 2

out=$(rm_cli submit "$spec" --set resources.nodes=2 --set resources.ranks_per_node=1 \
  --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.steps=1000000 \
  --set training.eval_interval_steps=1000000 --set training.log_interval_steps=100 \
  --set checkpoint.interval_steps=0 2>&1) || fail "submit: $out"
job=$(job_id_of "$out")
progress() { job_field "$job" 'r["job"].get("progress", {}).get("step", 0)'; }
stepping() { [ "$(progress)" -ge "$1" ]; }
wait_until 60 "job $job did not reach step 100" stepping 100
events_of() { job_field "$job" "[(e.get('rank', 0), e['reason']) for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_$1']"; }
has_event() { [ "$(events_of "$1")" != "[]" ]; }

slow_host=$(job_field "$job" 'r["job"]["placement"]["ranks"][1]["hostname"]')
slow_pid=$(pgrep -f -- "--rank-context $state/$slow_host/.*/$job/" | head -1)
[ -n "$slow_pid" ] || fail "no trainer of rank 1 of $job on $slow_host"
# Bounded: 150 periods (60 s) at most; the test ends it sooner.
(for _ in $(seq 150); do
  kill -STOP "$slow_pid" 2>/dev/null || exit 0
  sleep 0.3
  kill -CONT "$slow_pid" 2>/dev/null
  sleep 0.1
done) &
loop_pid=$!
started=$(date +%s)
wait_until 30 "rank 1 of $job was not flagged as a straggler" has_event STRAGGLER
echo "flagged after $(($(date +%s) - started)) s: $(events_of STRAGGLER)"
flagged=$(events_of STRAGGLER)
grep -q "^\[(1, .rank 1 on node $slow_host is a straggler: " <<<"$flagged" || fail "not rank 1 flagged: $flagged"
grep -q "(0, " <<<"$flagged" && fail "rank 0, which only waits for rank 1, was flagged: $flagged"
grep -q "not moved (restart.move_stragglers is off)" <<<"$flagged" || fail "moved without consent: $flagged"
[ "$(job_state "$job")" = JOB_STATE_RUNNING ] || fail "job $job is $(job_state "$job") after the flag"
described=$(rm_cli describe "$job" 2>&1)
grep -q "STRAGGLER" <<<"$described" || fail "describe does not show the straggler event: $described"

# Unflagged once the slowdown ends (flags and recoveries alternate, so their
# counts say). Not checked: that it stays flagged throughout the slowdown. A
# stop that lands while rank 1 waits in the all-reduce counts as its
# communication, not its own work, and on a loaded machine a window of such
# stops has read as 0.97x (a recovery while still slowed).
count_of() { job_field "$job" "len([e for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_$1'])"; }
stop_loop
recovered_once() { [ "$(count_of STRAGGLER_RECOVERED)" -eq "$(count_of STRAGGLER)" ]; }
started=$(date +%s)
wait_until 30 "rank 1 of $job was not unflagged after the slowdown ended" recovered_once
echo "recovered after $(($(date +%s) - started)) s: $(events_of STRAGGLER_RECOVERED)"
rm_cli cancel "$job" >/dev/null 2>&1 || fail "cancel $job"
echo PASS
