#!/usr/bin/env bash
# scripts/gpu-run.sh's correctness run on this machine, over a made-up pack
# whose "test binaries" are small scripts and with a stand-in nvidia-smi and a
# stand-in PyTorch: the loaded versions printed before anything else (our
# gpu-versions and PyTorch's), the order the issue asks (op tests, the trainer
# step tests, the CNN and GPT training, then the rest), test cases counted one
# by one (from a binary's gtest XML or its summary lines: a binary with passing
# and skipping cases counts both, a shell test ending "SKIP: why" one skip), a
# failure counted and passed over, a crash stopping the run with the rest
# listed as not run, the time budget cutting a hung test off, results written
# per item (items.txt, logs.tgz) and at most the files a lent machine returns;
# the bench run printing the versions first too; and no GPU: exit 2 at once.
# (The benchmark itself is //bench:gpu_vs_pytorch_smoke_test.)
# Usage: gpu_run_test.sh GPU_RUN_SH
set -uo pipefail
run=$(realpath "$1")
tmp=$(mktemp -d /tmp/rm-gpu-run-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A fake GPU, and a fake PyTorch on PYTHONPATH reporting its CUDA, cuDNN and NCCL.
mkdir -p "$tmp/path" "$tmp/py/torch/backends" "$tmp/py/torch/cuda"
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3 (stand-in)"\n' >"$tmp/path/nvidia-smi"
chmod +x "$tmp/path/nvidia-smi"
printf '__version__ = "2.9.0+cu130"\nfrom . import version, backends, cuda\n' >"$tmp/py/torch/__init__.py"
printf 'cuda = "13.0"\n' >"$tmp/py/torch/version.py"
printf 'from . import cudnn\n' >"$tmp/py/torch/backends/__init__.py"
printf 'def version():\n    return 91300\n' >"$tmp/py/torch/backends/cudnn.py"
printf 'from . import nccl\n' >"$tmp/py/torch/cuda/__init__.py"
printf 'def version():\n    return (2, 27, 7)\n' >"$tmp/py/torch/cuda/nccl.py"
export PYTHONPATH="$tmp/py${PYTHONPATH:+:$PYTHONPATH}"

# make_pack DIR NAME=BEHAVIOUR...: each binary appends its name to $tmp/order.
#   pass   gtest summary: 3 passed          fail   1 passed, 1 failed (exit 1)
#   skip   0 passed, 2 skipped              mixed  2 passed, 1 skipped
#   xml    only a gtest XML (--gtest_output=xml:FILE): 2 passed, 1 failed, 1 skipped (exit 1)
#   crash  one test passed, then SIGSEGV    hang   one test passed, then sleeps
#   bench  figures, no test cases
# gpu-versions exits $VERSIONS_RC (0 unless set).
make_pack() {
  local pack=$1 item name behaviour
  shift
  mkdir -p "$pack/bin" "$pack/tests" "$pack/examples" "$pack/data/fashion-mnist"
  echo "# made-up pack" >"$pack/MANIFEST"
  for item in "$@"; do
    name=${item%%=*} behaviour=${item#*=}
    case "$behaviour" in
      pass) body='echo "[  PASSED  ] 3 tests."' ;;
      fail) body='printf "[  PASSED  ] 1 test.\n[  FAILED  ] 1 test, listed below:\n[  FAILED  ] A.B\n"; exit 1' ;;
      skip) body='printf "[  PASSED  ] 0 tests.\n[  SKIPPED ] 2 tests, listed below:\n[  SKIPPED ] A.B\n"' ;;
      mixed) body='printf "[       OK ] A.A (1 ms)\n[  SKIPPED ] A.B (0 ms)\n[  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] A.B\n"' ;;
      xml) body='xml=${1#--gtest_output=xml:}
