#!/usr/bin/env bash
# bench/gpu_vs_pytorch.sh --smoke on this machine's CPU: tiny models, every
# step of the GPU benchmark run through (our GPT-2 twin in fp32 and fp16 with
# loss scaling, the plan's peak memory against the measured one, the CNN, a
# coordinator + worker + CLI job scraped through /metrics), and the table it
# prints must hold our figures. The GPT-2 run at the first batch (4) fails
# with an error that is not running out of memory (a wrapper around the
# trainer fails it): the failure and its reason must be in the table, and the
# next smaller batch (2) must be tried and measured. PyTorch's columns are
# filled only where python3 has torch (not on a fresh CI machine).
# Usage: gpu_vs_pytorch_smoke_test.sh SCRIPT TRAINER COORDINATOR WORKER CLI
set -euo pipefail
script=$(realpath "$1")
bin=$(mktemp -d /tmp/rm-bench-bin-XXXXXX)
out=$(mktemp -d /tmp/rm-bench-out-XXXXXX)
trap 'rm -rf "$bin" "$out"' EXIT
shift
for b in "$@"; do ln -s "$(realpath "$b")" "$bin/$(basename "$b")"; done
# The trainer, except that a run at batch 4 fails with a CUDA error.
trainer=$(realpath "$bin/ringmaster-trainer")
rm "$bin/ringmaster-trainer"
cat >"$bin/ringmaster-trainer" <<WRAPPER
#!/bin/bash
case " \$* " in
  *" data.batch_size=4 "*)
    echo "step 1/10 | loss 5.5"
    echo "error: made-up failure: cudaErrorLaunchFailure (719): unspecified launch failure" >&2
    exit 3 ;;
esac
exec "$trainer" "\$@"
WRAPPER
chmod +x "$bin/ringmaster-trainer"
"$script" --bin "$bin" --out "$out" --smoke --batches "4 2" || { echo "FAIL: the benchmark script failed"; exit 1; }
table=$out/bench.txt
[[ -s "$out/bench-logs.tgz" ]] || { echo "FAIL: no logs archive"; exit 1; }
grep -q -F "GPT-2 ours fp32 batch 4 failed (ours-fp32-b4.log): exit 3: error: made-up failure: cudaErrorLaunchFailure (719)" \
  "$table" || { echo "FAIL: the failure at batch 4 and its reason are not in the table"; cat "$table"; exit 1; }
echo "ok: the failure at batch 4 is in the table with its reason"
figure() { grep -F "$1" "$table" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }'; }
check_positive() {
  local v
  v=$(figure "$1")
  awk -v v="${v:-0}" 'BEGIN { exit !(v > 0) }' || { echo "FAIL: '$1' has no positive figure"; cat "$table"; exit 1; }
  echo "ok: $1 = $v"
}
check_positive "GPT-2 tokens/s (fp32, batch 2)"
check_positive "GPT-2 ours fp16+loss scaling"
check_positive "CNN images/s"
# The plan's peak memory beside the measured one: both known, within 2x of
# each other (//engine/plan:plan_memory_test holds the CPU examples to 15%).
peak_row=$(grep -F "GPT-2 peak MiB" "$table") || { echo "FAIL: no peak memory row"; cat "$table"; exit 1; }
read -r measured planned ratio < <(awk '{ print $(NF-3), $(NF-1), $NF }' <<<"$peak_row")
awk -v m="$measured" -v p="$planned" -v r="$ratio" 'BEGIN { exit !(m > 0 && p > 0 && r >= 0.5 && r <= 2) }' ||
  { echo "FAIL: peak memory: measured '$measured' MiB, plan '$planned' MiB, ratio '$ratio'"; cat "$table"; exit 1; }
echo "ok: peak memory measured $measured MiB, plan $planned MiB (plan/measured $ratio)"
grep -q -E '^full stack job j-1 in fp32: /metrics .* yes$' "$table" || { echo "FAIL: the full-stack job's /metrics"; cat "$table"; exit 1; }
echo "ok: the full-stack job's throughput and loss scale reached /metrics"
echo "PASS"
