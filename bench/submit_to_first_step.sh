#!/usr/bin/env bash
# Submit -> first training step on a local cluster (goal < 3 s).
#
# Starts a coordinator and one worker with 2 CPU slots on loopback
# (tests/cluster_lib.sh, as the cluster tests do), then REPEATS times: submits
# examples/fashion_mnist_mlp.yaml (2 data-parallel CPU ranks, Gloo over the
# coordinator's rendezvous, real Fashion-MNIST loading), waits for the first
# step, cancels the job and waits until it is CANCELLED and its slots are
# free again.
#
# The clock starts just before `ringmaster submit` is run. The first step is
# the job's progress (rank 0's StepMetrics, relayed trainer -> worker ->
# coordinator, read with `describe -o json` every 50 ms): its `time` is when
# the trainer measured step 1, on the trainer's own (wall) clock, so the
# polling delay does not count. The trainer forwards its latest step at most
# once a second and the first at once, so step 1 stays the job's progress for
# about a second; a run where polling saw a later step first is reported as
# such, not counted.
#
# Breakdown (all wall clocks of this machine): submit (CLI start -> the
# job's submit_time), schedule (-> PLACED), dispatch (-> STARTING: the start
# order sent), processes (-> RUNNING: every rank started and made its first
# rendezvous call), rendezvous (-> the last rank's "joined" log line: Gloo
# connected; the line's time is when the worker read it, so this part may
# include some of the next), data + step 1 (-> the step's time: dataset load,
# model build, the first step).
#
# Usage: bench/submit_to_first_step.sh [REPEATS] (binaries from bazel-bin, or
# CLI COORDINATOR WORKER TRAINER SPEC after REPEATS).
set -uo pipefail
repeats=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
cli=$(realpath "${2:-$root/bazel-bin/client/ringmaster}")
coordinator=$(realpath "${3:-$root/bazel-bin/coordinator/ringmaster-coordinator}")
worker=$(realpath "${4:-$root/bazel-bin/worker/ringmaster-worker}")
trainer=$(realpath "${5:-$root/bazel-bin/engine/ringmaster-trainer}")
spec=$(realpath "${6:-$root/examples/fashion_mnist_mlp.yaml}")

# The loopback cluster of the tests (tests/cluster_lib.sh): temporary state,
# a free port, everything stopped and reaped on exit.
source "$root/tests/cluster_lib.sh"
cluster_init "$cli" "$coordinator" "$worker" "$trainer"
start_coordinator
start_worker bench-node 2
wait_nodes_ready 1

echo "local cluster: coordinator $addr, 1 worker x 2 CPU slots; spec $(basename "$spec") (2 ranks); $(nproc) cores"
results="$state/results.txt"
: >"$results"
for i in $(seq "$repeats"); do
  t0=$(date +%s.%N)
  out=$(rm_cli submit "$spec" --set resources.cpus_per_rank=1 2>&1) || fail "submit: $out"
  job=$(echo "$out" | grep -oE '\bj-[A-Za-z0-9-]+' | head -1)
  [ -n "$job" ] || fail "no job id in: $out"
  seen=""
  for _ in $(seq 600); do  # 30 s
    rm_cli -o json describe "$job" >"$state/describe.json" 2>/dev/null &&
      seen=$(python3 - "$state/describe.json" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1])).get("job", {})
print(int(job.get("progress", {}).get("step", 0)) or "")
EOF
)
    [ -n "$seen" ] && break
    sleep 0.05
  done
  [ -n "$seen" ] || fail "job $job made no step within 30 s"
  cp "$state/describe.json" "$state/first.json"
  rm_cli cancel "$job" >/dev/null 2>&1 || fail "cancel $job"
  for _ in $(seq 300); do
    rm_cli describe "$job" 2>/dev/null | grep -qE 'CANCELLED|SUCCEEDED|FAILED' && break
    sleep 0.1
  done
  # The next run must not wait for this one's ranks: every slot free again.
  for _ in $(seq 300); do
    rm_cli -o json nodes 2>/dev/null | python3 -c '
import json, sys
nodes = [n for line in sys.stdin for n in json.loads(line).get("nodes", [])]
sys.exit(0 if nodes and all(n.get("freeCpuSlots", 0) == n.get("cpuSlots", 0) for n in nodes) else 1)' && break
    sleep 0.1
  done
  rm_cli -o json logs "$job" >"$state/logs.json" 2>/dev/null || fail "logs $job"
  python3 - "$t0" "$state/first.json" "$state/logs.json" "$i" <<'EOF' | tee -a "$results"
import json, sys
from datetime import datetime, timezone

def utc(text):  # RFC 3339, "Z", up to 9 fractional digits -> Unix seconds
    text = text.rstrip("Z")
    whole, _, frac = text.partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp() + (float("0." + frac) if frac else 0.0)

t0 = float(sys.argv[1])
response = json.load(open(sys.argv[2]))
job = response["job"]
events = {}
for e in response.get("events", []):
    events.setdefault(e["kind"].replace("JOB_EVENT_KIND_", ""), utc(e["time"]))
step = int(job["progress"]["step"])
first_step = utc(job["progress"]["time"])
joined = []
for line in open(sys.argv[3]):
    for l in json.loads(line).get("lines", []):
        if " joined through " in l.get("text", ""):
            joined.append(utc(l["time"]))
marks = [("submit", utc(job["submitTime"])), ("schedule", events.get("PLACED")),
         ("dispatch", events.get("STARTING")), ("processes", events.get("RUNNING")),
         # The worker stamps a log line when it reads it: at most the first step's time.
         ("rendezvous", min(max(joined), first_step) if joined else None), ("data+step1", first_step)]
parts, last = [], t0
for name, t in marks:
    if t is None:
        parts.append(f"{name} ?")
        continue
    parts.append(f"{name} {t - last:.3f}")
    last = t
status = "" if step == 1 else f" (first seen at step {step}: not counted)"
print(f"run {sys.argv[4]}: first_step {first_step - t0:.3f} s{status} | " + " | ".join(parts))
EOF
done

echo
python3 - "$results" <<'EOF'
import re, statistics, sys
runs = [l for l in open(sys.argv[1]) if l.startswith("run ") and "not counted" not in l]
if not runs:
    print("no counted run"); sys.exit(1)
first = sorted(float(re.search(r"first_step ([0-9.]+)", l).group(1)) for l in runs)
print(f"submit -> first step over {len(first)} runs: min {first[0]:.3f} s, median {statistics.median(first):.3f} s, "
      f"max {first[-1]:.3f} s; goal < 3 s: {'met' if statistics.median(first) < 3 else 'MISSED'} (median)")
names = ["submit", "schedule", "dispatch", "processes", "rendezvous", "data+step1"]
for name in names:
    values = [float(m.group(1)) for l in runs for m in [re.search(name.replace("+", r"\+") + r" ([0-9.]+)", l)] if m]
    if values:
        print(f"  {name:<11} median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})")
EOF
