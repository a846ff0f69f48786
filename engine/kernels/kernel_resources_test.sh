#!/usr/bin/env bash
# Registers, spills, shared memory and H100 occupancy of every kernel in this package,
# checked against bench/GPU_NOTES.md by scripts/kernel_resources.py (its docstring says what
# fails and how a kernel opts in past 48 KB). Prints "SKIP: why" in a build without CUDA.
# Arguments: what //scripts:kernel_resources.bzl passes (the build's nvcc commands), and,
# through `bazel run //engine/kernels:kernel_resources_test -- --update`, --update.
set -euo pipefail
exec python3 scripts/kernel_resources.py --root . "$@"
