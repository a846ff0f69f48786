#!/usr/bin/env bash
# Goodput under failures (issue #30): a job on a local cluster whose trainer
# is killed (SIGKILL) every KILL_EVERY seconds for the first KILL_FOR seconds.
#
# Starts a coordinator and one worker with 2 CPU slots on loopback
# (tests/cluster_lib.sh, as the cluster tests do), submits the example with
# its own checkpoint settings (2 data-parallel CPU ranks), and from the
# submission on kills one of its trainers every KILL_EVERY s (rank 1, then
# rank 0, alternating) while the job runs, for KILL_FOR s. Then it waits for
# the job to end and prints, from `ringmaster describe -o json`:
#   - the goodput breakdown (the coordinator's account, docs/operations.md);
#   - the restart latency of each failure: from its detection to every rank
#     stepping again (the STEPPING event); a coordinator without STEPPING
#     events (before issue #30) gives only detection -> RUNNING, shown as such;
#   - the checkpoint stall (per committed checkpoint: median and max);
#   - the checkpoint interval in force (and why), and the checkpoints taken;
#   - how the restarted ranks came back: survivors the next generation
#     adopted in their processes, ranks started as new processes;
#   - the wall time from submission to the end.
#
# Usage: bench/goodput_bench.sh [--example gpt|mlp] [--steps N]
#            [--kill-every S] [--first-kill S] [--kill-for S] [--bin DIR] [--spec FILE]
#            [--set K=V ...]
#   --first-kill  the first kill this many seconds after the submission
#              (default: --kill-every), then every --kill-every s, while
#              less than --kill-for s passed. Where a kill falls against the
#              checkpoints decides what it costs: run several to see it.
#   --example  gpt (examples/gpt_text.yaml, default 400 steps) or mlp
#              (examples/fashion_mnist_mlp.yaml, default 20000 steps)
#   --bin      a directory with ringmaster, ringmaster-coordinator,
#              ringmaster-worker and ringmaster-trainer (another build, e.g.
#              an older main's); default: this tree's bazel-bin
#   --spec     the job spec instead of the example's (e.g. an older main's
#              copy of it, with that main's checkpoint settings)
#   --set      passed to `ringmaster submit` (e.g. a checkpoint setting)
# --kill-every 0 runs the job undisturbed. bench/goodput_smoke_test.sh runs a
# small version in the suite.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
example=gpt steps="" kill_every=60 first_kill="" kill_for=240 bin="" spec_file="" sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --example) example=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kill-every) kill_every=$2; shift 2 ;;
    --kill-for) kill_for=$2; shift 2 ;;
    --first-kill) first_kill=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --spec) spec_file=$(realpath "$2"); shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "goodput_bench: unknown argument $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
case "$example" in
  gpt) spec="$root/examples/gpt_text.yaml"; steps=${steps:-400} ;;
  mlp) spec="$root/examples/fashion_mnist_mlp.yaml"; steps=${steps:-20000} ;;
  *) echo "goodput_bench: --example must be gpt or mlp, got $example" >&2; exit 2 ;;
esac
[ -z "$spec_file" ] || spec=$spec_file
if [ -n "$bin" ]; then
  binaries=("$bin/ringmaster" "$bin/ringmaster-coordinator" "$bin/ringmaster-worker" "$bin/ringmaster-trainer")
else
  binaries=("$root/bazel-bin/client/ringmaster" "$root/bazel-bin/coordinator/ringmaster-coordinator"
            "$root/bazel-bin/worker/ringmaster-worker" "$root/bazel-bin/engine/ringmaster-trainer")
fi
for b in "${binaries[@]}"; do [ -x "$b" ] || { echo "goodput_bench: no executable $b (build it first)" >&2; exit 2; }; done

source "$root/tests/cluster_lib.sh"
cluster_init "${binaries[@]}"
start_coordinator
start_worker bench-node 2
wait_nodes_ready 1

# The lr schedule of each example is scaled to its shorter run.
case "$example" in
  gpt) shape=(--set "training.steps=$steps" --set "lr_schedule.decay_steps=$((steps - steps / 6))"
              --set "lr_schedule.warmup_steps=$((steps / 6))") ;;
  mlp) shape=(--set "training.steps=$steps") ;;
esac
echo "goodput bench: $example, $steps steps, 2 CPU ranks, a trainer killed at ${first_kill:-$kill_every}s and every" \
  "${kill_every}s after while less than ${kill_for}s passed;" \
  "binaries $(dirname "${binaries[1]}")"
t0=$(date +%s.%N)
out=$(rm_cli submit "$spec" "${shape[@]}" "${sets[@]}" 2>&1) || fail "submit: $out"
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"

