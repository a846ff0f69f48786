#!/bin/bash
# The ringmaster binary's wiring: flags (before or after the command), the
# environment, exit codes, the one-line errors, every command's help and the
# shell completion scripts. Nothing listens on port 1.
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
expect 1 "$unreachable" -- --coordinator 127.0.0.1:1 -o yaml logs j-42 --since 1h --timestamps --generation 2
expect 1 "$unreachable" -- --coordinator 127.0.0.1:1 jobs -l team=nlp -l tier=prod,env=dev -o wide
# cancel tries every job: one line each.
expect 1 "$unreachable"$'\n'"$unreachable" -- --coordinator 127.0.0.1:1 cancel j-1 j-2

printf 'model:\n  mlp: {}\ndata:\n  dataset: synthetic\nresources:\n  nodes: 0\n' > "$TEST_TMPDIR/bad.yaml"
expect 2 "ringmaster: $TEST_TMPDIR/bad.yaml: resources.nodes: must be >= 1, got 0" -- submit "$TEST_TMPDIR/bad.yaml"
expect 2 "ringmaster: cannot open $TEST_TMPDIR/none.yaml: No such file or directory" -- submit "$TEST_TMPDIR/none.yaml"
expect 2 'ringmaster: file is required (see --help)' -- submit
# submit -: the spec on standard input, named "stdin" in errors.
expect 2 "ringmaster: stdin: resources.nodes: must be >= 1, got 0" -- submit - < "$TEST_TMPDIR/bad.yaml"
expect 2 'ringmaster: --wait excludes --follow (see --help)' -- submit x.yaml --wait --follow
expect 2 'ringmaster: The following argument was not expected: frobnicate (see --help)' -- frobnicate
expect 2 'ringmaster: --output: xml not in {table,wide,json,yaml,csv} (see --help)' -- --output xml jobs
expect 2 'ringmaster: a command is required: submit, jobs, describe, attach, logs, cancel, nodes, queues, usage, checkpoints, plan, validate, local or completion (see --help)' --
expect 2 'ringmaster: --rank: Value -1 not in range 0 to 2147483647 (see --help)' -- logs j-1 --rank -1
expect 2 'ringmaster: --since: a positive duration such as 90s, 10m or 1h is expected, got "yesterday" (see --help)' -- \
  logs j-1 --since yesterday
expect 2 'ringmaster: --generation: Value 0 not in range 1 to 2147483647 (see --help)' -- logs j-1 --generation 0
expect 2 'ringmaster: -l: expected key=value, got "team"' -- --coordinator 127.0.0.1:1 jobs -l team
expect 2 'ringmaster: -l: bad label key "a b" in "a b=c" (1 to 63 characters of [A-Za-z0-9._/-])' -- \
  --coordinator 127.0.0.1:1 jobs -l 'team=nlp,a b=c'
expect 2 'ringmaster: job is required (see --help)' -- attach
expect 2 'ringmaster: job is required (see --help)' -- cancel
expect 2 'ringmaster: shell: fish not in {bash,zsh} (see --help)' -- completion fish
expect 0 '' -- --help
expect 1 'ringmaster: the local cluster is not running; start it with `ringmaster local up`' -- \
  local status --state-dir "$TEST_TMPDIR/local"
expect 2 'ringmaster: local: --coordinator must be an address on this machine (127.0.0.1:PORT), got "example.com:1"' -- \
  --coordinator example.com:1 local up --state-dir "$TEST_TMPDIR/local"

# plan / validate / submit --strict: computed here; validate then asks the
# cluster, and says when there is none.
EXAMPLES="$TEST_SRCDIR/$TEST_WORKSPACE/examples"
big=(--set model.gpt.layers=96 --set model.gpt.width=12288 --set model.gpt.heads=96 --set resources.device=cuda
     --set precision.compute=bf16 --gpu a100)
expect 0 '' -- plan "$EXAMPLES/gpt_text.yaml"
expect 1 'ringmaster: not checked against a cluster: cannot reach the coordinator at 127.0.0.1:1 (connection refused); start one with `ringmaster local up`' -- \
  --coordinator 127.0.0.1:1 validate "$EXAMPLES/gpt_text.yaml" "${big[@]}"
