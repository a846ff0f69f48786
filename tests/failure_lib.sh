# Helpers of failure_test.sh (sourced; run inside its private network
# namespace), on top of cluster_lib.sh (state dir, cleanup, rm_cli, fail,
# wait_until, trainer_pids).
#
# Network: bridge br0 10.231.0.1/24 (the coordinator listens there); node N is
# a network namespace held by a `sleep` process, linked to the bridge by a
# veth pair (hN on the bridge, eth0 = 10.231.0.1N inside). A partition takes
# hN off the bridge: packets in both directions are silently dropped, the
# node's own link stays up (as when a switch port dies).
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
declare -A worker_pids holder_pids

now() { date +%s.%N; }

# cluster_lib's (quarantine off: ranks fail on purpose), on the bridge's address, with 1 s heartbeats (a 3 s lease:
# a 1 s partition plus TCP's retransmission back-off stays inside it).
start_coordinator() {
  "$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "" "${coordinator_tls[@]}" \
    --heartbeat-interval 1s --stop-grace-period 3s --checkpoint-root "$state/checkpoints" \
    --quarantine-jobs 0 >>"$state/coordinator.log" 2>&1 &
  coordinator_pid=$!
  pids+=("$coordinator_pid")
}

# start_node_worker N: node N's worker, inside its namespace.
start_node_worker() {
  local n=$1
  nsenter -t "${holder_pids[$n]}" -n -- "$worker" --coordinator "$addr" --cpu-slots 1 \
    --state-dir "$state/w$n" --trainer "$trainer" --run-as self --listen-address "10.231.0.1$n" --node-name "node$n" \
    --metrics-listen "" "${worker_tls[@]}" --stop-grace-period 3 --state-dump-wait 1 \
    --reconnect-initial-backoff 0.2 --reconnect-max-backoff 1 >>"$state/worker$n.log" 2>&1 &
  worker_pids[$n]=$!
  pids+=($!)
}

# start_cluster CLI COORDINATOR WORKER TRAINER NODES
start_cluster() {
  cluster_init "$1" "$2" "$3" "$4"
  addr=10.231.0.1:7700
  local nodes=$5 n
  # Not loopback: the coordinator needs TLS, a token file and a join token
  # (docs/security.md); the CLI reads RINGMASTER_TLS_CA / RINGMASTER_TOKEN_FILE.
  "$(dirname "${BASH_SOURCE[0]}")/../scripts/dev-ca.sh" "$state/pki" 10.231.0.1 >/dev/null || fail "dev-ca.sh failed"
  (umask 077 && openssl rand -hex 24 >"$state/pki/token" && openssl rand -hex 24 >"$state/pki/join-token" &&
    echo "$(cat "$state/pki/token") tester admin" >"$state/pki/tokens") || fail "cannot write the test tokens"
  export RINGMASTER_TLS_CA=$state/pki/ca.crt RINGMASTER_TOKEN_FILE=$state/pki/token
  coordinator_tls=(--tls-ca "$state/pki/ca.crt" --tls-cert "$state/pki/coordinator.crt"
    --tls-key "$state/pki/coordinator.key" --token-file "$state/pki/tokens" --join-token-file "$state/pki/join-token")
  worker_tls=(--tls-ca "$state/pki/ca.crt" --tls-cert "$state/pki/worker.crt" --tls-key "$state/pki/worker.key"
    --join-token-file "$state/pki/join-token")
  # A fixed MAC: a bridge otherwise takes its lowest port's, so cutting and
  # healing a node's link could change it and leave the other nodes' ARP
  # entries for the coordinator pointing at the wrong port for seconds (a
  # node "lost" that was never cut).
  ip link set lo up && ip link add br0 address 02:52:4d:00:00:01 type bridge &&
    ip addr add 10.231.0.1/24 dev br0 && ip link set br0 up ||
    fail "cannot build the test network (ip link add br0 type bridge)"
  for n in $(seq "$nodes"); do
    unshare -n sleep 100000 &
    holder_pids[$n]=$!
    pids+=($!)
    for _ in $(seq 50); do [ "$(readlink /proc/$!/ns/net)" != "$(readlink /proc/$$/ns/net)" ] && break; sleep 0.05; done
    ip link add "h$n" type veth peer name eth0 netns "${holder_pids[$n]}" && ip link set "h$n" master br0 up &&
      nsenter -t "${holder_pids[$n]}" -n sh -c "ip link set lo up && ip addr add 10.231.0.1$n/24 dev eth0 && ip link set eth0 up" ||
      fail "cannot link node $n"
  done
  start_coordinator
  for n in $(seq "$nodes"); do start_node_worker "$n"; done
  wait_nodes_ready "$nodes"
}