over() { job_state "$job" 2>/dev/null | grep -qE 'SUCCEEDED|FAILED|CANCELLED'; }
kills=0
first_kill=${first_kill:-$kill_every}
if [ "$kill_every" -gt 0 ]; then
  for k in $(seq 1 $(((kill_for - first_kill) / kill_every + 1))); do
    at=$(python3 -c "print($t0 + $first_kill + ($k - 1) * $kill_every)")
    while python3 -c "import sys,time; sys.exit(0 if time.time() < $at else 1)"; do
      over && break 2
      sleep 0.5
    done
    rank=$(( k % 2 ))  # rank 1 first
    pid=$(pgrep -f -- "--rank-context $state/.*/$job/.*rank-$rank[./]" | head -1)
    [ -n "$pid" ] || pid=$(trainer_pids "$job" | head -1)
    if [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; then
      kills=$((kills + 1))
      printf '  %6.1fs: killed rank %s (pid %s)\n' "$(python3 -c "import time; print(time.time() - $t0)")" "$rank" "$pid"
    fi
  done
fi
wait_until 1800 "job $job did not end within 30 min" over
t1=$(date +%s.%N)
rm_cli -o json describe "$job" >"$state/describe.json" 2>&1 || fail "describe $job"
# Survivors the next generation adopted (worker/process_supervisor.h) and
# ranks it started as new processes, from the worker's log.
adopted=$(grep -cE "job $job generation [0-9]+: rank [0-9]+ is the process" "$state/bench-node.log")
started=$(grep -cE "job $job generation ([2-9]|[1-9][0-9]+): started rank" "$state/bench-node.log")
echo "restarted ranks: $adopted survivor(s) carried on in their processes, $started started as new processes"
python3 - "$state/describe.json" "$t0" "$t1" "$kills" <<'EOF'
import datetime, json, statistics, sys
doc = json.load(open(sys.argv[1]))
job, events = doc["job"], doc.get("events", [])
t0, t1, kills = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

def ts(e):
    return datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()

g = job.get("goodput", {})
print(f"job {job['id']}: {job['state']}, {job.get('restarts', 0)} restarts, {kills} kills, "
      f"{t1 - t0:.1f}s from submission to the end")
keys = ["training", "checkpointStall", "recomputed", "restart", "starting", "queued"]
print("goodput {:.1%}: ".format(g.get("goodput", 0)) +
      ", ".join(f"{k} {g.get(k + 'Seconds', 0):.1f}s" for k in keys))
failures = {"JOB_EVENT_KIND_RANK_EXITED", "JOB_EVENT_KIND_NODE_LOST", "JOB_EVENT_KIND_PROGRESS_TIMEOUT"}
stepping = [e for e in events if e["kind"] == "JOB_EVENT_KIND_STEPPING"]
latencies, parts, kind = [], [], "detection -> every rank stepping"
for i, e in enumerate(events):
    if e["kind"] not in failures or e.get("toState") != "JOB_STATE_RESTARTING":
        continue
    after = events[i + 1:]
    def first(kind):
        hit = [x for x in after if x["kind"] == "JOB_EVENT_KIND_" + kind]
        return ts(hit[0]) - ts(e) if hit else None
    placed, running, stepped = first("RESTARTING"), first("RUNNING"), first("STEPPING")
    end = stepped if stepping else running
    if end is not None:
        latencies.append(end)
        parts.append((placed, running, stepped))
if not stepping:
    kind = "detection -> RUNNING (no STEPPING events: the ranks' loading is not included)"
if latencies:
    print(f"restart latency ({kind}): median {statistics.median(latencies):.2f}s, max {max(latencies):.2f}s, "
          f"all " + " ".join(f"{x:.2f}" for x in latencies))
    # Where it went: the survivors stopped and the new generation placed
    # (RESTARTING -> STARTING), its ranks started and joined (RUNNING), then
    # loaded data, model and checkpoint and stepped (STEPPING).
    fmt = lambda x: "-" if x is None else f"{x:.2f}"
    for placed, running, stepped in parts:
        print(f"  placed {fmt(placed)}s, all joined {fmt(running)}s, all stepping {fmt(stepped)}s after detection")
else:
    print("restart latency: no restart")
# The stored timeline keeps no stall per commit: the goodput account's total
# over the commits, and the newest (the auto interval's input).
commits = [e for e in events if e["kind"] == "JOB_EVENT_KIND_CHECKPOINT_COMMITTED"]
interval = job.get("checkpointInterval")
if commits:
    total = g.get("checkpointStallSeconds", 0)
    newest = f", newest {interval['stallSeconds'] * 1000:.2f}ms" if interval and interval.get("stallSeconds") else ""
    print(f"checkpoint stall: {total:.3f}s in all{newest}; {len(commits)} commits in the (bounded) timeline")
if interval:
    every = f"{interval['seconds']:.3g}s" if interval.get("seconds") else f"{interval.get('steps', 0)} steps"
    print(f"checkpoint interval in force: {every} ({interval.get('why', '')})")
else:
    print("checkpoint interval in force: " + str(job["spec"].get("checkpoint", {})) + " (the spec)")
sys.exit(0 if job["state"] == "JOB_STATE_SUCCEEDED" else 1)
EOF
