#!/usr/bin/env bash
# scripts/gpu-run.sh's correctness run on this machine, over a made-up pack
# whose "test binaries" are small scripts and with a stand-in nvidia-smi: the
# order the issue asks (op tests, the trainer step tests, the CNN and GPT
# training, then the rest), a failure counted and passed over, a test that
# skipped counted as skipped, a crash stopping the run with the rest listed as
# not run, the time budget cutting a hung test off, results written per item
# (items.txt, logs.tgz) and at most the files a lent machine returns; and no
# GPU: exit 2 at once. (The bench run is //bench:gpu_vs_pytorch_smoke_test.)
# Usage: gpu_run_test.sh GPU_RUN_SH
set -uo pipefail
run=$(realpath "$1")
tmp=$(mktemp -d /tmp/rm-gpu-run-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A fake GPU and a pack: each binary appends its name to $tmp/order.
mkdir -p "$tmp/path"
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3 (stand-in)"\n' >"$tmp/path/nvidia-smi"
chmod +x "$tmp/path/nvidia-smi"
make_pack() {  # DIR, then NAME=BEHAVIOUR...: pass, fail, skip, crash, hang
  local pack=$1 item name behaviour
  shift
  mkdir -p "$pack/bin" "$pack/tests" "$pack/examples" "$pack/data/fashion-mnist"
  echo "# made-up pack" >"$pack/MANIFEST"
  for item in "$@"; do
    name=${item%%=*} behaviour=${item#*=}
    case "$behaviour" in
      pass) body='echo "[  PASSED  ] 3 tests."' ;;
      fail) body='echo "[  FAILED  ] 1 test"; exit 1' ;;
      skip) body='echo "[  SKIPPED ] 2 tests, listed below:"' ;;
      crash) body='kill -SEGV $$' ;;
      hang) body='sleep 60' ;;
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
  printf '#!/bin/bash\necho "training_$3" >>%s/order\necho "PASS: $3"\n' "$tmp" >"$pack/tests/gpu_training_test.sh"
  printf '#!/bin/bash\necho gpu_parallel >>%s/order\necho "SKIP: one GPU"\n' "$tmp" >"$pack/tests/gpu_parallel_test.sh"
  chmod +x "$pack/tests/"*.sh
}

# 1. Everything runs, in the issue's order; a failure does not stop the run.
make_pack "$tmp/a" engine_dist__nccl_comm_test=pass engine_train__trainer_graph_test=fail \
  engine_cuda__cuda_backend_test=pass engine_kernels__smoke_test=skip engine_optim__cuda_optimizer_test=pass \
  engine_parallel__zero_nccl_test=pass ringmaster-trainer=pass bench:cuda_backend_bench=pass
rm -f "$tmp/order"
PATH="$tmp/path:$PATH" "$run" "$tmp/a" "$tmp/out-a" correctness >"$tmp/a.log" 2>&1
rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/a.log"; fail "a run with one failure exited $rc, not 1"; }
expected="engine_kernels__smoke_test engine_cuda__cuda_backend_test engine_optim__cuda_optimizer_test
engine_train__trainer_graph_test training_fashion training_gpt engine_dist__nccl_comm_test
engine_parallel__zero_nccl_test gpu_parallel cuda_backend_bench"
[[ "$(tr '\n' ' ' <"$tmp/order")" == "$(echo $expected) " ]] ||
  fail "order: $(tr '\n' ' ' <"$tmp/order"), expected: $(echo $expected)"
echo "ok: ops, trainer step, CNN, GPT, then the rest: $(tr '\n' ' ' <"$tmp/order")"
grep -q "^FAIL engine_train__trainer_graph_test .*exit 1" "$tmp/out-a/items.txt" || fail "the failure is not recorded"
grep -q "^SKIP engine_kernels__smoke_test" "$tmp/out-a/items.txt" || fail "the skipped test is not recorded as such"
[[ "$(cat "$tmp/out-a/summary.txt")" == "7 passed, 1 failed, 2 skipped, 0 not run" ]] ||
  fail "summary: $(cat "$tmp/out-a/summary.txt")"
[[ "$(tail -1 "$tmp/out-a/items.txt")" == "$(cat "$tmp/out-a/summary.txt")" ]] || fail "items.txt does not end with the count"
tar -tzf "$tmp/out-a/logs.tgz" | grep -q "logs/engine_train__trainer_graph_test.log" || fail "logs.tgz lacks an item's log"
files=$(find "$tmp/out-a" -type f | wc -l)
((files <= 8)) || fail "$files files in the results (a lent machine returns 8)"
echo "ok: $(cat "$tmp/out-a/summary.txt"); $files result files"

# 2. A crash stops the run; what follows is listed as not run.
make_pack "$tmp/b" engine_cuda__a_test=pass engine_cuda__b_test=crash engine_train__trainer_graph_test=pass
rm -f "$tmp/order"
PATH="$tmp/path:$PATH" "$run" "$tmp/b" "$tmp/out-b" >"$tmp/b.log" 2>&1 && fail "a run with a crash exited 0"
grep -q "^CRASH engine_cuda__b_test .*signal 11" "$tmp/out-b/items.txt" || { cat "$tmp/out-b/items.txt"; fail "no CRASH line"; }
grep -q "^NOT RUN engine_train__trainer_graph_test: stopped after the crash of engine_cuda__b_test" "$tmp/out-b/items.txt" ||
  { cat "$tmp/out-b/items.txt"; fail "the items after the crash are not listed as not run"; }
grep -q trainer_graph "$tmp/order" && fail "an item ran after the crash"
echo "ok: $(cat "$tmp/out-b/summary.txt") after a crash"

# 3. The budget: a hung test is cut off with the time left, the rest not run.
make_pack "$tmp/c" engine_cuda__hung_test=hang engine_train__trainer_graph_test=pass
start=$SECONDS
PATH="$tmp/path:$PATH" "$run" "$tmp/c" "$tmp/out-c" correctness --budget 14 >"$tmp/c.log" 2>&1 && fail "a run with a hung test exited 0"
took=$((SECONDS - start))
((took < 40)) || fail "the 14 s budget took $took s"
grep -q "^FAIL engine_cuda__hung_test .*timed out" "$tmp/out-c/items.txt" || { cat "$tmp/out-c/items.txt"; fail "no time-out line"; }
grep -q "^NOT RUN .*out of time" "$tmp/out-c/items.txt" || { cat "$tmp/out-c/items.txt"; fail "nothing listed as out of time"; }
echo "ok: $(cat "$tmp/out-c/summary.txt") within a 14 s budget (${took} s)"

# 4. No GPU: nothing runs, exit 2.
mkdir -p "$tmp/nogpu"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed"; exit 9\n' >"$tmp/nogpu/nvidia-smi"
chmod +x "$tmp/nogpu/nvidia-smi"
PATH="$tmp/nogpu:$PATH" "$run" "$tmp/a" "$tmp/out-d" >"$tmp/d.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "without a GPU: exit $rc, not 2"
grep -q "no NVIDIA GPU here" "$tmp/d.log" || fail "without a GPU: $(cat "$tmp/d.log")"
"$run" "$tmp/a" "$tmp/out-e" everything >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "an unknown run name is not a usage error"
echo "ok: no GPU, exit 2; a bad argument, exit 2"
echo "PASS"
