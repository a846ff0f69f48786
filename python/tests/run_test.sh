#!/usr/bin/env bash
# Runs one SDK test module with Debian's Python, the SDK tree built by
# //python:sdk_tree (bazel-bin/python/sdk) first on the path, as a worker
# puts it on its ranks' PYTHONPATH. (Bazel 4.2's py_test launches through
# `/usr/bin/env python`, which Debian 12 does not have.)
set -euo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:?}"
export PYTHONPATH="$root/python/sdk:$root/python/tests"
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 "$root/$1"