cat >"$xml" <<X
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1" disabled="0" errors="0" name="AllTests">
  <testsuite name="A" tests="4" failures="1" disabled="0" skipped="1" errors="0">
    <testcase name="One" status="run" result="completed" classname="A" />
    <testcase name="Two" status="run" result="completed" classname="A" />
    <testcase name="Three" status="run" result="skipped" classname="A"><skipped message="no device"/></testcase>
    <testcase name="Four" status="run" result="completed" classname="A"><failure message="wrong">wrong</failure></testcase>
  </testsuite>
</testsuites>
X
exit 1' ;;
      crash) body='echo "[       OK ] A.A (3 ms)"; kill -SEGV $$' ;;
      hang) body='echo "[       OK ] A.A (3 ms)"; sleep 60' ;;
      bench) body='echo "matmul: 1.0 TFLOP/s"' ;;
    esac
    printf '#!/bin/bash\necho %s >>%s/order\n%s\n' "${name#bench:}" "$tmp" "$body" >"$pack/bin/$name"
    chmod +x "$pack/bin/$name"
    if [[ "$name" == bench:* ]]; then
      mv "$pack/bin/$name" "$pack/bin/${name#bench:}"
      echo "bench //engine/cuda:${name#bench:}" >>"$pack/MANIFEST"
    else
      echo "bin $name" >>"$pack/MANIFEST"
    fi
  done
  printf '#!/bin/bash\necho versions >>%s/order\necho "CUDA driver: supports CUDA 13.0 (13000), needs >= 13.0: ok"\nexit %s\n' \
    "$tmp" "${VERSIONS_RC:-0}" >"$pack/bin/gpu-versions"
  chmod +x "$pack/bin/gpu-versions"
  echo "bin gpu-versions" >>"$pack/MANIFEST"
  printf '#!/bin/bash\necho "training_$3" >>%s/order\necho "PASS: $3"\n' "$tmp" >"$pack/tests/gpu_training_test.sh"
  printf '#!/bin/bash\necho gpu_parallel >>%s/order\necho "SKIP: one GPU"\n' "$tmp" >"$pack/tests/gpu_parallel_test.sh"
  chmod +x "$pack/tests/"*.sh
}
line_of() { grep -n -m1 -F "$1" "$2" | cut -d: -f1; }

# 1. The versions first; everything runs, in the issue's order; each test case
#    counted; a failure does not stop the run.
make_pack "$tmp/a" engine_dist__nccl_comm_test=pass engine_train__trainer_graph_test=fail \
  engine_cuda__cuda_backend_test=pass engine_kernels__smoke_test=skip engine_optim__cuda_optimizer_test=mixed \
  engine_parallel__zero_nccl_test=xml ringmaster-trainer=pass bench:cuda_backend_bench=bench
rm -f "$tmp/order"
PATH="$tmp/path:$PATH" "$run" "$tmp/a" "$tmp/out-a" correctness >"$tmp/a.log" 2>&1
rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/a.log"; fail "a run with failures exited $rc, not 1"; }
expected="versions engine_kernels__smoke_test engine_cuda__cuda_backend_test engine_optim__cuda_optimizer_test
engine_train__trainer_graph_test training_fashion training_gpt engine_dist__nccl_comm_test
engine_parallel__zero_nccl_test gpu_parallel cuda_backend_bench"
[[ "$(tr '\n' ' ' <"$tmp/order")" == "$(echo $expected) " ]] ||
  fail "order: $(tr '\n' ' ' <"$tmp/order"), expected: $(echo $expected)"
echo "ok: versions, ops, trainer step, CNN, GPT, then the rest: $(tr '\n' ' ' <"$tmp/order")"
torch_line="PyTorch: 2.9.0+cu130, torch.version.cuda 13.0, torch.backends.cudnn.version() 91300, torch.cuda.nccl.version() 2.27.7"
log=$tmp/out-a/run.log
for l in "CUDA driver: supports CUDA 13.0" "$torch_line" "NVIDIA H100 80GB HBM3 (stand-in)" "ldd: every library" \
         "SKIP engine_kernels__smoke_test"; do
  [[ -n "$(line_of "$l" "$log")" ]] || { cat "$log"; fail "run.log lacks '$l'"; }
