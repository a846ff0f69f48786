#!/usr/bin/env bash
# A job's environment (issue #27 item 1), through a real coordinator and
# worker on loopback:
#   1. variables that load code or open a path (CUDA_INJECTION64_PATH,
#      NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, NCCL_DEBUG_FILE, LD_PRELOAD) are
#      refused at submission (INVALID_ARGUMENT naming env.<NAME> and why),
#      although the coordinator's --allowed-env 'NCCL_*,CUDA_*,LD_*' matches
#      each by prefix, and no job is created;
#   2. each is accepted once the operator names it exactly;
#   3. a running trainer's environment (/proc/<pid>/environ) holds none of
#      the worker's own variables (a marker, the worker's NCCL_*, a
#      *_TOKEN_FILE, its HOME): only the minimal environment (PATH, HOME,
#      LANG, TMPDIR in the job's private directory), the spec's allowed env
#      and what Ringmaster sets;
#   4. the worker checks the names again: NCCL_NET_PLUGIN, which this
#      coordinator admits (named exactly) but the worker's --allowed-env does
#      not, fails the job at start naming env.NCCL_NET_PLUGIN and the worker's
#      flag, and no trainer of it ever runs.
# Usage: job_env_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")

small=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1
       --set parallelism.data=1 --set lr_schedule.warmup_steps=2 --set restart.max_restarts=0)
attacks=(CUDA_INJECTION64_PATH=/tmp/x.so NCCL_NET_PLUGIN=/tmp/x.so NCCL_TUNER_PLUGIN=/tmp/x.so
         NCCL_DEBUG_FILE=/tmp/out.%h.%p LD_PRELOAD=/tmp/x.so)
jobs_count() { rm_cli jobs 2>/dev/null | grep -cE '^j-[0-9]+ '; }

# --- 1. refused even though a prefix matches --------------------------------
start_coordinator --allowed-env 'NCCL_*,CUDA_*,LD_*'
wait_until 30 "the coordinator did not answer" rm_cli jobs
for kv in "${attacks[@]}"; do
  name=${kv%%=*}
  out=$(rm_cli submit "$spec" "${small[@]}" --set "env.$kv" 2>&1)
  rc=$?
  [ $rc -ne 0 ] || fail "env.$name was accepted with --allowed-env 'NCCL_*,CUDA_*,LD_*': $out"
  grep -qE "^ringmaster: env\.$name: .*(loads code|names a file or directory).*\(INVALID_ARGUMENT\)$" <<<"$out" ||
    fail "the refusal of env.$name does not name it and why: $out"
  echo "ok: env.$name refused: $out"
done
[ "$(jobs_count)" = 0 ] || fail "a refused submission left a job: $(rm_cli jobs 2>&1)"
echo "PASS: code-loading and path variables refused by name although a prefix matched them"

# --- 2. accepted when the operator names each exactly ------------------------
kill -TERM "$coordinator_pid"
wait "$coordinator_pid" 2>/dev/null
start_coordinator --allowed-env 'NCCL_*,CUDA_*,LD_*,CUDA_INJECTION64_PATH,NCCL_NET_PLUGIN,NCCL_TUNER_PLUGIN,NCCL_DEBUG_FILE,LD_PRELOAD'
wait_until 30 "the restarted coordinator did not answer" rm_cli jobs
for kv in "${attacks[@]}"; do
  name=${kv%%=*}
  # A GPU job on a cluster with no GPU: accepted, never started.
  out=$(rm_cli submit "$spec" "${small[@]}" --set resources.device=cuda --set "env.$kv" 2>&1) ||
    fail "env.$name named exactly in --allowed-env was refused: $out"
  job=$(job_id_of "$out")
  [ -n "$job" ] || fail "no job id in: $out"
  rm_cli cancel "$job" >/dev/null 2>&1 || fail "cannot cancel $job"
done
echo "PASS: each accepted when named exactly in --allowed-env"

