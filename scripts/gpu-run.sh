#!/usr/bin/env bash
# Runs every GPU test and benchmark of a pack made by scripts/gpu-pack.sh, on
# a GPU machine that has PyTorch's CUDA libraries (nvidia-* wheels) but none of
# Debian's: one log per item in RESULTSDIR (gtest XML for the test binaries),
# then a summary line "N passed, N failed" (also in RESULTSDIR/summary.txt),
# and how many of the passed ones skipped checks (no device: they say so).
# Exit status 0 only when nothing failed. Without a GPU it stops at once,
# saying so (exit 2).
# With WHAT = bench it runs bench/gpu_vs_pytorch.sh from the pack instead (issue
# #7: GPT-2 124M and the CNN, ours beside PyTorch; its table in
# RESULTSDIR/bench.txt); WHAT = all runs both. Each fits one 10-minute call.
# Usage: gpu-run.sh PACKDIR RESULTSDIR [tests|bench|all]
set -uo pipefail

packdir=$(cd "${1:?usage: gpu-run.sh PACKDIR RESULTSDIR}" && pwd)
results=${2:?usage: gpu-run.sh PACKDIR RESULTSDIR}
what=${3:-tests}
case "$what" in tests|bench|all) ;; *) echo "gpu-run: WHAT must be tests, bench or all, got '$what'" >&2; exit 2 ;; esac
mkdir -p "$results"
results=$(cd "$results" && pwd)
exec > >(tee "$results/run.log") 2>&1

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >"$results/nvidia-smi.txt" 2>&1; then
  echo "gpu-run: no NVIDIA GPU here (nvidia-smi missing or failing): nothing run"
  exit 2
fi
cat "$results/nvidia-smi.txt"

# The pack's payload (binaries, libraries, scripts, specs, the KJV text) is
# unpacked into a temporary folder (removed at the end); Fashion-MNIST stays
# in PACKDIR/data.
pack=$packdir
if [[ -f "$packdir/payload.tar.xz" ]]; then
  pack=$(mktemp -d /tmp/rm-gpu-run-XXXXXX)
  trap 'rm -rf "$pack"' EXIT
  xz -dc "$packdir/payload.tar.xz" | tar -C "$pack" -xf - || { echo "gpu-run: cannot unpack the payload"; exit 1; }
fi

# CUDA libraries from PyTorch's wheels: every lib folder under site-packages/nvidia.
python=${PYTHON:-python3}
nvidia_libs=$("$python" - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
dirs = sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "**", "lib*.so*"), recursive=True)})
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="$pack/lib${nvidia_libs:+:$nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# Nothing a binary needs may be missing.
ldd_bad=0
for b in "$pack"/bin/*; do
  if ldd "$b" | grep -q "not found"; then
    echo "gpu-run: $(basename "$b"): $(ldd "$b" | grep "not found" | tr -s ' \t' ' ' | tr '\n' ';')"
    ldd_bad=1
  fi
done
if [[ $ldd_bad -ne 0 ]]; then
  echo "gpu-run: shared libraries missing (see above)"
  echo "0 passed, 1 failed" | tee "$results/summary.txt"
  exit 1
fi
echo "ldd: every library of every binary resolves"

passed=0 failed=0 skipped=0
if [[ "$what" == bench ]]; then
  "$pack/bench/gpu_vs_pytorch.sh" --bin "$pack/bin" --out "$results" --examples "$pack/examples" \
    --bench "$pack/bench" --fashion "$packdir/data/fashion-mnist" --python "$python"
  exit
fi
run_item() {  # NAME COMMAND...
  local name=$1; shift
  local start=$SECONDS
  if (cd "$pack" && "$@") >"$results/$name.log" 2>&1; then
    passed=$((passed + 1))
    if grep -q -E '^\[  SKIPPED \]|^SKIP:' "$results/$name.log"; then
      skipped=$((skipped + 1)); echo "PASS $name ($((SECONDS - start)) s), with SKIPPED parts: see its log"
    else
      echo "PASS $name ($((SECONDS - start)) s)"
    fi
  else
    failed=$((failed + 1)); echo "FAIL $name ($((SECONDS - start)) s): $results/$name.log"; tail -5 "$results/$name.log"
  fi
}

while read -r kind name; do
  [[ "$kind" == "bin" && "$name" == *__* ]] || continue  # test binaries are PKG__NAME
  run_item "$name" "$pack/bin/$name" --gtest_output="xml:$results/$name.xml"
done <"$pack/MANIFEST"
for mode in fashion gpt; do
  data=$packdir/data/fashion-mnist
  [[ $mode == gpt ]] && data=$pack/data/kjv.txt
  run_item "gpu_${mode}_training" "$pack/tests/gpu_training_test.sh" "$pack/bin/ringmaster-trainer" \
    "$pack/examples" "$mode" "$data"
done
# ZeRO-1 and pipeline over NCCL (skips, saying so, with fewer than 2 GPUs).
run_item gpu_parallel "$pack/tests/gpu_parallel_test.sh" "$pack/bin/ringmaster-trainer" "$pack/bin/checkpoint-diff" \
  "$pack/examples/fashion_mnist_mlp.yaml" "$packdir/data/fashion-mnist"
while read -r kind label; do
  [[ "$kind" == "bench" ]] || continue
  name=$(basename "${label#*:}")
  run_item "bench_$name" "$pack/bin/$name"
done <"$pack/MANIFEST"

if [[ "$what" == all ]]; then
  run_item bench_gpu_vs_pytorch "$pack/bench/gpu_vs_pytorch.sh" --bin "$pack/bin" --out "$results" \
    --examples "$pack/examples" --bench "$pack/bench" --fashion "$packdir/data/fashion-mnist" --python "$python"
fi
echo "$passed passed, $failed failed" | tee "$results/summary.txt"
[[ $skipped -eq 0 ]] || echo "($skipped of the passed items skipped some or all of their checks)" | tee -a "$results/summary.txt"
[[ $failed -eq 0 ]]
