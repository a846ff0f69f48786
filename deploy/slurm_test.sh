#!/usr/bin/env bash
# deploy/slurm/ringmaster-worker.sbatch, first without Slurm, then on a real
# one-node Slurm cluster on this machine:
#   - bash -n; run with fake srun/ip and a fake worker on PATH: the worker
#     command line it builds (coordinator, state dir, trainer, TLS and token, --run-as
#     flags, labels with slurm_job, extra args, the interface's address), the
#     srun options (one task per node, no binding, RINGMASTER_SRUN_ARGS), and
#     clear errors without RINGMASTER_COORDINATOR, the binaries or an address
#     on the interface;
#   - munged, slurmctld and slurmd (Debian's slurm-wlm) from a configuration
#     in a temp dir (own key, socket, ports, spool and state; proctrack/linuxproc,
#     task/none), a ringmaster-coordinator on loopback; `sbatch` of the script:
#     the worker registers with the slurm_job label, started by slurmstepd;
#     a 1-rank CPU job succeeds on it;
#   - `scancel --signal=USR1` (what --signal=USR1@300 does before the time
#     limit) while a job runs there: the node is cordoned by "worker", the
#     rank gets the signal too (a state dump) and lives on, the job moves to a
#     second worker outside Slurm (NODE_DRAINED), the worker and the
#     allocation survive the signal; `scancel`: the worker exits and the
#     allocation ends.
# Everything started here is stopped and reaped at the end. Without the Slurm
# daemons it says why and skips, after the checks that need none.
# Usage: slurm_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
export PATH=$PATH:/usr/sbin:/sbin
source tests/cluster_lib.sh  # cluster_init (state dir, address, trap), fail, rm_cli, wait_until, job_*
script=$(realpath deploy/slurm/ringmaster-worker.sbatch)
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- Without Slurm -----------------------------------------------------------
bash -n "$script" || fail "bash -n $script"
grep -q '^#SBATCH --ntasks-per-node=1$' "$script" || fail "no '#SBATCH --ntasks-per-node=1'"
grep -q '^#SBATCH --signal=USR1@[0-9]*$' "$script" || fail "no '#SBATCH --signal=USR1@SECONDS'"

# Fakes: srun drops its options and runs the task here (as slurmstepd would);
# ip reports 10.1.2.3 on ib0; the worker prints its arguments one per line.
fake=$state/fake
mkdir -p "$fake/bin" "$fake/rm"
cat >"$fake/bin/srun" <<EOF
#!/bin/bash
printf '%s\n' "\$@" >"$fake/srun.args"
while [[ "\$1" == --* ]]; do shift; done
exec "\$@"
EOF
cat >"$fake/bin/ip" <<'EOF'
#!/bin/bash
[ "$*" = "-4 -o addr show dev ib0" ] && echo "3: ib0    inet 10.1.2.3/16 brd 10.1.255.255 scope global ib0\       valid_lft forever"
EOF
printf '#!/bin/bash\nprintf "%%s\\n" "$0" "$@"\n' >"$fake/rm/ringmaster-worker"
cp "$fake/rm/ringmaster-worker" "$fake/rm/ringmaster-trainer"
chmod +x "$fake/bin/"* "$fake/rm/"*
cat >"$fake/worker.env" <<'EOF'
RINGMASTER_TLS_CA=/etc/rm/ca.crt
RINGMASTER_TLS_CERT=/etc/rm/worker.crt
RINGMASTER_TLS_KEY=/etc/rm/worker.key
RINGMASTER_JOIN_TOKEN_FILE=/etc/rm/join-token
RINGMASTER_RUN_AS=owner
RINGMASTER_RUN_AS_MAP=/etc/rm/accounts
RINGMASTER_LABELS="pool=slurm rack=a1"
RINGMASTER_WORKER_ARGS="--log-format json --stop-grace-period 20s"
EOF
dry_run() {
  env -i PATH="$fake/bin:/usr/bin:/bin" SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=3 SLURM_JOB_NODELIST='dgx[01-03]' \
    RINGMASTER_BIN_DIR="$fake/rm" "$@" bash "$script" 2>&1
}
out=$(dry_run RINGMASTER_ENV_FILE="$fake/worker.env" RINGMASTER_COORDINATOR=head:50051 RINGMASTER_LISTEN_IFNAME=ib0 \
  RINGMASTER_SRUN_ARGS="--container-image=/shared/rm.sqsh --container-mounts=/etc/rm") ||
  fail "dry run exited $?: $out"
