# Shared by the cluster tests (sourced, not run): a coordinator and workers as
# real processes on loopback, the CLI against them, polling with a bound, and
# a cleanup that stops and reaps everything started here.
#
#   source cluster_lib.sh
#   cluster_init CLI COORDINATOR WORKER TRAINER   # state dir, address, trap
#   start_local_cluster CLI COORDINATOR WORKER TRAINER SPEC SLOTS...
#   start_coordinator [FLAG ...]                  # sets coordinator_pid
#   start_worker NAME SLOTS [FLAG ...]            # node NAME, SLOTS CPU slots
#   wait_nodes_ready N
#   rm_cli COMMAND ...                            # the CLI at $addr
#   wait_until SECONDS DESCRIPTION COMMAND ...    # polls every 0.2 s
#   job_state JOB / job_in_state JOB STATE / job_field JOB PYTHON-EXPR
#   event_time JOB KIND / event_reason JOB KIND / event_before J1 K1 J2 K2
#   trainer_pids [JOB] / job_id_of SUBMIT-OUTPUT
#   fail MESSAGE                                  # prints the logs, exits 1
#
# Every daemon writes its log to $state/<name>.log; `fail` shows their tails.

cluster_init() {
  cli=$(realpath "$1") coordinator=$(realpath "$2") worker=$(realpath "$3") trainer=$(realpath "$4")
  # Short paths: the workers' agent sockets live in their state directories.
  state=$(mktemp -d /tmp/rm-XXXXXX)
  pids=()
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  addr="127.0.0.1:$port"
  trap cluster_cleanup EXIT
}

# Trainers started by this cluster's workers: their --rank-context lies under $state
# (and under the job's directory when JOB is given).
trainer_pids() {
  pgrep -f -- "--rank-context $state/.*${1:+/$1/}" 2>/dev/null | grep -vx "$$"
}

cluster_cleanup() {
  local p alive
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  # A trainer whose worker was killed (it should have died with it).
  for p in $(trainer_pids); do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$state"
}

fail() {
  echo "FAIL: $*"
  for f in "$state"/*.log; do echo "--- $f"; tail -20 "$f"; done
  exit 1
}

# --quarantine-jobs 0: these tests fail ranks of many jobs on purpose;
# quarantine has its own tests (coordinator/core:job_controller_health_test).
start_coordinator() {
  "$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "" \
    --heartbeat-interval 500ms --quarantine-jobs 0 "$@" >>"$state/coordinator.log" 2>&1 &
  coordinator_pid=$!
  pids+=("$coordinator_pid")
}

start_worker() {
  local name=$1 slots=$2
  shift 2
  "$worker" --coordinator "$addr" --cpu-slots "$slots" --state-dir "$state/$name" --trainer "$trainer" \
    --listen-address 127.0.0.1 --node-name "$name" --metrics-listen "" "$@" >>"$state/$name.log" 2>&1 &
  pids+=($!)
}

rm_cli() { "$cli" --coordinator "$addr" "$@"; }

# cluster_init, $spec, the coordinator and one worker per SLOTS argument (n1,
# n2, ... with that many CPU slots), all READY.
start_local_cluster() {
  cluster_init "$1" "$2" "$3" "$4"
  spec=$(realpath "$5")
  shift 5
  start_coordinator
  local n=0 slots
  for slots in "$@"; do
    n=$((n + 1))
    start_worker "n$n" "$slots"
  done
  wait_nodes_ready "$n"
}

# Runs COMMAND every 0.2 s until it succeeds, at most SECONDS; fails the test
# with DESCRIPTION otherwise.
wait_until() {
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  "$@" >/dev/null 2>&1 || fail "$what (waited ${seconds}s)"
}

nodes_ready() { [ "$(rm_cli nodes 2>/dev/null | grep -cw READY)" -ge "$1" ]; }
wait_nodes_ready() { wait_until 30 "$1 worker(s) did not register" nodes_ready "$1"; }

# A field of `describe JOB --output json` (the GetJobResponse), by a jq-like
# Python expression over `r`, e.g. r["job"]["state"].
job_field() {
  rm_cli describe "$1" --output json | python3 -c "import json, sys; r = json.load(sys.stdin); print($2)"
}
job_state() { job_field "$1" 'r["job"]["state"]'; }
job_in_state() { [ "$(job_state "$1" 2>/dev/null)" = "$2" ]; }

# final_weights_difference DIFF REFERENCE-DIR JOB STEPS: the largest relative
# difference between the parameters of JOB's committed checkpoint of step
# STEPS and the newest checkpoint in REFERENCE-DIR (DIFF: checkpoint-diff);
# prints nothing when JOB has no such checkpoint.
final_weights_difference() {
  local diff_tool=$1 ref=$2 job=$3 steps=$4 final
  final=$(rm_cli checkpoints "$job" -o json | python3 -c "import json, sys
c = [c for c in json.load(sys.stdin)['checkpoints'] if int(c['step']) == $steps and c.get('complete')]
print(c[0]['path'] if c else '')")
  [ -n "$final" ] || return 1
  "$diff_tool" "$ref" "$(dirname "$final")" --parameters-only | sed -n 's/^max_relative_difference=//p'
}

# The job id in the output of `submit`.
job_id_of() { grep -oE '\bj-[0-9]+' <<<"$1" | head -1; }

# JOB's first event of KIND (JOB_EVENT_KIND_<KIND>): its time (RFC 3339) or
# its reason.
event_time() { job_field "$1" "[e['time'] for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_$2'][0]"; }
event_reason() { job_field "$1" "[e['reason'] for e in r['events'] if e['kind'] == 'JOB_EVENT_KIND_$2'][0]"; }

# event_before JOB1 KIND1 JOB2 KIND2: JOB1's KIND1 event came before JOB2's.
event_before() {
  local t1 t2
  t1=$(event_time "$1" "$2") && t2=$(event_time "$3" "$4") || return 1
  # UTC with 0 to 9 fraction digits: compare with the fraction padded.
  python3 -c 'import sys
def key(t):
    sec, _, frac = t.rstrip("Z").partition(".")
    return sec, frac.ljust(9, "0")
sys.exit(0 if key(sys.argv[1]) < key(sys.argv[2]) else 1)' "$t1" "$t2"
}
