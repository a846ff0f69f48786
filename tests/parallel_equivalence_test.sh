#!/usr/bin/env bash
# Same seed, same global batch: a layout run with --nproc N ends with the
# weights of a single process that normalises the same micro-batches (ghost
# batch norm), within 1e-5 relative (fp32).
#
# The optimizer is SGD with momentum whatever the spec says: under Adam-style
# optimizers m / sqrt(v) turns rounding-level gradient differences on
# near-zero gradients into full learning-rate steps, and OpenBLAS's AVX-512
# kernels round a GEMM differently for different row counts (one process's
# batch against a rank's share of it), so "1e-5" would measure that, not the
# parallelism. (With the same kernels, e.g. OPENBLAS_CORETYPE=Haswell, AdamW
# runs agree to ~2e-7 too.)
# Usage: parallel_equivalence_test.sh TRAINER DIFF SPEC STEPS LAYOUT...
#   LAYOUT: "nproc data pipeline micro schedule zero1 bucket_mb", e.g. "4 4 1 1 1f1b false 25"
set -euo pipefail
# One GEMM kernel family for every process: on CPUs with AVX-512 IFMA/VBMI
# (this project's 2026-11-26 machines) OpenBLAS's own kernels round a 64-row
# batch and four 16-row ones differently enough (5e-3 after 10 CNN steps, in
# the one-process reference as much as in the ranks) to hide what this test
# measures. The Haswell kernels agree to 3e-7.
export OPENBLAS_CORETYPE=Haswell
trainer=$1 diff=$2 spec=$3 steps=$4
shift 4
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--spec "$spec" --set training.steps="$steps" --set training.eval_interval_steps=1000000
        --set training.log_interval_steps="$steps" --set checkpoint.interval_steps=0 --set lr_schedule.warmup_steps=5
        --set optimizer.type=sgd --set optimizer.lr=0.05 --set optimizer.momentum=0.9
        --set optimizer.betas=null --set optimizer.eps=null --threads 1 --timeout 60)
failed=0
for layout in "$@"; do
  read -r nproc data pipeline micro schedule zero1 bucket <<<"$layout"
  name="n${nproc}-d${data}-p${pipeline}-m${micro}-${schedule}-zero${zero1}-b${bucket}"
  shape=(--set parallelism.data="$data" --set parallelism.micro_batches="$micro"
         --set resources.nodes=1 --set resources.ranks_per_node="$nproc")
  # The reference: one process, the same data-parallel size and micro-batches.
  ref="$tmp/ref-d${data}-m${micro}"
  if [ ! -d "$ref" ]; then
    "$trainer" "${common[@]}" "${shape[@]}" --set parallelism.pipeline=1 --set resources.ranks_per_node="$data" \
      --checkpoint-dir "$ref" >"$ref.log" 2>&1 || { cat "$ref.log"; exit 1; }
  fi
  out="$tmp/$name"
  start=$(date +%s.%N)
  "$trainer" "${common[@]}" "${shape[@]}" --set parallelism.pipeline="$pipeline" \
    --set parallelism.schedule="$schedule" --set parallelism.zero1="$zero1" \
    --set parallelism.bucket_size_mb="$bucket" --nproc "$nproc" --checkpoint-dir "$out" >"$tmp/run.log" 2>&1 ||
    { cat "$tmp/run.log"; echo "FAIL: $name did not complete"; failed=1; continue; }
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  grep -h "optimizer state" "$tmp/run.log" || true
  worst=$("$diff" "$ref" "$out" --parameters-only | sed -n 's/^max_relative_difference=//p')
  if awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }'; then
    printf 'PASS %-40s max relative difference %s (%.1fs)\n' "$name" "$worst" "$seconds"
  else
    "$diff" "$ref" "$out" --parameters-only | tail -5
    echo "reference: $(grep "^step $steps/" "$ref.log")"
    echo "this run:  $(grep "^step $steps/" "$tmp/run.log")"
    printf 'FAIL %-40s max relative difference %s > 1e-5\n' "$name" "$worst"
    failed=1
  fi
done
exit $failed