no_trainers() { [ -z "$(trainer_pids)" ]; }

# Stops the daemons (SIGTERM, as a user would); their trainers must go with
# them. Returns non-zero if a trainer of this cluster is left.
stop_daemons() {
  local p
  for p in "$coordinator_pid" "${worker_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "$coordinator_pid" "${worker_pids[@]}"; do
    for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  no_trainers
}

# submit_job STEPS INTERVAL PROGRESS_TIMEOUT [--set ...]: prints the job id.
submit_job() {
  local out
  out=$(rm_cli submit "$spec" --set resources.nodes=2 --set resources.ranks_per_node=1 \
    --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.steps="$1" \
    --set training.log_interval_steps=1 --set checkpoint.interval_steps="$2" --set checkpoint.keep=100 \
    --set lr_schedule.warmup_steps=5 --set restart.max_restarts=3 \
    --set restart.progress_timeout_seconds="$3" "${@:4}" 2>&1) || fail "submit: $out"
  job_id_of "$out"
}

# The step rank 0 of the job's generation 1 last logged.
last_step() { grep -ohE 'step [0-9]+/' "$state"/w*/jobs/"$job"/gen-1/rank-0.log 2>/dev/null | tail -1 | tr -dc 0-9; }

wait_step() {
  for _ in $(seq 600); do
    [ "$(last_step)" -ge "$1" ] 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# rank_pid GEN RANK: the pid a worker started for it.
rank_pid() {
  grep -ohE "job $job generation $1: started rank $2 \(pid [0-9]+\)" "$state"/worker*.log | tail -1 |
    grep -oE 'pid [0-9]+' | tr -dc 0-9
}

partition() { ip link set "h$1" nomaster; }
heal() { ip link set "h$1" master br0; }

job_over() { job_state "$1" 2>/dev/null | grep -qE 'JOB_STATE_(SUCCEEDED|FAILED|CANCELLED)'; }

# analyze JOB SCENARIO INJECT_AT INTERVAL PROGRESS_TIMEOUT: the checks and the
# measurements, from the timeline (describe --output json), the workers' logs
# and the ranks' logs.
analyze() {
  rm_cli --output json describe "$1" >"$state/describe.json" 2>&1 || return 1
  cat "$state"/worker*.log >"$state/workers.txt"
  python3 - "$state" "$@" <<'EOF'
import collections, datetime, glob, json, re, sys
state, job, scenario, inject_at, interval, progress_timeout = sys.argv[1:7]
inject_at, interval, progress_timeout = float(inject_at), int(interval), int(progress_timeout)
d = json.load(open(f"{state}/describe.json"))
j, events = d["job"], d.get("events", [])
def t(e):
    s = e["time"]
    frac = re.search(r"\.(\d+)", s)
    base = datetime.datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return base.timestamp() + (float("0." + frac.group(1)) if frac else 0)
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
commits = [e for e in events if e["kind"] == "JOB_EVENT_KIND_CHECKPOINT_COMMITTED"]
for e in events:
    if e in commits: continue
    print(f'  {e["time"]} gen {e.get("generation", 0)} {e["kind"]} -> {e.get("toState", "")}: {e.get("reason", "")}')
committed = sorted({int(m) for e in commits for m in re.findall(r"checkpoint at step (\d+)", e.get("reason", ""))})
steps = int(j["spec"]["training"]["steps"])
check(j["state"] == "JOB_STATE_SUCCEEDED", f'job {job} SUCCEEDED (is {j["state"]}: {j.get("message", "")})')
starts = collections.Counter(re.findall(rf"job {job} generation (\d+): started rank (\d+)", open(f"{state}/workers.txt").read()))
check(starts and max(starts.values()) == 1, f"each (generation, rank) started once: {dict(starts)}")
restarts = int(j.get("restarts", 0))
failures = [e for e in events if e.get("toState") in ("JOB_STATE_RESTARTING",)]
recovered = [e for e in events if e["kind"] == "JOB_EVENT_KIND_RECOVERED"]
if scenario.startswith("coordinator_kill") or scenario == "partition_short":
    check(restarts == 0 and not failures, f"no restart (restarts {restarts}, generation {j.get('generation')})")
    check(int(j.get("generation", 0)) == 1, "one generation")
    check(committed == list(range(interval, steps + 1, interval)) and len(commits) == len(committed),
          f"every checkpoint committed once: {len(commits)} commits of steps {committed[:3]}...{committed[-1:]}")
    back = "-"
    if scenario.startswith("coordinator_kill"):
        check(len(recovered) == 1, f"exactly one RECOVERED event ({len(recovered)})")
        if recovered: back = f"{t(recovered[0]) - inject_at:.2f}"
    print(f"RESULT {scenario} detection_s=- restart_s=- steps_lost=0 restarts={restarts} recovered_after_s={back}")
    sys.exit(0 if ok else 1)
check(restarts == 1 and len(failures) == 1, f"exactly one restart (restarts {restarts}, failures {len(failures)})")
if not failures:
    sys.exit(1)
fail_event = failures[0]
detection = t(fail_event) - inject_at
running2 = [e for e in events if e["kind"] == "JOB_EVENT_KIND_RUNNING" and int(e.get("generation", 0)) == 2]
restart = (t(running2[0]) - t(fail_event)) if running2 else float("nan")
resumed = [e for e in events if e["kind"] == "JOB_EVENT_KIND_RESTARTING"]
m = re.search(r"resuming from step (\d+)", resumed[0].get("reason", "")) if resumed else None
resume_step = int(m.group(1)) if m else 0
reached = 0
for f in glob.glob(f"{state}/w*/jobs/{job}/gen-1/rank-0.log"):
    for s in re.findall(r"step (\d+)/", open(f, errors="replace").read()):
        reached = max(reached, int(s))
lost = reached - resume_step
# The newest checkpoint is written in the background while training goes on,
# and the next waits for it: the newest committed one is less than two
# intervals behind.
check(lost < 2 * interval,
      f"steps lost {lost} (reached {reached}, resumed from {resume_step}) < 2 x interval {interval}")
check(resume_step > 0 and resume_step in committed, f"resumed from a committed checkpoint (step {resume_step})")
check(committed and committed[-1] == steps, f"the last checkpoint is step {steps} ({committed[-1:]})")
if scenario == "elastic_shrink":
    p = j.get("placement", {})
    check(int(p.get("nodes", 0)) == 1 and int(p.get("dataParallelSize", 0)) == 1,
          f"generation 2 runs on 1 node, data-parallel size 1 (placement: {p.get('nodes')} nodes, data {p.get('dataParallelSize')})")
if scenario == "trainer_kill":
    check(detection <= 5, f"detected in {detection:.2f} s <= 5 s")
if scenario == "trainer_stop":
    check(detection <= progress_timeout + 5, f"detected in {detection:.2f} s <= progress timeout {progress_timeout} s + 5 s")
print(f"RESULT {scenario} detection_s={detection:.2f} restart_s={restart:.2f} steps_lost={lost} restarts={restarts}")
sys.exit(0 if ok else 1)
EOF
}