# --- 3. the trainer's environment is not the worker's ------------------------
RM_WORKER_MARKER=worker-only NCCL_SOCKET_IFNAME=worker-own-if NCCL_IB_HCA=worker-own-hca \
  RM_JOIN_TOKEN_FILE="$state/join-token" HOME=/root/worker-home LANG=C.UTF-8 start_worker n1 1
wait_nodes_ready 1
out=$(rm_cli submit "$spec" "${small[@]}" --set training.steps=100000 --set training.log_interval_steps=1 \
  --set env.NCCL_DEBUG=WARN --set env.NCCL_ALGO=Ring 2>&1) || fail "submit failed: $out"
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
# (a function: wait_until re-runs it at each poll; "$(...)" in its arguments
# would be read once, before the trainer starts)
job_running() { [ -n "$(trainer_pids "$job")" ]; }
wait_until 60 "no trainer of $job is running" job_running
pid=$(trainer_pids "$job" | head -1)
env_of_rank=$(tr '\0' '\n' <"/proc/$pid/environ") || fail "cannot read /proc/$pid/environ"
echo "--- the rank's environment:"
echo "$env_of_rank"
for leaked in RM_WORKER_MARKER NCCL_SOCKET_IFNAME NCCL_IB_HCA RM_JOIN_TOKEN_FILE; do
  grep -q "^$leaked=" <<<"$env_of_rank" && fail "the rank inherited the worker's $leaked"
done
grep -qx 'HOME=/root/worker-home' <<<"$env_of_rank" && fail "the rank inherited the worker's HOME"
for wanted in NCCL_DEBUG=WARN NCCL_ALGO=Ring LANG=C.UTF-8; do
  grep -qx "$wanted" <<<"$env_of_rank" || fail "the rank's environment lacks $wanted"
done
for wanted in PATH HOME TMPDIR; do
  grep -q "^$wanted=" <<<"$env_of_rank" || fail "the rank's environment has no $wanted"
done
tmpdir=$(grep '^TMPDIR=' <<<"$env_of_rank" | cut -d= -f2-)
case $tmpdir in
  "$state/n1/"*"/$job/"*) ;;
  *) fail "TMPDIR=$tmpdir is not in job $job's directory under the worker's state directory" ;;
esac
[ -d "$tmpdir" ] || fail "TMPDIR $tmpdir does not exist"
[ "$(stat -c %a "$(dirname "$tmpdir")")" = 700 ] || fail "the job's directory $(dirname "$tmpdir") is not 0700"
extra=$(grep -vE '^(PATH|HOME|LANG|LC_ALL|USER|LOGNAME|TMPDIR|NCCL_DEBUG|NCCL_ALGO)=' <<<"$env_of_rank")
[ -z "$extra" ] || fail "the rank's environment holds more than the minimal one and the spec's: $extra"
rm_cli cancel "$job" >/dev/null 2>&1 || fail "cannot cancel $job"
echo "PASS: the trainer's environment is the minimal one plus the spec's allowed env, none of the worker's"

# --- 4. the worker refuses what its own --allowed-env does not name -------------
out=$(rm_cli submit "$spec" "${small[@]}" --set training.steps=100000 --set env.NCCL_NET_PLUGIN=/tmp/x.so 2>&1) ||
  fail "submit with env.NCCL_NET_PLUGIN (named exactly on the coordinator) failed: $out"
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
wait_until 60 "job $job did not fail" job_in_state "$job" JOB_STATE_FAILED
message=$(job_field "$job" 'r["job"]["message"]')
grep -q 'env\.NCCL_NET_PLUGIN: loads code.*ringmaster-worker --allowed-env NCCL_NET_PLUGIN' <<<"$message" ||
  fail "job $job failed, but not for env.NCCL_NET_PLUGIN on the worker: $message"
[ -z "$(trainer_pids "$job")" ] || fail "a trainer of $job runs with env.NCCL_NET_PLUGIN"
echo "PASS: the worker refused env.NCCL_NET_PLUGIN again: $message"
