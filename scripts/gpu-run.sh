#!/usr/bin/env bash
# The GPU validation of a pack made by scripts/gpu-pack.sh, in two runs that
# each fit one call of a lent GPU machine (issue #14: at most 7 minutes each),
# on a machine that has PyTorch's CUDA libraries (nvidia-* wheels) but none of
# Debian's. Both runs first print what the machine loads, before any device
# time is spent: the driver's version, the CUDA runtime, cuBLAS(Lt), cuDNN and
# NCCL our binaries load (gpu-versions, with the floors the engine needs), and
# PyTorch's torch.version.cuda, torch.backends.cudnn.version() and NCCL; then
# nvidia-smi and the ldd check, then:
#
#   correctness  in this order: the op tests (engine/core, engine/kernels,
#                engine/cuda, engine/gpu and the CUDA optimizer), the trainer
#                step tests (CUDA graphs, the device loss scaler), the
#                Fashion-MNIST CNN to 0.92, the first 20 GPT losses against the
#                CPU; then, while time is left, the NCCL tests, the multi-GPU
#                test and the GPU micro-benchmarks. A crash (a test killed by a
#                signal) stops the run: what follows is listed as not run.
#   bench        bench/gpu_vs_pytorch.sh: the bf16 matmul rate, GPT-2 124M ours
#                bf16 / ours fp16 / PyTorch compile bf16, the plan's peak memory
#                against the allocator's, the CNN's time to 0.92 ours and
#                PyTorch's, and a coordinator + worker + CLI job whose /metrics
#                shows tokens/s and the loss scale.
#
# Every result is written to RESULTSDIR as soon as it is known, so a run cut off
# still leaves what it did; RESULTSDIR holds at most these files (a lent
# machine returns 8):
#   run.log       everything printed;
#   items.txt     one line per item as it ends (PASS, SKIP, FAIL, CRASH, NOT RUN)
#                 with its test cases' counts, then "P passed, F failed, S skipped,
#                 N not run": P, F and S count test CASES (a gtest binary's from
#                 its XML, or from its summary lines; a shell test or a bench is
#                 one case, skipped when its last line is "SKIP: why"; a binary
#                 that failed outside its cases, a crash or a time-out, adds one
#                 failure), N counts the items not run;
#   summary.txt   that last line alone;
#   logs.tgz      each item's log (and gtest XML), repacked after every item;
#   bench.txt, bench-logs.tgz   the benchmark's table and logs (bench).
# Items get at most what is left of --budget (seconds from the start, default
# 380: two runs and a machine start fit 15 minutes): one that would start
# with under 10 s left is not run.
# Exit status: 0 when nothing failed or crashed (and, for bench, the benchmark
# succeeded); 2 at once where nvidia-smi finds no GPU, or on bad arguments.
# Usage: gpu-run.sh PACKDIR RESULTSDIR [correctness|bench] [--budget SECONDS]
set -uo pipefail

usage="usage: gpu-run.sh PACKDIR RESULTSDIR [correctness|bench] [--budget SECONDS]"
packdir=${1:?$usage}
results=${2:?$usage}
shift 2
what=correctness budget=380
while [[ $# -gt 0 ]]; do
  case "$1" in
    correctness|bench) what=$1; shift ;;
    --budget) budget=${2:?$usage}; shift 2 ;;
    *) echo "gpu-run: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu-run: --budget must be a number of seconds, got '$budget'" >&2; exit 2; }
packdir=$(cd "$packdir" && pwd) || exit 2
mkdir -p "$results" && results=$(cd "$results" && pwd)
rm -f "$results"/{run.log,items.txt,summary.txt,logs.tgz}
exec > >(tee "$results/run.log") 2>&1
echo "gpu-run: $what, budget ${budget}s, pack $packdir ($(head -1 "$packdir/MANIFEST" 2>/dev/null))"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >"$results/nvidia-smi.txt" 2>&1; then
  echo "gpu-run: no NVIDIA GPU here (nvidia-smi missing or failing): nothing run"
  rm -f "$results/nvidia-smi.txt"
  exit 2
fi
smi=$(cat "$results/nvidia-smi.txt") && rm -f "$results/nvidia-smi.txt"  # printed after the versions

