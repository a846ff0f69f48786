#!/usr/bin/env bash
# Every command line the user is shown, run as written: the commands in the
# comments of examples/*.yaml (mode "examples") and the ringmaster-trainer
# lines of README.md (mode "readme", heavy). A command line that appears in
# them and is neither run here nor listed below as run elsewhere fails the
# test, so that a new line in the docs gets a test.
#
# examples: a default `ringmaster local up` (its own --coordinator port and
#   state directory, default CPU slots), a second local cluster beside it
#   (another --coordinator, --metrics-listen=), then each example's lines:
#   `submit ... --follow` to SUCCEEDED, shortened by an appended
#   --set training.steps=4 (the line is otherwise the one in the file); a
#   submit without --wait is run as written, must not be refused, must be
#   placed on the default cluster (CPU lines) and is then cancelled.
# readme: README's `$T ...` lines with T=ringmaster-trainer; the line that is
#   itself shortened (--set training.steps=100) runs as written, the others
#   with --set training.steps=4 appended.
# Usage: doc_commands_test.sh examples|readme CLI COORDINATOR WORKER TRAINER README EXAMPLE...
set -uo pipefail
mode=$1 cli=$(realpath "$2") coordinator=$(realpath "$3") worker=$(realpath "$4") trainer=$(realpath "$5")
readme=$(realpath "$6")
shift 6
work=$(mktemp -d /tmp/rm-doc-XXXXXX)
mkdir -p "$work/examples" "$work/bin"
for e in "$@"; do ln -s "$(realpath "$e")" "$work/examples/$(basename "$e")"; done
ln -s "$coordinator" "$work/bin/ringmaster-coordinator"
ln -s "$worker" "$work/bin/ringmaster-worker"
ln -s "$trainer" "$work/bin/ringmaster-trainer"
export PATH="$work/bin:$PATH"  # the worker finds the trainer on PATH
clusters=()
cleanup() {
  for c in "${clusters[@]}"; do "$cli" --coordinator "${c%%|*}" local down --state-dir "${c#*|}" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/state*/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cd "$work"

# The command lines of a file: comment lines of the examples (`#   cmd`), or
# README's shell blocks; continuation lines joined.
example_lines() { sed -n 's/^#   \(ringmaster .*\)$/\1/p; s/^#       \(.*\)$/  \1/p' "$1" | sed -e ':a' -e '/\\$/N; s/\\\n *//; ta'; }
readme_trainer_lines() {
  awk '/^```sh/{b=1; next} /^```/{b=0} b' "$readme" | sed -e ':a' -e '/\\$/N; s/\\\n *//; ta' |
    sed 's/ *#.*$//' | grep '^\$T '
}

up() {  # up ADDR DIR [FLAG ...]: a local cluster, recorded for the cleanup
  local a=$1 d=$2
  shift 2
  clusters+=("$a|$d")
  "$cli" --coordinator "$a" local up --state-dir "$d" --bin-dir "$work/bin" "$@" >"$work/up.txt" 2>&1 ||
    { cat "$work/up.txt"; fail "local up at $a failed"; }
}

run_examples() {
  addr=127.0.0.1:$(free_port)
  up "$addr" "$work/state1"
  # A second local cluster beside it: another --coordinator, no /metrics.
  second=127.0.0.1:$(free_port)
  up "$second" "$work/state2" --metrics-listen= --cpu-slots 1
  "$cli" --coordinator "$second" local status --state-dir "$work/state2" >/dev/null ||
    fail "the second local cluster is not running"
  echo "PASS: two local clusters side by side ($addr, $second)"
  export RINGMASTER_COORDINATOR=$addr
  local ran=0
  for spec in "$@"; do
    local file="examples/$(basename "$spec")"
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      local -a argv
      read -r -a argv <<<"${line#ringmaster }"
      if [[ " ${argv[*]} " == *" --follow "* ]]; then
        out=$(timeout 300 "$cli" "${argv[@]}" --set training.steps=4 2>&1) ||
          fail "'$line' (with --set training.steps=4) did not succeed: $out"
        grep -q "SUCCEEDED" <<<"$out" || fail "'$line': no SUCCEEDED in: $out"
      else
        out=$(timeout 60 "$cli" "${argv[@]}" 2>&1) || fail "'$line' was refused: $out"
        job=$(grep -oE '\bj-[0-9]+' <<<"$out" | head -1)
        [ -n "$job" ] || fail "'$line': no job id in: $out"
        if [[ "$line" != *"device=cuda"* ]]; then
          grep -q unschedulable <<<"$out" && fail "'$line' cannot run on the default local cluster: $out"
          for _ in $(seq 150); do
            state=$("$cli" -o json describe "$job" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])' 2>/dev/null)
            [[ "$state" == *QUEUED* || -z "$state" ]] || break
            sleep 0.2
          done
          [[ "$state" != *QUEUED* ]] || fail "'$line' stayed QUEUED on the default local cluster"
        fi
        "$cli" cancel "$job" >/dev/null 2>&1
        for _ in $(seq 150); do
          "$cli" jobs 2>/dev/null | grep -qE "RUNNING|STARTING|PLACED|RESTARTING" || break
          sleep 0.2
        done
      fi
      echo "PASS: $line"
      ran=$((ran + 1))
    done < <(example_lines "$file")
  done
  [ $ran -ge 6 ] || fail "only $ran command lines found in the examples' comments"
}

run_readme() {
  local ran=0
  while IFS= read -r line; do
    local -a argv
    read -r -a argv <<<"${line#\$T }"
    local -a extra=()
    [[ "$line" == *"training.steps="* ]] || extra=(--set training.steps=4)
    rm -rf ckpt
    out=$(timeout 600 "$trainer" "${argv[@]}" "${extra[@]}" 2>&1) || fail "'$line' ${extra[*]} failed: $(tail -5 <<<"$out")"
    grep -qE "^test_(accuracy|loss)=" <<<"$out" || fail "'$line': no final evaluation in: $(tail -5 <<<"$out")"
    echo "PASS: $line ${extra[*]}"
    ran=$((ran + 1))
  done < <(readme_trainer_lines)
  [ $ran -ge 4 ] || fail "only $ran trainer lines found in README.md"
  # Every other command line in README's shell blocks is run elsewhere:
  #   scripts/run-main.sh, scripts/test.sh, scripts/install-deps.sh, bazel ...:
  #     the README's two commands (CI runs scripts/test.sh; bazel cannot run
  #     inside a bazel test); gpu-pack/..., scripts/gpu-pack.sh: on a GPU
  #     machine (//scripts:gpu_run_test runs gpu-run.sh over a made-up pack);
  #   the program job's submit: //tests:program_job_kill_test runs it as written.
  others=$(awk '/^```sh/{b=1; next} /^```/{b=0} b' "$readme" | sed -e ':a' -e '/\\$/N; s/\\\n *//; ta' |
    sed 's/ *#.*$//' | grep -vE '^\s*$|^\$T |^T=|^(scripts/(run-main|test|install-deps|gpu-pack)\.sh|bazel |gpu-pack/gpu-run\.sh )' |
    grep -vxF 'bazel-bin/client/ringmaster submit examples/pytorch_ddp/job.yaml --follow')
  [ -z "$others" ] || fail "README command lines no test runs: $others"
}

case "$mode" in
  examples) run_examples "$@" ;;
  readme) run_readme ;;
  *) echo "usage: $0 examples|readme ..."; exit 2 ;;
esac
echo "PASS: every command line ($mode)"
