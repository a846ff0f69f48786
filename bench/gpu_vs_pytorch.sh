#!/usr/bin/env bash
# The GPU benchmark, ours beside PyTorch in one run, each figure a ratio
# measured side by side on the same GPU:
#   1. the GPU's bf16 matmul rate (PyTorch, 8192^3 on random data, median of 20);
#   2. GPT-2 124M (bench/gpt2_124m.yaml; bench/reference/gpt2_bench.py is the same
#      model in PyTorch with torch.compile): ours in bf16 at the largest batch of
#      --batches that `ringmaster plan` says fits and that runs (a batch that
#      fails, for whatever reason, is written down with the reason and the next
#      smaller one tried), then ours in fp16 with dynamic loss scaling at that
#      batch, then PyTorch bf16 at that batch (a failure of either written down
#      with its reason too):
#      tokens/s (median over the steps after the first third: warm-up, and
#      torch.compile's compilation, stay out), MFU with FLOPs per token
#      6N + 6 L C T against the measured rate and against 989 TFLOP/s, and the
#      plan's peak memory against the caching allocator's peak (bf16 run);
#   3. the Fashion-MNIST CNN (examples/fashion_mnist_cnn.yaml, one GPU, 8 epochs;
#      bench/reference/fashion_cnn.py): images/s and wall time to 0.92 test accuracy;
#   4. the full stack on this host: a coordinator, a worker that discovers the
#      GPU, a GPT job in fp16 submitted with the CLI; its /metrics must show the
#      rank's throughput and loss scale.
# Each row is appended to OUT/bench.txt as soon as it is measured, and the logs
# are repacked into OUT/bench-logs.tgz after each part, so a run cut off keeps
# what it measured; the table is printed again at the end. Every part is bounded
# by what is left of --budget (seconds, default 400); a part that would start
# with under 15 s left is reported as not run.
#
# Usage: bench/gpu_vs_pytorch.sh --bin DIR --out DIR [--examples DIR] [--bench DIR]
#          [--fashion DIR] [--python PY] [--batches "64 48 32 24 16 8"] [--steps N]
#          [--budget SECONDS] [--smoke]
#   --bin       holds ringmaster-trainer, -coordinator, -worker and ringmaster
#   --smoke     tiny models on the CPU, no torch.compile: checks this script here
#               (//bench:gpu_vs_pytorch_smoke_test); the figures mean nothing.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin="" out="" examples="$here/../examples" benchdir="$here" fashion=/usr/share/datasets/fashion-mnist
python=python3 batches="64 48 32 24 16 8" steps=40 smoke=0 budget=400
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --examples) examples=$2; shift 2 ;;
    --bench) benchdir=$2; shift 2 ;;
    --fashion) fashion=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    *) echo "usage: $0 --bin DIR --out DIR [--examples DIR] [--bench DIR] [--fashion DIR] [--python PY]" \
         "[--batches LIST] [--steps N] [--budget SECONDS] [--smoke]" >&2; exit 2 ;;
  esac
done
[[ -n "$bin" && -n "$out" ]] || { echo "gpu_vs_pytorch: --bin and --out are required" >&2; exit 2; }
bin=$(cd "$bin" && pwd) examples=$(cd "$examples" && pwd) benchdir=$(cd "$benchdir" && pwd)
for b in ringmaster-trainer ringmaster-coordinator ringmaster-worker ringmaster; do
  [[ -x "$bin/$b" ]] || { echo "gpu_vs_pytorch: --bin: no executable $bin/$b" >&2; exit 2; }
done
mkdir -p "$out" && out=$(cd "$out" && pwd)
logs=$(mktemp -d /tmp/rm-bench-XXXXXX)
save_logs() { tar -C "$logs" -czf "$out/bench-logs.tgz.new" . 2>/dev/null && mv "$out/bench-logs.tgz.new" "$out/bench-logs.tgz"; }
cleanup_pids=()
cleanup() {
  for p in "${cleanup_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 1
  for p in "${cleanup_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  save_logs
  rm -rf "$logs"
}
trap cleanup EXIT
# limit CAP: seconds a part may take: CAP, or what is left of the budget less a
# 5 s margin; "" (and the part is not run) when under 15 s are left.
limit() {
  local left=$((budget - SECONDS - 5))
  ((left >= 10)) || return 1
  echo $(($1 < left ? $1 : left))
}

