#!/usr/bin/env bash
# A local cluster on loopback: 1 coordinator + 2 workers x 2 CPU slots run a
# 4-rank data-parallel job to completion through the CLI; rank 0's checkpoints
# are committed and listed, `describe` shows the timeline and where each
# setting came from, `logs` has every rank. Everything started here is
# stopped and reaped at the end.
# Usage: cluster_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
start_local_cluster "$@" 2 2

start=$(date +%s)
out=$(timeout 600 "$cli" --coordinator "$addr" submit "$spec" --wait \
  --set resources.nodes=2 --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1 \
  --set parallelism.data=4 --set training.steps=60 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=20 --set lr_schedule.warmup_steps=5 2>&1)
rc=$?
echo "$out" | tail -5
[ $rc -eq 0 ] || fail "submit --wait exited $rc"
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
echo "job $job finished in $(( $(date +%s) - start ))s"

rm_cli describe "$job" >"$state/describe.txt" 2>&1 || fail "describe failed"
for s in QUEUED PLACED STARTING RUNNING SUCCEEDED; do
  grep -q "$s" "$state/describe.txt" || { cat "$state/describe.txt"; fail "the timeline has no $s"; }
done
# Every setting with its effective value and where it came from: the
# coordinator keeps the spec as the CLI sent it, without defaults.
for setting in 'training\.steps +60 +--set' 'resources\.nodes +2 +--set' 'checkpoint\.keep +[0-9]+ +(spec|default)' \
               'restart\.progress_timeout_seconds +[0-9]+ +(spec|default)' 'name +[^ ]+ +spec'; do
  grep -qE "^$setting\$" "$state/describe.txt" || { cat "$state/describe.txt"; fail "describe shows no setting /$setting/"; }
done
rm_cli checkpoints "$job" >"$state/checkpoints.txt" 2>&1 || fail "checkpoints failed"
grep -qE '\b60\b' "$state/checkpoints.txt" || { cat "$state/checkpoints.txt"; fail "no committed checkpoint of step 60"; }
rm_cli logs "$job" >"$state/logs.txt" 2>&1 || fail "logs failed"
for r in 0 1 2 3; do
  grep -q "^\[rank $r\]" "$state/logs.txt" || { head "$state/logs.txt"; fail "no log line from rank $r"; }
done
echo "PASS: 4-rank job on 2 workers: succeeded, checkpoints committed, timeline and logs complete"