done
(($(line_of "CUDA driver: supports" "$log") < $(line_of "$torch_line" "$log") &&
  $(line_of "$torch_line" "$log") < $(line_of "NVIDIA H100 80GB HBM3" "$log") &&
  $(line_of "NVIDIA H100 80GB HBM3" "$log") < $(line_of "SKIP engine_kernels__smoke_test" "$log"))) ||
  { cat "$log"; fail "the versions are not printed first"; }
echo "ok: our libraries' and PyTorch's versions printed before nvidia-smi and the first item"
items=$tmp/out-a/items.txt
check_item() { grep -q -E "$1" "$items" || { cat "$items"; fail "no line '$1' in items.txt"; }; }
check_item "^FAIL engine_train__trainer_graph_test \(.*exit 1\): 1 passed, 1 failed, 0 skipped$"
check_item "^SKIP engine_kernels__smoke_test \(.*\): 0 passed, 0 failed, 2 skipped: "
check_item "^PASS engine_optim__cuda_optimizer_test \(.*\): 2 passed, 0 failed, 1 skipped$"
check_item "^FAIL engine_parallel__zero_nccl_test \(.*exit 1\): 2 passed, 1 failed, 1 skipped$"
check_item "^PASS engine_cuda__cuda_backend_test \(.*\): 3 passed, 0 failed, 0 skipped$"
check_item "^PASS gpu_fashion_training \(.*\): 1 passed, 0 failed, 0 skipped$"
check_item "^SKIP gpu_parallel \(.*\): 0 passed, 0 failed, 1 skipped: SKIP: one GPU$"
check_item "^PASS bench_cuda_backend_bench \(.*\): 1 passed, 0 failed, 0 skipped$"
echo "ok: test cases counted per binary (XML, summary lines, shell tests, benches)"
# 3+3 (pass) + 1 (fail) + 2 (mixed) + 2 (xml) + 1+1 (training) + 1 (bench) passed;
# 1 (fail) + 1 (xml) failed; 2 (skip) + 1 (mixed) + 1 (xml) + 1 (gpu_parallel) skipped.
[[ "$(cat "$tmp/out-a/summary.txt")" == "14 passed, 2 failed, 5 skipped, 0 not run" ]] ||
  fail "summary: $(cat "$tmp/out-a/summary.txt")"
[[ "$(tail -1 "$items")" == "$(cat "$tmp/out-a/summary.txt")" ]] || fail "items.txt does not end with the count"
tar -tzf "$tmp/out-a/logs.tgz" >"$tmp/logs-a.txt" || fail "logs.tgz cannot be read"
grep -q "logs/engine_train__trainer_graph_test.log" "$tmp/logs-a.txt" || fail "logs.tgz lacks an item's log"
grep -q "logs/engine_parallel__zero_nccl_test.xml" "$tmp/logs-a.txt" || fail "logs.tgz lacks a gtest XML"
files=$(find "$tmp/out-a" -type f | wc -l)
((files <= 8)) || fail "$files files in the results (a lent machine returns 8)"
echo "ok: $(cat "$tmp/out-a/summary.txt"); $files result files"

# 2. A crash stops the run; what follows is listed as not run. gpu-versions
#    reporting a missing library is said, and the run goes on.
VERSIONS_RC=1 make_pack "$tmp/b" engine_cuda__a_test=pass engine_cuda__b_test=crash engine_train__trainer_graph_test=pass
rm -f "$tmp/order"
PATH="$tmp/path:$PATH" "$run" "$tmp/b" "$tmp/out-b" >"$tmp/b.log" 2>&1 && fail "a run with a crash exited 0"
grep -q "libraries above are missing or older than the engine needs" "$tmp/b.log" ||
  { cat "$tmp/b.log"; fail "a failing gpu-versions is not reported"; }