have_torch=1
"$python" -c 'import torch' 2>/dev/null || have_torch=0
plan_gpu=h100
case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  *H200*) plan_gpu=h200 ;;
  *A100*) plan_gpu=a100 ;;
esac
if [[ $smoke -eq 1 ]]; then
  device=cpu compile=(--no-compile) precision_fast=fp32 plan_gpu=cpu
  gpt_shape=(--set model.gpt.layers=2 --set model.gpt.width=64 --set model.gpt.heads=4 --set model.gpt.context=32
             --set model.gpt.vocab_size=256)
  ref_shape=(--layers 2 --width 64 --heads 4 --context 32 --vocab 256)
  L=2 C=64 T=32 steps=10 cnn_limit=(--max-steps 40) ref_cnn_limit=(--max-steps 40 --epochs 1) cnn_log=5 cnn_skip=10
else
  device=cuda compile=() precision_fast=bf16
  gpt_shape=() ref_shape=() L=12 C=768 T=1024 cnn_limit=() ref_cnn_limit=() cnn_log=50 cnn_skip=200
fi

{
  echo "ringmaster vs PyTorch, $(date -u +%Y-%m-%dT%H:%M:%SZ), $( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo cpu) | head -1)," \
       "torch $( [[ $have_torch -eq 1 ]] && "$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  printf '%-44s %16s %16s %8s\n' "" "ours" "PyTorch" "ratio"
} >"$out/bench.txt"
row() { printf '%-44s %16s %16s %8s\n' "$1" "$2" "$3" "$4" | tee -a "$out/bench.txt"; }
# note TEXT: a line of its own in the table (a run that failed or was not tried, and why).
note() { echo "$*" | tee -a "$out/bench.txt"; }
# failure_reason LOG RC LIMIT: why a run failed, in one line: a time-out, or
# the last line of its log that names an error (else its last line).
failure_reason() {
  local log=$1 rc=$2 limit=$3 line
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then echo "timed out after ${limit}s"; return; fi
  line=$(tr '\r' '\n' <"$log" | grep -i -E 'out of memory|RESOURCE_EXHAUSTED|error|fail|abort|terminat|Traceback' | tail -1)
  [[ -n "$line" ]] || line=$(tr '\r' '\n' <"$log" | grep -v '^[[:space:]]*$' | tail -1)
  echo "exit $rc: ${line:-no output}" | cut -c1-300
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
median_of() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else print v[int((NR + 1) / 2)] }'; }

