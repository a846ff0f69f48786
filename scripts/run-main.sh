#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains the
# Fashion-MNIST CNN (examples/fashion_mnist_cnn.yaml) as 2 data-parallel ranks
# on this machine's CPU, with a live progress line, ending with
# `test_accuracy=0.XXXX`.
#
# Today the ranks are started by the trainer's own launcher (--nproc 2, Gloo
# over loopback). With the coordinator (issue #5) it becomes: `ringmaster local
# up`, submit the spec, and follow the job to its final accuracy.
#
# Usage: scripts/run-main.sh [--set key=value ...]   (extra flags go to the trainer)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build test
echo "=== building (bazel build //...)"
bazel build //... 2>&1 | grep -vE 'linux-sandbox|^\s*$' | tail -3

state_dir=${RINGMASTER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/ringmaster}
run_dir="$state_dir/runs/fashion-mnist-cnn-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run_dir"
echo "=== training examples/fashion_mnist_cnn.yaml (checkpoints in $run_dir)"
# One CPU thread per rank: two ranks share this machine's cores.
exec bazel-bin/engine/ringmaster-trainer --spec examples/fashion_mnist_cnn.yaml --nproc 2 --threads 1 \
  --checkpoint-dir "$run_dir" "$@"