grep -q "^CRASH engine_cuda__b_test .*signal 11; 1 passed, 1 failed, 0 skipped$" "$tmp/out-b/items.txt" ||
  { cat "$tmp/out-b/items.txt"; fail "no CRASH line with the case that passed before it"; }
grep -q "^NOT RUN engine_train__trainer_graph_test: stopped after the crash of engine_cuda__b_test" "$tmp/out-b/items.txt" ||
  { cat "$tmp/out-b/items.txt"; fail "the items after the crash are not listed as not run"; }
grep -q trainer_graph "$tmp/order" && fail "an item ran after the crash"
[[ "$(cat "$tmp/out-b/summary.txt")" == "4 passed, 1 failed, 0 skipped, 4 not run" ]] ||
  fail "summary after a crash: $(cat "$tmp/out-b/summary.txt")"
echo "ok: $(cat "$tmp/out-b/summary.txt") after a crash"

# 3. The budget: a hung test is cut off with the time left, the rest not run.
make_pack "$tmp/c" engine_cuda__hung_test=hang engine_train__trainer_graph_test=pass
start=$SECONDS
PATH="$tmp/path:$PATH" "$run" "$tmp/c" "$tmp/out-c" correctness --budget 14 >"$tmp/c.log" 2>&1 && fail "a run with a hung test exited 0"
took=$((SECONDS - start))
((took < 40)) || fail "the 14 s budget took $took s"
grep -q "^FAIL engine_cuda__hung_test .*timed out.*; 1 passed, 1 failed, 0 skipped$" "$tmp/out-c/items.txt" ||
  { cat "$tmp/out-c/items.txt"; fail "no time-out line"; }
grep -q "^NOT RUN .*out of time" "$tmp/out-c/items.txt" || { cat "$tmp/out-c/items.txt"; fail "nothing listed as out of time"; }
echo "ok: $(cat "$tmp/out-c/summary.txt") within a 14 s budget (${took} s)"

# 4. The bench run prints the versions first too, then runs the benchmark.
make_pack "$tmp/e" engine_cuda__a_test=pass
mkdir -p "$tmp/e/bench"
printf '#!/bin/bash\necho bench >>%s/order\necho "GPT-2 tokens/s"\n' "$tmp" >"$tmp/e/bench/gpu_vs_pytorch.sh"
chmod +x "$tmp/e/bench/gpu_vs_pytorch.sh"
rm -f "$tmp/order"
PATH="$tmp/path:$PATH" "$run" "$tmp/e" "$tmp/out-e" bench >"$tmp/e.log" 2>&1 || { cat "$tmp/e.log"; fail "the bench run failed"; }
[[ "$(tr '\n' ' ' <"$tmp/order")" == "versions bench " ]] || fail "bench run order: $(tr '\n' ' ' <"$tmp/order")"
(($(line_of "$torch_line" "$tmp/out-e/run.log") < $(line_of "PASS gpu_vs_pytorch" "$tmp/out-e/run.log"))) ||
  { cat "$tmp/out-e/run.log"; fail "the bench run does not print the versions first"; }
echo "ok: the bench run prints the versions first"

# 5. No GPU: nothing runs, exit 2.
mkdir -p "$tmp/nogpu"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed"; exit 9\n' >"$tmp/nogpu/nvidia-smi"
chmod +x "$tmp/nogpu/nvidia-smi"
rm -f "$tmp/order"
PATH="$tmp/nogpu:$PATH" "$run" "$tmp/a" "$tmp/out-d" >"$tmp/d.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "without a GPU: exit $rc, not 2"
grep -q "no NVIDIA GPU here" "$tmp/d.log" || fail "without a GPU: $(cat "$tmp/d.log")"
[[ ! -e "$tmp/order" ]] || fail "without a GPU something ran: $(cat "$tmp/order")"
"$run" "$tmp/a" "$tmp/out-f" everything >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "an unknown run name is not a usage error"
echo "ok: no GPU, exit 2; a bad argument, exit 2"
echo "PASS"
