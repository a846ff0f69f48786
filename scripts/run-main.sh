#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, starts a local
# cluster (a coordinator and a worker on this machine: `ringmaster local up`),
# submits the Fashion-MNIST CNN (examples/fashion_mnist_cnn.yaml) as 2
# data-parallel CPU ranks, and follows it with a live progress line to its
# final test accuracy. The cluster stays up afterwards (`ringmaster jobs`,
# `describe`, `logs`, `checkpoints`); `bazel-bin/client/ringmaster local down`
# stops it.
#
# Usage: scripts/run-main.sh [--set key=value ...]   (extra flags go to submit)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build demo
# Only what the demo runs (the test command builds everything): the CLI, the
# two daemons, the trainer and the Python SDK tree the worker gives program
# jobs. Without a GPU the trainer is built CPU-only (--config=cpu): no CUDA
# kernels to compile.
targets=(//client:ringmaster //coordinator:ringmaster-coordinator //worker:ringmaster-worker
  //engine:ringmaster-trainer //python:sdk_tree)
config=()
nvidia-smi -L >/dev/null 2>&1 || config=(--config=cpu)
echo "=== building ${targets[*]} ${config[*]}"
bazel build "${config[@]}" "${targets[@]}" 2>&1 | grep -vE 'linux-sandbox|^\s*$|^INFO: From ' | tail -3

cli=bazel-bin/client/ringmaster
state_dir=${RINGMASTER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/ringmaster/local}
echo "=== starting a local cluster (state in $state_dir)"
"$cli" local up --state-dir "$state_dir" --cpu-slots 2
echo "=== submitting examples/fashion_mnist_cnn.yaml (2 data-parallel ranks, 1 CPU each)"
status=0
"$cli" submit examples/fashion_mnist_cnn.yaml --set resources.cpus_per_rank=1 --follow "$@" || status=$?
echo "The local cluster is still running: $cli jobs | describe JOB | logs JOB; stop it with: $cli local down"
exit $status
