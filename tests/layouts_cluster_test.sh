#!/usr/bin/env bash
# Every parallel layout through the cluster: for each LAYOUT, a
# job of SPEC runs on a real coordinator and worker with real trainers over
# Gloo; once its first checkpoint is committed one trainer is killed -9; the
# job restarts from a committed checkpoint and succeeds, the surviving
# ranks carrying on in their own processes (the worker adopts them for the
# next generation); its final weights equal those of an uninterrupted
# `ringmaster-trainer --nproc` run of the same layout within 1e-5 (relative,
# fp32).
#
# Usage: layouts_cluster_test.sh CLI COORDINATOR WORKER TRAINER DIFF SPEC STEPS SETS LAYOUT...
#   SETS: further spec overrides for every run ("key=value key=value"; may be
#         empty), e.g. a smaller GPT so that the layouts fit a CI run;
#   LAYOUT: "name data pipeline micro_batches schedule zero1"
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
diff_tool=$(realpath "$5")
steps=$7
spec_arg=$6
extra=()
for kv in $8; do extra+=(--set "$kv"); done
layouts=("${@:9}")
start_local_cluster "$1" "$2" "$3" "$4" "$spec_arg" 4
interval=$((steps / 10))

for layout in "${layouts[@]}"; do
  read -r name data pipeline micro schedule zero1 <<<"$layout"
  ranks=$((data * pipeline))
  run=(--set training.steps="$steps" --set training.eval_interval_steps=1000000
       --set training.log_interval_steps="$interval" --set checkpoint.interval_steps="$interval"
       --set checkpoint.keep=20 --set lr_schedule.warmup_steps=5 --set lr_schedule.decay_steps=$((steps - 5))
       --set parallelism.data="$data" --set parallelism.pipeline="$pipeline"
       --set parallelism.micro_batches="$micro" --set parallelism.schedule="$schedule"
       --set parallelism.zero1="$zero1" --set resources.nodes=1 --set resources.ranks_per_node="$ranks"
       --set resources.cpus_per_rank=1 --set restart.max_restarts=2 "${extra[@]}")

  # The reference: the same layout, uninterrupted, by hand.
  ref="$state/ref-$name"
  start=$(date +%s.%N)
  timeout 600 "$trainer" --spec "$spec" "${run[@]}" --nproc "$ranks" --threads 1 --checkpoint-dir "$ref" \
    >"$state/ref-$name.log" 2>&1 || { tail -20 "$state/ref-$name.log"; fail "$name: the --nproc reference failed"; }
  ref_seconds=$(echo "$(date +%s.%N) - $start" | bc)

  out=$(rm_cli submit "$spec" "${run[@]}" 2>&1) || fail "$name: submit failed: $out"
  job=$(job_id_of "$out")
  # One trainer dies after the first committed checkpoint.
  has_checkpoint() { [ "$(rm_cli checkpoints "$job" -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("checkpoints", [])))')" -gt 0 ]; }
  wait_until 300 "$name: job $job committed no checkpoint" has_checkpoint
  victim=$((ranks - 1))
  pid=$(pgrep -f -- "--rank-context $state/.*/$job/gen-1/rank-$victim/rank.json" | head -1)
  [ -n "$pid" ] || fail "$name: no trainer of rank $victim to kill (did the job finish already?)"
  kill -9 "$pid"
  wait_until 600 "$name: job $job did not succeed after the kill" job_in_state "$job" JOB_STATE_SUCCEEDED
  restarts=$(job_field "$job" 'r["job"].get("restarts", 0)')
  [ "$restarts" -ge 1 ] || fail "$name: job $job succeeded without a restart"
  resumed=$(job_field "$job" '[e["reason"] for e in r["events"] if e["kind"] == "JOB_EVENT_KIND_RESTARTING"][0]')
  grep -qE "resuming from step [1-9][0-9]*" <<<"$resumed" || fail "$name: the restart did not resume: $resumed"

  # Both directories' newest checkpoints: the final step's.
  worst=$(final_weights_difference "$diff_tool" "$ref" "$job" "$steps") ||
    fail "$name: no committed checkpoint of step $steps"
  awk -v w="$worst" 'BEGIN { exit !(w != "" && w <= 1e-5) }' ||
    fail "$name: the final weights differ from the uninterrupted run's by $worst (> 1e-5)"
  # The survivors carried on in their processes (worker/process_supervisor.h):
  # the next generation adopted every one of them, and a survivor's output
  # goes on in the next generation's log.
  adopted=$(grep -cE "job $job generation 2: rank [0-9]+ is the process \(pid [0-9]+\) of rank [0-9]+ of generation 1" \
    "$state/n1.log")
  [ "$adopted" -eq $((ranks - 1)) ] ||
    fail "$name: generation 2 adopted $adopted survivor process(es) of generation 1, expected $((ranks - 1))"
  if [ "$ranks" -gt 1 ]; then
    gen2=$(rm_cli logs "$job" --generation 2 --rank 0 2>&1)
    grep -q "carrying on in this process as rank 0 of generation 2" <<<"$gen2" ||
      fail "$name: rank 0's generation-2 log does not show it carried on: $(tail -5 <<<"$gen2")"
  fi
  printf 'PASS %-12s killed rank %d, %s; weights within %s of --nproc (%.1fs by hand)\n' "$name" "$victim" \
    "$(grep -oE 'resuming from step [0-9]+' <<<"$resumed")" "$worst" "$ref_seconds"
done
