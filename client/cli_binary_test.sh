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
expect 2 'ringmaster: a command is required: submit, jobs, describe, logs, cancel, nodes, checkpoints, plan or local (see --help)' --
expect 2 'ringmaster: --rank: Value -1 not in range 0 to 2147483647 (see --help)' -- logs j-1 --rank -1
expect 0 '' -- --help
expect 1 'ringmaster: the local cluster is not running; start it with `ringmaster local up`' -- \
  local status --state-dir "$TEST_TMPDIR/local"
expect 2 'ringmaster: local: --coordinator must be an address on this machine (127.0.0.1:PORT), got "example.com:1"' -- \
  --coordinator example.com:1 local up --state-dir "$TEST_TMPDIR/local"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
