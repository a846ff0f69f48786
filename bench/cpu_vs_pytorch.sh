#!/usr/bin/env bash
# Training-step throughput of the engine's CPU backend beside PyTorch (Debian's
# python3-torch) on the same MLP and CNN, batch and threads, in one run; prints
# a table with the ratio ours / PyTorch. Each side runs `rounds` times,
# alternating, and the best round of each is reported (the machine is shared).
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
ours=$(mktemp) theirs=$(mktemp)
trap 'rm -f "$ours" "$theirs"' EXIT
for _ in $(seq "$rounds"); do
  bazel-bin/bench/train_step_bench --batch "$batch" --threads "$threads" >>"$ours"
  /usr/bin/python3 bench/reference/train_step_bench.py --batch "$batch" --threads "$threads" >>"$theirs"
done
best() {  # best samples/s of model $1 in file $2
  grep "model=$1 " "$2" | sed 's/.*samples_per_s=\([0-9.]*\).*/\1/' | sort -g | tail -1
}
torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
echo "CPU training step, batch $batch, $threads threads, best of $rounds rounds ($(nproc) cores; PyTorch $torch_version)"
printf '%-6s %14s %14s %8s\n' model ours_samples/s torch_samples/s ratio
for m in mlp cnn; do
  o=$(best "$m" "$ours") t=$(best "$m" "$theirs")
  printf '%-6s %14.1f %14.1f %7.2fx\n' "$m" "$o" "$t" "$(echo "$o / $t" | bc -l)"
done