expect 1 'ringmaster: not checked against a cluster: --coordinator http://127.0.0.1:1: a gRPC address is host:port, not a URL (--coordinator 127.0.0.1:1)' -- \
  --coordinator http://127.0.0.1:1 validate "$EXAMPLES/gpt_text.yaml" "${big[@]}"
expect 2 'ringmaster: --coordinator 127.0.0.1: expected host:port, e.g. 127.0.0.1:50051 (no port given)' -- \
  --coordinator 127.0.0.1 jobs
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
out="$("$RINGMASTER" --coordinator 127.0.0.1:1 validate "$EXAMPLES/fashion_mnist_cnn.yaml" 2>/dev/null)"
if [[ "$out" != *"fashion_mnist_cnn.yaml: valid"*"verdict"*"fits:"* ]]; then
  echo "FAIL: validate: $out"
  failures=$((failures + 1))
fi

# Every command's help ends with an example.
for command in submit jobs describe attach logs cancel nodes "nodes cordon" "nodes uncordon" "nodes drain" \
  checkpoints plan validate local "local up" "local down" "local status" completion; do
  # shellcheck disable=SC2086  # the command's words
  out="$("$RINGMASTER" $command --help)"
  if [[ "$out" != *"Example: ringmaster "* && "$out" != *"Example: source <(ringmaster "* ]]; then
    echo "FAIL: ringmaster $command --help has no example"
    failures=$((failures + 1))
  fi
done

# Completion: the bash script parses, and completes what is typed.
"$RINGMASTER" completion bash > "$TEST_TMPDIR/ringmaster.bash"
if ! bash -n "$TEST_TMPDIR/ringmaster.bash"; then
  echo "FAIL: ringmaster completion bash: not valid bash"
  failures=$((failures + 1))
fi
# expect_completion WANT WORDS...: completing the last of WORDS offers WANT.
expect_completion() {
  local want="$1"
  shift
  local got
  got="$(bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ringmaster; echo "${COMPREPLY[*]}"' \
    _ "$TEST_TMPDIR/ringmaster.bash" "$@" 2>&1)"
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: completing $*: got \"$got\", want \"$want\""
    failures=$((failures + 1))
  fi
}
expect_completion jobs ringmaster jo
expect_completion "attach" ringmaster at
expect_completion drain ringmaster nodes dr
expect_completion "table wide json yaml csv" ringmaster jobs -o ""
expect_completion "--timestamps" ringmaster logs j-1 --ti
expect_completion "--selector" ringmaster jobs --sel
expect_completion "bash zsh" ringmaster completion ""
expect_completion jobs ringmaster --coordinator 127.0.0.1:1 jo  # a flag's value is not a command
expect_completion "$TEST_TMPDIR/ringmaster.bash" ringmaster submit "$TEST_TMPDIR/ringmaster.b"
# zsh: the same functions through bashcompinit (zsh itself filters by what is typed).
"$RINGMASTER" completion zsh > "$TEST_TMPDIR/_ringmaster"
if [[ "$(head -n 1 "$TEST_TMPDIR/_ringmaster")" != "#compdef ringmaster" ]]; then
  echo "FAIL: ringmaster completion zsh: no #compdef line"
  failures=$((failures + 1))
fi
if command -v zsh > /dev/null; then
  got="$(cd "$TEST_TMPDIR" && zsh -f -c 'autoload -U +X compinit && compinit -u -d "$1.zcompdump"; source "$1"
    COMP_WORDS=(ringmaster nodes dr); COMP_CWORD=2; _ringmaster_bash; print -r -- "${COMPREPLY[*]}"' \
    _ "$TEST_TMPDIR/_ringmaster" 2>&1)"
  if [[ "$got" != "cordon uncordon drain" ]]; then
    echo "FAIL: zsh completion of ringmaster nodes dr: got \"$got\""
    failures=$((failures + 1))
  fi
else
  echo "note: zsh not installed (scripts/install-deps.sh test installs it): its completion was not run"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
