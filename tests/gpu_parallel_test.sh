#!/usr/bin/env bash
# ZeRO-1 and pipeline parallelism on CUDA: the same job, same seed,
# as plain data parallelism (ZeRO-1) or as one process running the same
# micro-batches (pipeline), over NCCL with one rank per GPU. Skips, saying so,
# with fewer than 2 CUDA devices: NCCL needs a distinct GPU per rank of a
# communicator (two ranks on one device fail at init with "Duplicate GPU").
#
# Each pair must agree step for step: every logged loss within 2e-4 (and the
# fp16 loss scale and skipped-step count equal), and the final
# checkpoints (parameters AND optimizer state: ZeRO-1's shards gathered, a
# pipeline's stages gathered) within 1e-5 relative (fp32; the only difference
# is the reduction: NCCL reduce-scatter vs allreduce, or none).
#   zero1 fp32:   --nproc 2 data 2 zero1    vs --nproc 2 data 2
#   zero1 fp16:   the same with dynamic loss scaling from 2^24, so the first
#                 steps overflow and are skipped: every rank must skip the
#                 same steps (the overflow flag summed over the shards).
#   pipeline:     --nproc 2 pipeline 2 micro 2, 1f1b and gpipe
#                                           vs 1 process, micro 2
#   4+ GPUs:      --nproc 4 data 2 pipeline 2 zero1 vs the same without zero1.
# Usage: gpu_parallel_test.sh TRAINER DIFF SPEC [DATA_PATH]
#   DATA_PATH overrides data.path (the GPU pack carries the dataset).
set -euo pipefail
trainer=$1 diff=$2 spec=$3 data=${4:-}

gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU' || true)
fi
if [[ $gpus -lt 2 ]]; then
  echo "SKIP: $gpus CUDA device(s); ZeRO-1/pipeline over NCCL need >= 2 (one rank per GPU): not run"
  exit 0
fi

tmp="${TEST_TMPDIR:-$(mktemp -d)}"
steps=12
common=(--spec "$spec" --device cuda --set training.steps=$steps --set training.eval_interval_steps=1000000
        --set training.log_interval_steps=1 --set checkpoint.interval_steps=0 --set lr_schedule.warmup_steps=3
        --set optimizer.type=sgd --set optimizer.lr=0.05 --set optimizer.momentum=0.9
        --set optimizer.betas=null --set optimizer.eps=null --set precision.compute=fp32 --threads 2 --timeout 120)
if [[ -n "$data" ]]; then common+=(--set "data.path=$data"); fi
fp16=(--set precision.compute=fp16 --set precision.loss_scale.initial_scale=16777216)

# run NAME NPROC ARGS...: trains into $tmp/NAME, losses to $tmp/NAME.losses.
run() {
  local name=$1 nproc=$2
  shift 2
  local launch=()
  if [[ $nproc -gt 1 ]]; then launch=(--nproc "$nproc"); fi
  "$trainer" "${common[@]}" --set resources.nodes=1 --set resources.ranks_per_node="$nproc" "$@" "${launch[@]}" \
    --checkpoint-dir "$tmp/$name" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; echo "FAIL: $name did not complete"; exit 1; }
  tr '\r' '\n' <"$tmp/$name.log" | sed -n 's/^.*\(step [0-9]*\/[0-9]* epoch [0-9]* | loss [^| ]*\).*| scale \([^ ]*\) skipped \([0-9]*\).*$/\1 scale \2 skipped \3/p; t; s/^.*\(step [0-9]*\/[0-9]* epoch [0-9]* | loss [0-9.naif-]*\).*$/\1/p' |
    sort -u -n -k2,2 >"$tmp/$name.losses"
  [[ $(wc -l <"$tmp/$name.losses") -eq $steps ]] || { echo "FAIL: $name logged $(wc -l <"$tmp/$name.losses") steps, not $steps"; cat "$tmp/$name.log"; exit 1; }
}

failed=0
# compare REF RUN: losses equal, checkpoints within 1e-5.
compare() {
  local ref=$1 got=$2
  # Loss within 2e-4 (the 4 printed decimals may round apart); step, scale and skips equal.
  if ! paste -d'|' "$tmp/$ref.losses" "$tmp/$got.losses" | awk -F'|' '
      { split($2, a, " "); split($4, b, " "); d = a[2] - b[2]; if (d < 0) d = -d
        if ($1 != $3 || d > 2e-4 || a[3] a[4] a[5] a[6] != b[3] b[4] b[5] b[6]) bad = 1 }
      END { exit bad }'; then
    echo "FAIL: $got logged other losses than $ref:"; paste "$tmp/$ref.losses" "$tmp/$got.losses"; failed=1; return
  fi
  local worst
  worst=$("$diff" "$tmp/$ref" "$tmp/$got" --with-optimizer | sed -n 's/^max_relative_difference=//p')
  if awk -v w="$worst" 'BEGIN { exit !(w != "" && w <= 1e-5) }'; then
    echo "PASS: $got = $ref: $steps losses agree, checkpoints within $worst (<= 1e-5); last: $(tail -1 "$tmp/$got.losses")"
  else
    "$diff" "$tmp/$ref" "$tmp/$got" --with-optimizer | tail -5
    echo "FAIL: $got vs $ref: checkpoints differ by $worst > 1e-5"; failed=1
  fi
}

dp=(--set parallelism.data=2 --set parallelism.pipeline=1)
run dp 2 "${dp[@]}" --set parallelism.zero1=false
run zero 2 "${dp[@]}" --set parallelism.zero1=true
compare dp zero

run dp16 2 "${dp[@]}" --set parallelism.zero1=false "${fp16[@]}"
run zero16 2 "${dp[@]}" --set parallelism.zero1=true "${fp16[@]}"
grep -q "skipped [1-9]" "$tmp/zero16.losses" || { echo "FAIL: the fp16 run skipped no step (the overflow path untested)"; failed=1; }
compare dp16 zero16

run single 1 --set parallelism.data=1 --set parallelism.pipeline=1 --set parallelism.micro_batches=2
for schedule in 1f1b gpipe; do
  run "pipe-$schedule" 2 --set parallelism.data=1 --set parallelism.pipeline=2 --set parallelism.micro_batches=2 \
    --set parallelism.schedule=$schedule
  compare single "pipe-$schedule"
done

if [[ $gpus -ge 4 ]]; then
  grid=(--set parallelism.data=2 --set parallelism.pipeline=2 --set parallelism.micro_batches=2)
  run grid 4 "${grid[@]}" --set parallelism.zero1=false
  run grid-zero 4 "${grid[@]}" --set parallelism.zero1=true
  compare grid grid-zero
else
  echo "NOTE: $gpus GPUs: the data x pipeline x ZeRO-1 layout (4 ranks) not run"
fi
exit $failed