# The pack's payload (binaries, libraries, scripts, specs, the KJV text) is
# unpacked into a temporary folder; Fashion-MNIST stays in PACKDIR/data. Item
# logs collect in another, packed into logs.tgz after each item.
work=$(mktemp -d /tmp/rm-gpu-run-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs"
pack=$packdir
if [[ -f "$packdir/payload.tar.xz" ]]; then
  pack=$work/pack
  mkdir -p "$pack"
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

# ---- first: the versions this machine loads -----------------------------------
echo "---- versions: what our binaries and PyTorch load"
if [[ -x "$pack/bin/gpu-versions" ]]; then
  if ! timeout -k 5 60 "$pack/bin/gpu-versions"; then
    echo "gpu-run: the CUDA driver or libraries above are missing or older than the engine needs"
    ldd "$pack/bin/gpu-versions" 2>&1 | grep "not found"
  fi
else
  echo "gpu-versions: not in this pack"
fi
timeout -k 5 120 "$python" - <<'PY' 2>&1
try:
    import torch
except Exception as e:  # no PyTorch: the bench's PyTorch columns stay empty
    print("PyTorch: not importable (%s: %s)" % (type(e).__name__, e))
    raise SystemExit(0)


def ask(f):
    try:
        v = f()
        return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as e:
        return "unknown (%s: %s)" % (type(e).__name__, e)


print("PyTorch: %s, torch.version.cuda %s, torch.backends.cudnn.version() %s, torch.cuda.nccl.version() %s" % (
    torch.__version__, ask(lambda: torch.version.cuda), ask(torch.backends.cudnn.version),
    ask(torch.cuda.nccl.version)))
PY
echo "---- nvidia-smi"
echo "$smi"

passed=0 failed=0 skipped=0 not_run=0
record() { echo "$*" | tee -a "$results/items.txt"; }
# count_cases XML LOG RC: "P F S", an item's passed, failed and skipped test
# cases: a gtest binary's from its XML (each testcase: <failure>/<error>
# failed; <skipped>, result "skipped" or status "notrun" skipped; else
# passed), or without one from its summary lines ("[  PASSED  ] N tests." ...),
# or from its per-test lines (a crashed binary's); anything else (a shell test,
# a bench) is one case: failed on a non-zero exit, skipped when its last line is
# "SKIP: why", else passed. A non-zero exit without a failed case adds one.
count_cases() {
  "$python" - "$@" <<'PY' 2>/dev/null || { [[ $3 -eq 0 ]] && echo "1 0 0" || echo "0 1 0"; }
import re
import sys
import xml.etree.ElementTree as ET

xml_path, log_path, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
passed = failed = skipped = 0
found = False
try:
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        found = True
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
except (OSError, ET.ParseError):
    pass
try:
    lines = open(log_path, errors="replace").read().splitlines()
except OSError:
    lines = []
if not found:
    summary = {}
    for line in lines:
        m = re.match(r"^\[  (PASSED|SKIPPED|FAILED) *\] (\d+) tests?[.,]", line)
        if m:
            summary[m.group(1)] = int(m.group(2))
    if summary:
        found = True
        passed, failed, skipped = summary.get("PASSED", 0), summary.get("FAILED", 0), summary.get("SKIPPED", 0)
if not found:
    for line in lines:
        for tag, kind in (("       OK ", "p"), ("  SKIPPED ", "s"), ("  FAILED  ", "f")):
            if re.match(r"^\[%s\] \S+ \(\d+ ms\)" % tag, line):
                found = True
                passed, failed, skipped = passed + (kind == "p"), failed + (kind == "f"), skipped + (kind == "s")
if not found:
    last = [l for l in lines if l.strip()][-1:]
    if rc != 0:
        failed = 1
    elif last and last[0].startswith("SKIP:"):
        skipped = 1
    else:
        passed = 1
elif rc != 0 and failed == 0:
    failed = 1
print(passed, failed, skipped)
PY
}
finish() {
  local line="$passed passed, $failed failed, $skipped skipped, $not_run not run"
  echo "$line" >>"$results/items.txt"
  echo "$line" | tee "$results/summary.txt"
}

# Nothing a binary needs may be missing.
ldd_bad=0
for b in "$pack"/bin/*; do
  if ldd "$b" 2>/dev/null | grep -q "not found"; then
    echo "gpu-run: $(basename "$b"): $(ldd "$b" | grep "not found" | tr -s ' \t' ' ' | tr '\n' ';')"
    ldd_bad=1
  fi
done
if [[ $ldd_bad -ne 0 ]]; then
  failed=1
  record "FAIL ldd: shared libraries missing (see run.log)"
  finish
  exit 1
fi
echo "ldd: every library of every binary resolves"

if [[ "$what" == bench ]]; then
  start=$SECONDS
  "$pack/bench/gpu_vs_pytorch.sh" --bin "$pack/bin" --out "$results" --examples "$pack/examples" \
    --bench "$pack/bench" --fashion "$packdir/data/fashion-mnist" --python "$python" \
    --budget $((budget - SECONDS > 30 ? budget - SECONDS : 30))
  rc=$?
  if [[ $rc -eq 0 ]]; then
    passed=1; record "PASS gpu_vs_pytorch ($((SECONDS - start)) s): results/bench.txt"
  else
    failed=1; record "FAIL gpu_vs_pytorch ($((SECONDS - start)) s, exit $rc): results/bench.txt, bench-logs.tgz"
  fi
  finish
  [[ $rc -eq 0 ]]
  exit
fi

# ---- correctness: the items, in order --------------------------------------
# NAME KIND CAP COMMAND...: one line per item, in the order they run (fields
# separated by tabs; the command's words by the unit separator \x1f).
items=()
add_item() {  # NAME CAP COMMAND...
  local name=$1 cap=$2; shift 2
  local IFS=$'\x1f'
  items+=("$name"$'\t'"$cap"$'\t'"$*")
}
tests_of() {  # PATTERN...: the packed test binaries (PKG__NAME) matching each pattern in turn
  local kind name p
  for p in "$@"; do
    while read -r kind name; do
      # shellcheck disable=SC2053
      [[ "$kind" == "bin" && "$name" == *__* && "$name" == $p ]] && echo "$name"
    done <"$pack/MANIFEST"
  done
}
add_tests() {  # PATTERN...
  local t
  for t in $(tests_of "$@"); do
    [[ " ${added[*]} " == *" $t "* ]] && continue
    added+=("$t")
    add_item "$t" 150 "$pack/bin/$t" "--gtest_output=xml:$work/logs/$t.xml"
  done
}
added=()
# 1. The ops: status codes, kernels, the backend's ops, the fused optimizer.
add_tests 'engine_core__*' 'engine_kernels__*' 'engine_cuda__*' 'engine_gpu__*' 'engine_optim__*'
# 2. The trainer's step on the GPU: CUDA graphs, the device loss scaler.
add_tests 'engine_train__*'
# 3. Training: the CNN to 0.92, the first 20 GPT losses against the CPU.
add_item gpu_fashion_training 180 "$pack/tests/gpu_training_test.sh" "$pack/bin/ringmaster-trainer" \
  "$pack/examples" fashion "$packdir/data/fashion-mnist"
add_item gpu_gpt_training 150 "$pack/tests/gpu_training_test.sh" "$pack/bin/ringmaster-trainer" \
  "$pack/examples" gpt "$pack/data/kjv.txt"
# 4. While time is left: NCCL, the multi-GPU test (skips with one GPU), the rest.
add_tests 'engine_dist__*' '*'
add_item gpu_parallel 150 "$pack/tests/gpu_parallel_test.sh" "$pack/bin/ringmaster-trainer" \
  "$pack/bin/checkpoint-diff" "$pack/examples/fashion_mnist_mlp.yaml" "$packdir/data/fashion-mnist"
# 5. The GPU micro-benchmarks (figures in their logs).
while read -r kind label; do
  [[ "$kind" == "bench" ]] || continue
  name=$(basename "${label#*:}")
  add_item "bench_$name" 90 "$pack/bin/$name"
done <"$pack/MANIFEST"

stopped=""
for item in "${items[@]}"; do
  IFS=$'\t' read -r name cap command <<<"$item"
  IFS=$'\x1f' read -r -a argv <<<"$command"
  left=$((budget - SECONDS))
  if [[ -n "$stopped" ]]; then
    not_run=$((not_run + 1)); record "NOT RUN $name: $stopped"; continue
  fi
  if ((left < 10)); then
    not_run=$((not_run + 1)); record "NOT RUN $name: out of time (${budget}s budget)"; continue
  fi
  limit=$((cap < left ? cap : left))
  log=$work/logs/$name.log
  start=$SECONDS
  (cd "$pack" && timeout -k 5 "$limit" "${argv[@]}") >"$log" 2>&1
  rc=$?
  took=$((SECONDS - start))
  read -r p f s < <(count_cases "$work/logs/$name.xml" "$log" "$rc")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  cases="$p passed, $f failed, $s skipped"
  if [[ $rc -eq 124 ]] || [[ $rc -eq 137 && $took -ge $limit ]]; then
    record "FAIL $name ($took s): timed out after ${limit}s; $cases"; tail -5 "$log"
  elif [[ $rc -gt 128 ]]; then
    record "CRASH $name ($took s): killed by signal $((rc - 128)); $cases"; tail -5 "$log"
    stopped="stopped after the crash of $name"
  elif [[ $rc -ne 0 || $f -gt 0 ]]; then
    record "FAIL $name ($took s, exit $rc): $cases"; tail -5 "$log"
  elif [[ $p -eq 0 && $s -gt 0 ]]; then
    # Skipped cases are counted as skipped, never as passed.
    record "SKIP $name ($took s): $cases: $(grep -m1 -E '^SKIP:|^\[  SKIPPED \] |Skipped$' "$log")"
  else
    record "PASS $name ($took s): $cases"
  fi
  tar -C "$work" -czf "$results/logs.tgz.new" logs && mv "$results/logs.tgz.new" "$results/logs.tgz"
done
finish
[[ $failed -eq 0 ]]
