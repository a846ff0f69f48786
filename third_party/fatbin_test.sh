#!/usr/bin/env bash
# Checks that every nvcc object holds SASS for sm_80 and sm_90 and compute_90 PTX.
# Usage: fatbin_test.sh FATBIN_ARCHS_PY OBJECT...
set -euo pipefail
tool=$1
shift
for obj in "$@"; do
  python3 "$tool" "$obj" --expect sm_80 sm_90 compute_90
  echo "ok: $obj"
done
