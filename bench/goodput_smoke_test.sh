#!/usr/bin/env bash
# The goodput benchmark, small: the MLP example for 1500 steps with a trainer
# killed at 4 s and 8 s. It must end SUCCEEDED and print the goodput
# breakdown, the restart latency and the checkpoint interval, and the
# survivors must have carried on in their processes; the figures
# themselves are not checked (bench/RESULTS.md has the full runs).
# Usage: goodput_smoke_test.sh CLI COORDINATOR WORKER TRAINER
set -uo pipefail
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
ln -s "$(realpath "$1")" "$bin/ringmaster"
ln -s "$(realpath "$2")" "$bin/ringmaster-coordinator"
ln -s "$(realpath "$3")" "$bin/ringmaster-worker"
ln -s "$(realpath "$4")" "$bin/ringmaster-trainer"
out=$(timeout 240 bench/goodput_bench.sh --example mlp --steps 1500 --kill-every 4 --kill-for 8 --bin "$bin" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the benchmark exited $rc"; exit 1; }
for line in "JOB_STATE_SUCCEEDED" "^goodput [0-9.]+%: training" "^restart latency \(detection -> every rank stepping\)" \
            "^checkpoint interval in force: " "^restarted ranks: [1-9][0-9]* survivor"; do
  grep -qE "$line" <<<"$out" || { echo "FAIL: no line matching: $line"; exit 1; }
done
echo "PASS"