want="ringmaster-worker
--trainer
$fake/rm/ringmaster-trainer
--coordinator
head:50051
--state-dir
/tmp/ringmaster-worker-4242
--label
slurm_job=4242
--tls-ca
/etc/rm/ca.crt
--tls-cert
/etc/rm/worker.crt
--tls-key
/etc/rm/worker.key
--join-token-file
/etc/rm/join-token
--run-as
owner
--run-as-map
/etc/rm/accounts
--label
pool=slurm
--label
rack=a1
--log-format
json
--stop-grace-period
20s
--listen-address
10.1.2.3"
got=$(grep -v '^ringmaster-worker.sbatch: ' <<<"$out" | sed "1s|^$fake/rm/||")
[ "$got" = "$want" ] || fail "dry run: the worker's command line differs:$(diff <(echo "$want") <(echo "$got"))"
for opt in --nodes=3 --ntasks=3 --ntasks-per-node=1 --cpu-bind=none --container-image=/shared/rm.sqsh \
  --container-mounts=/etc/rm; do
  grep -qx -- "$opt" "$fake/srun.args" || fail "dry run: srun without $opt: $(tr '\n' ' ' <"$fake/srun.args")"
done
grep -qE -- '--exact|--cpus-per-task' "$fake/srun.args" && fail "dry run: srun must give the task the whole node"
out=$(dry_run) && fail "no RINGMASTER_COORDINATOR, yet exit 0: $out"
grep -q 'RINGMASTER_COORDINATOR is not set' <<<"$out" || fail "no RINGMASTER_COORDINATOR: unclear error: $out"
out=$(dry_run RINGMASTER_COORDINATOR=head:50051 RINGMASTER_LISTEN_IFNAME=eth9) && fail "an interface without address, yet exit 0"
grep -q 'no IPv4 address on RINGMASTER_LISTEN_IFNAME=eth9' <<<"$out" || fail "interface without address: unclear error: $out"
out=$(dry_run RINGMASTER_COORDINATOR=head:50051 RINGMASTER_BIN_DIR=/nonexistent) && fail "no binaries, yet exit 0"
grep -q '/nonexistent/ringmaster-worker not found (set RINGMASTER_BIN_DIR)' <<<"$out" || fail "no binaries: unclear error: $out"
# The example env file: every flag it makes is one the worker has.
sed '/^RINGMASTER_BIN_DIR=/d' deploy/slurm/worker.env.example >"$fake/example.env"
out=$(dry_run RINGMASTER_ENV_FILE="$fake/example.env") || fail "dry run with worker.env.example exited $?: $out"
known=$("$worker" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
for flag in $(grep -x -- '--[a-z][a-z-]*' <<<"$out"); do
  grep -qx -- "$flag" <<<"$known" || fail "worker.env.example: ringmaster-worker has no flag $flag"
done
grep -qx -- '--join-token-file' <<<"$out" || fail "worker.env.example passes no --join-token-file"
echo "ok: dry run: the worker command line, srun's options, the errors; worker.env.example's flags exist"

# --- Slurm on this machine ---------------------------------------------------
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd runs as root (it starts jobs as their users); this is uid $(id -u)"; exit 0; }
for tool in munged slurmctld slurmd sbatch scancel squeue scontrol sinfo; do
  command -v $tool >/dev/null ||
    { echo "SKIP: $tool not found (scripts/install-deps.sh test installs munge, slurmctld, slurmd, slurm-client)"; exit 0; }
done
slurm=$state/slurm
node=$(hostname -s)
mkdir -p "$slurm/key" "$slurm/run" "$slurm/spool" "$slurm/statesave"
chmod 700 "$slurm/key"
chmod 755 "$slurm/run"
head -c 1024 /dev/urandom >"$slurm/key/munge.key"
chmod 600 "$slurm/key/munge.key"
cat >"$slurm/slurm.conf" <<EOF
ClusterName=rmtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$slurm/run/munge.socket
StateSaveLocation=$slurm/statesave
SlurmdSpoolDir=$slurm/spool
SlurmctldPidFile=$slurm/run/slurmctld.pid
SlurmdPidFile=$slurm/run/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
PlugStackConfig=$slurm/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=rmtest Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
: >"$slurm/plugstack.conf"
export SLURM_CONF=$slurm/slurm.conf

# Cleanup: end the allocation (slurmd stops its steps), then a slurmstepd or
# worker of this test's still running (a slurmstepd has this test's slurmd.log
# open); cluster_lib's cleanup then stops the daemons (in $pids) and removes
# the state directory.
slurm_cleanup() {
  local p
  [ -n "${slurm_job:-}" ] && scancel "$slurm_job" 2>/dev/null &&
    for _ in $(seq 100); do [ -z "$(squeue -h -j "$slurm_job" 2>/dev/null)" ] && break; sleep 0.2; done
  for p in $(pgrep -x slurmstepd); do
    [[ " $(readlink /proc/"$p"/fd/* 2>/dev/null | tr '\n' ' ') " == *" $state/slurmd.log "* ]] && kill -KILL "$p" 2>/dev/null
  done
  for p in $(pgrep -f -- "^$state/bin/ringmaster-worker "); do kill -KILL "$p" 2>/dev/null; done
  cluster_cleanup
}
trap slurm_cleanup EXIT

munged -F --force --key-file="$slurm/key/munge.key" --socket="$slurm/run/munge.socket" \
  --pid-file="$slurm/run/munged.pid" --seed-file="$slurm/key/munged.seed" --log-file="$state/munged.log" \
  >>"$state/munged.log" 2>&1 &
pids+=($!)
munge_ok() { munge -S "$slurm/run/munge.socket" -n | unmunge -S "$slurm/run/munge.socket"; }
wait_until 10 "munged did not start" munge_ok
slurmctld -D -c -f "$SLURM_CONF" >>"$state/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >>"$state/slurmd.log" 2>&1 &
pids+=($!)
node_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
for _ in $(seq 150); do node_idle && break; sleep 0.2; done
if ! node_idle; then
  cat "$state/slurmctld.log" "$state/slurmd.log" | tail -20
  why=$(grep -hE 'fatal|error' "$state/slurmctld.log" "$state/slurmd.log" | grep -v 'pmix\|MPI\|state file\|Trying backup' | tail -1)
  echo "SKIP: slurmctld/slurmd did not bring node $node up in 30 s: ${why:-sinfo says '$(sinfo -h -o %T 2>&1)'}"
  exit 0
fi
echo "ok: munged, slurmctld, slurmd up; node $node idle"

start_coordinator
wait_until 30 "the coordinator did not answer" rm_cli nodes

# The allocation: environment as an operator's, the rest in an env file.
bin=$state/bin
mkdir -p "$bin"
ln -s "$worker" "$bin/ringmaster-worker"
ln -s "$trainer" "$bin/ringmaster-trainer"
cat >"$state/slurm-worker.env" <<EOF
RINGMASTER_BIN_DIR=$bin
RINGMASTER_STATE_DIR=$state/w
RINGMASTER_LISTEN_IFNAME=lo
RINGMASTER_LABELS=pool=slurm
RINGMASTER_WORKER_ARGS="--metrics-listen 127.0.0.1:0 --heartbeat-interval 0.5 --stop-grace-period 5"
EOF
slurm_job=$(RINGMASTER_COORDINATOR=$addr RINGMASTER_ENV_FILE=$state/slurm-worker.env \
  sbatch --parsable --time=30 --chdir="$state" --output="$state/worker.log" "$script" 2>&1) ||
  fail "sbatch: $slurm_job"
[[ "$slurm_job" =~ ^[0-9]+$ ]] || fail "sbatch printed no job id: $slurm_job"
echo "ok: sbatch: Slurm job $slurm_job"
job_running() { [ "$(squeue -h -j "$slurm_job" -o %T 2>/dev/null)" = RUNNING ]; }
wait_until 30 "Slurm job $slurm_job did not start" job_running

# The node as the coordinator sees it, by a Python expression over `n`.
node_field() {
  rm_cli -o json nodes | python3 -c "import json, sys
n = [n for n in json.load(sys.stdin).get('nodes', []) if n.get('labels', {}).get('slurm_job') == '$slurm_job']
print($1 if n else '')"
}
node_is() { [ "$(node_field "$1")" = "$2" ]; }
wait_until 30 "the worker of Slurm job $slurm_job did not register" node_is 'n[0].get("state")' NODE_STATE_READY
node_is 'n[0]["labels"].get("pool")' slurm || fail "the node lacks label pool=slurm: $(rm_cli -o json nodes)"
node_is 'n[0]["address"].split(":")[0]' 127.0.0.1 || fail "the node's address is not lo's: $(rm_cli -o json nodes)"
worker_pid=$(pgrep -f -- "^$bin/ringmaster-worker " | head -1)
[ -n "$worker_pid" ] || fail "no process $bin/ringmaster-worker"
parent=$(ps -o comm= -p "$(ps -o ppid= -p "$worker_pid" | tr -d ' ')")
[ "$parent" = slurmstepd ] || fail "the worker's parent is '$parent', not slurmstepd (srun's step)"
echo "ok: the worker (pid $worker_pid, child of slurmstepd) registered, labels slurm_job=$slurm_job pool=slurm"

out=$(timeout 200 "$cli" --coordinator "$addr" submit "$spec" --wait \
  --set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1 \
  --set parallelism.data=1 --set training.steps=20 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=10 --set lr_schedule.warmup_steps=5 \
  --set "resources.node_selector.slurm_job=$slurm_job" 2>&1)
rc=$?
job=$(job_id_of "$out")
[ $rc -eq 0 ] || fail "submit --wait exited $rc: $(tail -5 <<<"$out")"
job_in_state "$job" JOB_STATE_SUCCEEDED || fail "job $job: $(job_state "$job")"
echo "ok: job $job (node_selector slurm_job=$slurm_job) SUCCEEDED on the Slurm-started worker"

# The drain: before the time limit Slurm signals the steps (not the batch
# shell), as scancel --signal does now. A job runs on the allocation's node
# when the signal comes, and a node outside Slurm (started once the job runs)
# is there for it to move to.
out=$(rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=1 \
  --set resources.cpus_per_rank=1 --set parallelism.data=1 --set training.steps=100000 \
  --set training.log_interval_steps=10 --set checkpoint.interval_steps=20 --set lr_schedule.warmup_steps=5 2>&1) ||
  fail "submit: $out"
long=$(job_id_of "$out")
on_node() { job_in_state "$1" JOB_STATE_RUNNING && [ "$(job_field "$1" 'r["job"]["placement"]["ranks"][0]["hostname"]')" = "$2" ]; }
wait_until 60 "job $long did not run on $node" on_node "$long" "$node"
start_worker n2 2
wait_nodes_ready 2

scancel --signal=USR1 "$slurm_job" || fail "scancel --signal=USR1 $slurm_job"
wait_until 30 "the node was not cordoned by its worker after SIGUSR1" \
  node_is 'n[0].get("state") + " " + n[0].get("cordonedBy", "")' "NODE_STATE_CORDONED worker"
wait_until 60 "job $long did not move from the drained node to n2" on_node "$long" n2
# Slurm signals every process of the step: the rank got the SIGUSR1 too (its
# state dump is in its log), lived on to write the drain's checkpoint (no
# rank exit before the job moved) and the job moved for the drain.
rank_log=$state/w/jobs/$long/gen-1/rank-0.log
grep -q 'ringmaster state dump (SIGUSR1)' "$rank_log" ||
  fail "no state dump in $rank_log: did the rank get Slurm's SIGUSR1?"
job_field "$long" "(lambda k: 'JOB_EVENT_KIND_NODE_DRAINED' in k and 'JOB_EVENT_KIND_RANK_EXITED' not in
  k[:k.index('JOB_EVENT_KIND_NODE_DRAINED')])([e['kind'] for e in r['events']])" | grep -qx True ||
  fail "job $long did not move for the drain with its rank alive: $(rm_cli describe "$long")"
kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited on SIGUSR1"
job_running || fail "the allocation ended on SIGUSR1"
echo "ok: SIGUSR1 to the steps: node cordoned by worker; job $long's rank dumped its state and moved to n2 (NODE_DRAINED);"
echo "ok: the worker and the allocation still run"
rm_cli cancel "$long" >/dev/null || fail "cancel $long"

scancel "$slurm_job" || fail "scancel $slurm_job"
wait_until 30 "the worker did not exit after scancel" bash -c "! kill -0 $worker_pid 2>/dev/null"
wait_until 30 "Slurm job $slurm_job did not end" bash -c "[ -z \"\$(squeue -h -j $slurm_job)\" ]"
echo "ok: scancel: the worker exited, the allocation ended"
echo "PASS: the sbatch script runs a worker per node under Slurm; it drains itself on SIGUSR1"
