#!/usr/bin/env bash
# A dataset whose size divides neither by the world size nor by the global
# batch (1001 samples, 3 ranks, global batch 48): every rank gets the same
# number of batches, so training ends instead of deadlocking.
# Usage: uneven_dataset_test.sh TRAINER SPEC
set -euo pipefail
trainer=$1 spec=$2
out=$(timeout 300 "$trainer" --spec "$spec" --nproc 3 --set parallelism.data=3 --set resources.ranks_per_node=3 \
  --set data.dataset=synthetic --set data.path= --set data.synthetic_samples=1001 --set data.batch_size=48 \
  --set training.epochs=2 --set lr_schedule.warmup_steps=5 --set training.log_interval_steps=1 --threads 1 \
  --timeout 30 2>&1) || { echo "$out"; echo "FAIL: did not complete"; exit 1; }
echo "$out" | tail -3
# floor(1001 / 48) = 20 steps per epoch, 2 epochs.
echo "$out" | grep -q '^step 40/40 ' || { echo "FAIL: expected 40 steps"; exit 1; }
echo "PASS"
