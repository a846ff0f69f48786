#!/bin/bash
# The ringmaster binary's wiring: flags (before or after the command), the
# environment, exit codes and the one-line errors. Nothing listens on port 1.
set -u
RINGMASTER="$TEST_SRCDIR/$TEST_WORKSPACE/client/ringmaster"
failures=0

# expect CODE STDERR_LINE -- ARGS...: runs ringmaster ARGS, checks both.
expect() {
  local want_code="$1" want_err="$2"
  shift 3
  local err code
  err="$("$RINGMASTER" "$@" 2>&1 >/dev/null)"
  code=$?
  if [[ "$code" != "$want_code" || "$err" != "$want_err" ]]; then
    echo "FAIL: ringmaster $*"
    echo "  exit $code, want $want_code"
    echo "  stderr: $err"
    echo "  want:   $want_err"
    failures=$((failures + 1))
  fi
}

unreachable='ringmaster: cannot reach the coordinator at 127.0.0.1:1 (connection refused); start one with `ringmaster local up`'
expect 1 "$unreachable" -- --coordinator 127.0.0.1:1 jobs
expect 1 "$unreachable" -- jobs --coordinator 127.0.0.1:1 --output json
expect 1 "$unreachable" -- nodes --coordinator=127.0.0.1:1
RINGMASTER_COORDINATOR=127.0.0.1:1 expect 1 "$unreachable" -- describe j-42
expect 1 "$unreachable" -- --coordinator 127.0.0.1:1 logs j-42 -f --rank 2

printf 'model:\n  mlp: {}\ndata:\n  dataset: synthetic\nresources:\n  nodes: 0\n' > "$TEST_TMPDIR/bad.yaml"
expect 2 "ringmaster: $TEST_TMPDIR/bad.yaml: resources.nodes: must be >= 1, got 0" -- submit "$TEST_TMPDIR/bad.yaml"
expect 2 "ringmaster: cannot open $TEST_TMPDIR/none.yaml: No such file or directory" -- submit "$TEST_TMPDIR/none.yaml"
expect 2 'ringmaster: file is required (see --help)' -- submit
expect 2 'ringmaster: --wait excludes --follow (see --help)' -- submit x.yaml --wait --follow
expect 2 'ringmaster: The following argument was not expected: frobnicate (see --help)' -- frobnicate
expect 2 'ringmaster: --output: yaml not in {table,json} (see --help)' -- --output yaml jobs
expect 2 'ringmaster: a command is required: submit, jobs, describe, logs, cancel, nodes, checkpoints, plan, validate or local (see --help)' --
expect 2 'ringmaster: --rank: Value -1 not in range 0 to 2147483647 (see --help)' -- logs j-1 --rank -1
expect 0 '' -- --help
expect 1 'ringmaster: the local cluster is not running; start it with `ringmaster local up`' -- \
  local status --state-dir "$TEST_TMPDIR/local"
expect 2 'ringmaster: local: --coordinator must be an address on this machine (127.0.0.1:PORT), got "example.com:1"' -- \
  --coordinator example.com:1 local up --state-dir "$TEST_TMPDIR/local"

# plan / validate / submit --strict: computed here, nothing is sent.
EXAMPLES="$TEST_SRCDIR/$TEST_WORKSPACE/examples"
big=(--set model.gpt.layers=96 --set model.gpt.width=12288 --set model.gpt.heads=96 --set resources.device=cuda
     --set precision.compute=bf16 --gpu a100)
expect 0 '' -- plan "$EXAMPLES/gpt_text.yaml"
expect 1 '' -- validate "$EXAMPLES/gpt_text.yaml" "${big[@]}"
expect 2 "ringmaster: $TEST_TMPDIR/bad.yaml: resources.nodes: must be >= 1, got 0" -- validate "$TEST_TMPDIR/bad.yaml"
expect 2 "ringmaster: --gpu: v100 not in {h100,h200,a100,cpu} (see --help)" -- plan "$EXAMPLES/gpt_text.yaml" --gpu v100
expect 2 "ringmaster: error: the plan says it does not fit on NVIDIA A100 SXM4 80 GB: $(
  "$RINGMASTER" plan "$EXAMPLES/gpt_text.yaml" "${big[@]}" -o json |
    python3 -c 'import json,sys; p=json.load(sys.stdin); print("%.2f GiB per rank needed, %.2f GiB usable" % (p["peak_bytes"]/2**30, p["usable_bytes"]/2**30))'
) (see \`ringmaster plan\`)" -- --coordinator 127.0.0.1:1 submit "$EXAMPLES/gpt_text.yaml" "${big[@]}" --strict
out="$("$RINGMASTER" plan "$EXAMPLES/fashion_mnist_cnn.yaml" -o json)"
if ! python3 -c 'import json,sys; p=json.loads(sys.argv[1]); assert p["fits"] and p["total_steps"] == 2811 and p["parameters"] > 0' "$out"; then
  echo "FAIL: plan -o json: $out"
  failures=$((failures + 1))
fi
out="$("$RINGMASTER" validate "$EXAMPLES/fashion_mnist_cnn.yaml")"
if [[ "$out" != *"fashion_mnist_cnn.yaml: valid"*"verdict"*"fits:"* ]]; then
  echo "FAIL: validate: $out"
  failures=$((failures + 1))
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
