#!/usr/bin/env bash
# bench/gpu_vs_pytorch.sh --smoke on this machine's CPU: tiny models, every
# step of the GPU benchmark run through (our GPT-2 twin in fp32 and fp16 with
# loss scaling, the CNN, a coordinator + worker + CLI job scraped through
# /metrics), and the table it prints must hold our figures. PyTorch's columns
# are filled only where python3 has torch (not on a fresh CI machine).
# Usage: gpu_vs_pytorch_smoke_test.sh SCRIPT TRAINER COORDINATOR WORKER CLI
set -euo pipefail
script=$(realpath "$1")
bin=$(mktemp -d /tmp/rm-bench-bin-XXXXXX)
out=$(mktemp -d /tmp/rm-bench-out-XXXXXX)
trap 'rm -rf "$bin" "$out"' EXIT
shift
for b in "$@"; do ln -s "$(realpath "$b")" "$bin/$(basename "$b")"; done
"$script" --bin "$bin" --out "$out" --smoke --batches "4 2" || { echo "FAIL: the benchmark script failed"; exit 1; }
table=$out/bench.txt
[[ -s "$out/bench-logs.tgz" ]] || { echo "FAIL: no logs archive"; exit 1; }
figure() { grep -F "$1" "$table" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }'; }
check_positive() {
  local v
  v=$(figure "$1")
  awk -v v="${v:-0}" 'BEGIN { exit !(v > 0) }' || { echo "FAIL: '$1' has no positive figure"; cat "$table"; exit 1; }
  echo "ok: $1 = $v"
}
check_positive "GPT-2 tokens/s (fp32, batch 4)"
check_positive "GPT-2 ours fp16+loss scaling"
check_positive "CNN images/s"
grep -q -E '^full stack job j-1 in fp32: /metrics .* yes$' "$table" || { echo "FAIL: the full-stack job's /metrics"; cat "$table"; exit 1; }
echo "ok: the full-stack job's throughput and loss scale reached /metrics"
echo "PASS"
