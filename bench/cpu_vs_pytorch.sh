#!/usr/bin/env bash
# Training-step throughput of the engine's CPU backend beside PyTorch (Debian's
# python3-torch) on the same MLP and CNN, batch and threads, in one run; prints
# a table with the ratio ours / PyTorch. Each side runs `rounds` times,
# alternating (ours, PyTorch, ours, ...), and the median and best round of each
# are reported. OPENBLAS_* variables change both sides (our GEMMs and
# PyTorch's BLAS): the header states them, and the load average before and
# after, so a loaded machine shows. Run it on an idle machine.
# Usage: bench/cpu_vs_pytorch.sh [--batch 64] [--threads 2] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
batch=64 threads=2 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--batch N] [--threads N] [--rounds N]" >&2; exit 2 ;;
  esac
done
scripts/install-deps.sh bench >/dev/null
bazel build //bench:train_step_bench 2>&1 | grep -E 'ERROR|error:' && exit 1
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
ours=$(mktemp) theirs=$(mktemp)
trap 'rm -f "$ours" "$theirs"' EXIT
for _ in $(seq "$rounds"); do
  bazel-bin/bench/train_step_bench --batch "$batch" --threads "$threads" >>"$ours"
  /usr/bin/python3 bench/reference/train_step_bench.py --batch "$batch" --threads "$threads" >>"$theirs"
done
rounds_of() {  # samples/s of model $1 in file $2, one per round, sorted
  grep "model=$1 " "$2" | sed 's/.*samples_per_s=\([0-9.]*\).*/\1/' | sort -g
}
median() { awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
echo "CPU training step, batch $batch, $threads threads, $rounds rounds alternating ($(nproc) cores; PyTorch $torch_version)"
echo "environment: OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" \
  "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}; PyTorch's BLAS: $blas"
echo "load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %14s %14s %8s %14s %14s %8s\n' model ours_median torch_median ratio ours_best torch_best ratio
for m in mlp cnn; do
  om=$(rounds_of "$m" "$ours" | median) tm=$(rounds_of "$m" "$theirs" | median)
  ob=$(rounds_of "$m" "$ours" | tail -1) tb=$(rounds_of "$m" "$theirs" | tail -1)
  printf '%-6s %14.1f %14.1f %7.2fx %14.1f %14.1f %7.2fx\n' "$m" "$om" "$tm" "$(echo "$om / $tm" | bc -l)" \
    "$ob" "$tb" "$(echo "$ob / $tb" | bc -l)"
done