# ---- 1. the bf16 matmul rate ------------------------------------------------
peak=0
if [[ $smoke -eq 0 && $have_torch -eq 1 ]]; then
  peak=$("$python" - <<'PY' 2>"$logs/peak.err"
import torch
a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
for _ in range(3): a @ b
times = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); e.synchronize(); times.append(s.elapsed_time(e) / 1000)
times.sort()
print("%.1f" % (2 * 8192 ** 3 / times[len(times) // 2] / 1e12))
PY
  ) || peak=0
fi
echo "bf16 matmul rate: ${peak} TFLOP/s (measured), 989 TFLOP/s (datasheet)"

# ---- 2. GPT-2 124M --------------------------------------------------------------
# plan_field BATCH PRECISION FIELD: a field of `ringmaster plan -o json` for the
# GPT-2 spec at that batch and precision on this GPU type (empty if none).
plan_field() {
  "$bin/ringmaster" plan "$benchdir/gpt2_124m.yaml" --gpu "$plan_gpu" -o json --set "resources.device=$device" \
    "${gpt_shape[@]}" --set "data.batch_size=$1" --set "precision.compute=$2" 2>>"$logs/plan.err" |
    "$python" -c "import json, sys; print(json.load(sys.stdin)['$3'])" 2>>"$logs/plan.err"
}
# run_ours NAME BATCH PRECISION: the trainer for $steps steps; prints tokens/s
# (median of the progress lines after the first third of the run), or fails
# with the reason in $logs/NAME.why.
run_ours() {
  local name=$1 batch=$2 precision=$3 log="$logs/$1.log" t rc tps
  t=$(limit 120) || { echo "out of time" >"$log"; echo "not started: out of time (${budget}s budget)" >"$logs/$name.why"; return 1; }
  (cd "$logs" && timeout -k 5 "$t" "$bin/ringmaster-trainer" --spec "$benchdir/gpt2_124m.yaml" --device "$device" \
     "${gpt_shape[@]}" --set "data.batch_size=$batch" --set "precision.compute=$precision" \
     --set training.log_interval_steps=1 --max-steps "$steps") >"$log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then failure_reason "$log" "$rc" "$t" >"$logs/$name.why"; return 1; fi
  tps=$(tr '\r' '\n' <"$log" | sed -n 's/^step \([0-9]*\)\/.* | \([0-9.]*\) tokens\/s.*/\1 \2/p' |
    awk -v skip=$((steps / 3)) '$1 > skip { print $2 }' | median_of)
  if ! awk -v t="$tps" 'BEGIN { exit !(t > 0) }'; then
    echo "exit 0 but no tokens/s after step $((steps / 3)) in its log" >"$logs/$name.why"
    return 1
  fi
  echo "$tps"
}
# The largest batch that runs: every batch that fails is written down with its
# reason, and the next smaller one tried, whatever the failure (out of memory,
# a CUDA error, a crash, a time-out).
params=0 batch=0 ours_bf16=0
for b in $batches; do
  if [[ "$(plan_field "$b" "$precision_fast" fits)" == False ]]; then
    note "GPT-2 ours $precision_fast batch $b: not tried: the plan needs $(plan_field "$b" "$precision_fast" peak_bytes) bytes on a $plan_gpu"
    continue
  fi
  if t=$(run_ours "ours-$precision_fast-b$b" "$b" "$precision_fast"); then batch=$b ours_bf16=$t; break; fi
  note "GPT-2 ours $precision_fast batch $b failed (ours-$precision_fast-b$b.log): $(cat "$logs/ours-$precision_fast-b$b.why")"
done
save_logs
# What follows needs a batch that ran; without one the other parts still run.
if [[ $batch -eq 0 ]]; then
  row "GPT-2: did not run at any batch of: $batches" "" "" ""
else
  params=$(sed -n 's/.*: \([0-9]*\) parameters,.*/\1/p' "$logs/ours-$precision_fast-b$batch.log" | head -1)
  ours_fp16=$(run_ours "ours-fp16-b$batch" "$batch" fp16) ||
    { ours_fp16=0; note "GPT-2 ours fp16 batch $batch failed (ours-fp16-b$batch.log): $(cat "$logs/ours-fp16-b$batch.why")"; }
  flops_per_token=$(awk -v n="$params" -v l=$L -v c=$C -v t=$T 'BEGIN { printf "%.0f", 6 * n + 6 * l * c * t }')
  mfu() { awk -v tps="$1" -v f="$flops_per_token" -v p="$2" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * tps * f / (p * 1e12); else print "n/a" }'; }
  theirs_bf16=0
  if [[ $have_torch -eq 1 ]] && t=$(limit 200); then
    PYTHONUNBUFFERED=1 timeout -k 5 "$t" "$python" "$benchdir/reference/gpt2_bench.py" "${ref_shape[@]}" "${compile[@]}" \
      --batch "$batch" --steps "$steps" --precision "$precision_fast" --device "$device" >"$logs/pytorch-gpt.log" 2>&1
    rc=$?
    theirs_bf16=$(sed -n 's/.* tokens_per_s=\([0-9.]*\).*/\1/p' "$logs/pytorch-gpt.log" | tail -1)
    if [[ $rc -ne 0 || -z "$theirs_bf16" ]]; then
      note "GPT-2 PyTorch $precision_fast batch $batch failed (pytorch-gpt.log): $(failure_reason "$logs/pytorch-gpt.log" "$rc" "$t")"
      theirs_bf16=0
    fi
  elif [[ $have_torch -eq 1 ]]; then
    note "GPT-2 PyTorch $precision_fast batch $batch: not run: out of time (${budget}s budget)"
  fi
  echo "GPT-2: $params parameters, $flops_per_token FLOPs/token, batch $batch x $T tokens"
  row "GPT-2 tokens/s ($precision_fast, batch $batch)" "$ours_bf16" "$theirs_bf16" "$(ratio "$ours_bf16" "$theirs_bf16")"
  row "GPT-2 MFU vs measured ${peak} TFLOP/s" "$(mfu "$ours_bf16" "$peak")" "$(mfu "$theirs_bf16" "$peak")" ""
  row "GPT-2 MFU vs 989 TFLOP/s" "$(mfu "$ours_bf16" 989)" "$(mfu "$theirs_bf16" 989)" ""
  row "GPT-2 ours fp16+loss scaling, tokens/s" "$ours_fp16" "" \
    "$(awk -v a="$ours_fp16" -v b="$ours_bf16" 'BEGIN { if (a > 0 && b > 0) printf "%+.1f%%", 100 * (a / b - 1); else print "n/a" }')"
  # The plan's peak memory per rank against what the run measured (the caching
  # allocator's peak on a GPU, the host tensors' on the CPU): ratio plan/measured.
  measured_peak=$(sed -n 's/^peak_memory_bytes=\([0-9]*\)$/\1/p' "$logs/ours-$precision_fast-b$batch.log" | tail -1)
  planned_peak=$(plan_field "$batch" "$precision_fast" peak_bytes)
  mib() { awk -v b="${1:-0}" 'BEGIN { if (b > 0) printf "%.1f", b / 1048576; else print "n/a" }'; }
  row "GPT-2 peak MiB ($precision_fast): measured, plan" "$(mib "$measured_peak")" "plan $(mib "$planned_peak")" \
    "$(ratio "${planned_peak:-0}" "${measured_peak:-0}")"
  save_logs
fi

# ---- 3. Fashion-MNIST CNN ---------------------------------------------------------
# Wall time from the start to the end of the first evaluation at >= 0.92.
t=$(limit 120) || t=1
(cd "$logs" && timeout -k 5 "$t" "$bin/ringmaster-trainer" --spec "$examples/fashion_mnist_cnn.yaml" --device "$device" \
   --set "data.path=$fashion" --set parallelism.data=1 --set resources.ranks_per_node=1 \
   --set checkpoint.interval_steps=0 --set training.epochs=8 --set "training.log_interval_steps=$cnn_log" "${cnn_limit[@]}" \
   2>&1 | tr '\r' '\n' | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done) >"$logs/ours-cnn.log"
cnn_start=$(head -1 "$logs/ours-cnn.log" | cut -d' ' -f1)
ours_cnn_ips=$(sed -n 's/^[0-9.]* step \([0-9]*\)\/.* | \([0-9.]*\) samples\/s.*/\1 \2/p' "$logs/ours-cnn.log" |
  awk -v skip=$cnn_skip '$1 > skip { print $2 }' | median_of)
ours_cnn_t=$(awk -v s="$cnn_start" '/ eval step .* accuracy / { for (i = 1; i <= NF; i++) if ($i == "accuracy" && $(i + 1) >= 0.92) { printf "%.1f", $1 - s; exit } }' "$logs/ours-cnn.log")
ours_cnn_acc=$(sed -n 's/.*test_accuracy=//p' "$logs/ours-cnn.log" | tail -1)
theirs_cnn_ips=0 theirs_cnn_t="" theirs_cnn_acc=""
if [[ $have_torch -eq 1 ]] && t=$(limit 150); then
  PYTHONUNBUFFERED=1 timeout -k 5 "$t" "$python" "$benchdir/reference/fashion_cnn.py" --data "$fashion" "${compile[@]}" \
    --device "$device" "${ref_cnn_limit[@]}" >"$logs/pytorch-cnn.log" 2>&1
  theirs_cnn_ips=$(sed -n 's/.* images_per_s=\([0-9.]*\).*/\1/p' "$logs/pytorch-cnn.log" | tail -1)
  theirs_cnn_t=$(sed -n 's/.* seconds_to_target=\([0-9.-]*\).*/\1/p' "$logs/pytorch-cnn.log" | tail -1)
  theirs_cnn_acc=$(sed -n 's/.* test_accuracy=\([0-9.]*\).*/\1/p' "$logs/pytorch-cnn.log" | tail -1)
  [[ "$theirs_cnn_t" == -1.00 ]] && theirs_cnn_t=""
fi
row "CNN images/s (batch 64)" "${ours_cnn_ips:-0}" "${theirs_cnn_ips:-0}" "$(ratio "${ours_cnn_ips:-0}" "${theirs_cnn_ips:-0}")"
row "CNN seconds to 0.92 (final accuracy)" "${ours_cnn_t:-never} (${ours_cnn_acc:-?})" \
  "${theirs_cnn_t:-never} (${theirs_cnn_acc:-?})" "$(ratio "${theirs_cnn_t:-0}" "${ours_cnn_t:-0}")"
save_logs

# ---- 4. the full stack -------------------------------------------------------------
t=$(limit 90) || t=0
stack_deadline=$((SECONDS + t))
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
state=$(mktemp -d /tmp/rm-stack-XXXXXX)
addr=127.0.0.1:$(free_port) metrics=127.0.0.1:$(free_port)
"$bin/ringmaster-coordinator" --listen "$addr" --state-dir "$state/c" --metrics-listen "" >"$logs/coordinator.log" 2>&1 &
cleanup_pids+=($!)
slots=()
[[ $smoke -eq 1 ]] && slots=(--cpu-slots 1)
"$bin/ringmaster-worker" --coordinator "$addr" --state-dir "$state/w" --trainer "$bin/ringmaster-trainer" \
  --listen-address 127.0.0.1 --node-name gpu-host --metrics-listen "$metrics" "${slots[@]}" >"$logs/worker.log" 2>&1 &
cleanup_pids+=($!)
stack="no"
stack_precision=fp16
[[ $smoke -eq 1 ]] && stack_precision=fp32
job=""
while ((SECONDS < stack_deadline)); do
  job=$("$bin/ringmaster" --coordinator "$addr" submit "$benchdir/gpt2_124m.yaml" --set "resources.device=$device" \
        "${gpt_shape[@]}" --set data.batch_size=8 --set "precision.compute=$stack_precision" --set training.steps=400 \
        2>>"$logs/submit.err" | grep -o 'j-[0-9]*' | head -1) && [[ -n "$job" ]] && break
  sleep 0.2
done
scrape=""
if [[ -n "$job" ]]; then
  while ((SECONDS < stack_deadline)); do
    scrape=$(curl -s "http://$metrics/metrics" 2>/dev/null || "$python" -c "import urllib.request; print(urllib.request.urlopen('http://$metrics/metrics').read().decode())" 2>/dev/null)
    if grep -q -E '^ringmaster_rank_tokens_per_second\{.*\} [1-9]' <<<"$scrape" &&
       grep -q -E '^ringmaster_rank_loss_scale\{.*\} [1-9]' <<<"$scrape"; then
      stack="yes"
      break
    fi
    sleep 0.5
  done
  "$bin/ringmaster" --coordinator "$addr" cancel "$job" >/dev/null 2>&1
fi
printf '%s\n' "$scrape" >"$logs/worker-metrics.txt"
stack_tps=$(sed -n 's/^ringmaster_rank_tokens_per_second{.*} \([0-9.e+]*\)$/\1/p' <<<"$scrape" | head -1)
stack_scale=$(sed -n 's/^ringmaster_rank_loss_scale{.*} \([0-9.e+]*\)$/\1/p' <<<"$scrape" | head -1)
row "full stack job ${job:-(none)} in $stack_precision: /metrics" "${stack_tps:-none} tok/s" "scale ${stack_scale:-none}" "$stack"
rm -rf "$state"

echo
cat "$out/bench.txt"
[[ "$stack" == yes ]] && awk -v t="$ours_bf16" 'BEGIN { exit !(t > 0) }'
