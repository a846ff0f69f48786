#!/usr/bin/env bash
# One user attacks another user's running job (issue #27, "What must be
# shown"), on a loopback cluster of real processes: a coordinator with bearer
# tokens for alice, mallory and carol, a join token, a 32 KiB per-job log
# quota and a metrics endpoint; two workers with one CPU slot each. alice's
# job (the victim) trains and commits checkpoints on one worker, mallory's
# noisy job runs on the other. While both run (their trainers stopped with
# SIGSTOP, so that every attack meets both jobs running in generation 1
# however fast this machine trains; they continue after attack 5), mallory
# tries, each check printed as it goes:
#   1. specs whose env loads code or opens a file (CUDA_INJECTION64_PATH,
#      NCCL_NET_PLUGIN, LD_PRELOAD, NCCL_DEBUG_FILE), sent past the CLI's own
#      check: INVALID_ARGUMENT naming env.<NAME>, nothing stored;
#   2. forged CheckpointService commits climbing into alice's job directory
#      (<root>/<mallory's job>/../<alice's job>/...): through her worker's
#      agent socket as her rank would; through alice's worker's agent socket
#      for alice's rank at alice's own directory, as a local process without
#      the generation's secret; straight to the coordinator as a
#      process that is not a worker; with the join token and her worker's
#      node credential, for her own job and for alice's: each refused
#      (UNAUTHENTICATED or PERMISSION_DENIED);
#   3. a forged NodeService.ReportRankExit of alice's rank 0 with exit code 78
#      (unrecoverable): as a process that is not a worker, as a node of its
#      own registered with the join token, and with her worker's credential:
#      each refused, alice's job still RUNNING;
#   4. a spec with 66,000 labels (2 MB, past the CLI's own check): within
#      60 s, INVALID_ARGUMENT naming labels, nothing stored;
#   5. a slowloris (64 stalled connections) on the coordinator's metrics
#      endpoint: /healthz and /metrics answer within 1 s throughout;
#   6. her job logs every step: the coordinator stores at most the 32 KiB
#      quota of it, and alice's logs are whole (every line her rank wrote).
#   7. ranks under other Unix accounts (--run-as owner) are not tried here:
#      rank_isolation_test covers them (its workers must run the trainer from
#      outside Bazel's runfiles); this test's workers run ranks as themselves.
# Throughout, carol runs `ringmaster jobs` every 0.3 s. At the end: alice's
# job SUCCEEDED, each of its committed checkpoints lies in its own directory
# and every file matches the SHA-256 the coordinator recorded, none is
# mallory's, and `ringmaster jobs` never failed.
# Every check runs and each failure is listed, then the test fails. Every
# process started here is stopped and reaped (cluster_lib.sh's cleanup).
# A binary from before issue #27 lacking a flag used here runs without it,
# saying so (to show the attacks succeed there).
# Usage: hostile_user_test.sh CLI COORDINATOR WORKER TRAINER SPEC CHECKPOINT_PROBE NODE_PROBE SLOWLORIS
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5") checkpoint_probe=$(realpath "$6") node_probe=$(realpath "$7") slowloris=$(realpath "$8")
started=$SECONDS
failures=()
check() {  # check DESCRIPTION COMMAND...: prints ok or FAILED; records DESCRIPTION when COMMAND fails
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures+=("$what"); fi
}

# --- the cluster -----------------------------------------------------------------
(umask 077
 for user in alice mallory carol; do
   openssl rand -hex 24 >"$state/$user.token"
   echo "$(cat "$state/$user.token") $user" >>"$state/tokens"
 done
 openssl rand -hex 32 >"$state/join-token")
as() { local user=$1; shift; "$cli" --coordinator "$addr" --token-file "$state/$user.token" "$@"; }
rm_cli() { as carol "$@"; }  # cluster_lib's helpers (job_field, nodes_ready) ask as carol
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
quota=32768
quota_flag=(--log-quota-per-job 32KiB)
if ! grep -q -- --log-quota-per-job <<<"$("$coordinator" --help 2>&1)"; then
  echo "note: this coordinator has no --log-quota-per-job: it runs without one"
  quota_flag=()
fi
"$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "127.0.0.1:$mport" \
  --heartbeat-interval 500ms --token-file "$state/tokens" --join-token-file "$state/join-token" "${quota_flag[@]}" \
  >>"$state/coordinator.log" 2>&1 &
pids+=($!)
start_worker n1 1 --join-token-file "$state/join-token"
start_worker n2 1 --join-token-file "$state/join-token"
wait_nodes_ready 2
root=$state/coordinator/checkpoints
db=$state/coordinator/coordinator.db
stored_jobs() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM jobs").fetchone()[0])' "$db"; }

# carol's `ringmaster jobs` every 0.3 s, each failure recorded with its time.
(
  while [ ! -e "$state/stop-jobs" ]; do
    if ! out=$(timeout 10 "$cli" --coordinator "$addr" --token-file "$state/carol.token" jobs --limit 0 2>&1); then
      echo "$(date +%T.%N | cut -c1-12) $(head -c 300 <<<"$out")" >>"$state/jobs-failures"
    fi
    echo >>"$state/jobs-calls"
    sleep 0.3
  done
) &
jobs_loop=$!
pids+=("$jobs_loop")

# --- the victim and the attacker's job --------------------------------------------
one_rank=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1
          --set parallelism.data=1 --set data.batch_size=8 --set training.eval_interval_steps=1000000
          --set lr_schedule.warmup_steps=5 --set checkpoint.keep=3)
submit() {  # USER ARGS...: the job id
  local user=$1 out
  shift
  out=$(as "$user" submit "$spec" "${one_rank[@]}" "$@" 2>&1) || fail "$user's submit failed: $out"
  job_id_of "$out"
}
alice=$(submit alice --set training.steps=15000 --set lr_schedule.decay_steps=14995 --set checkpoint.interval_steps=1000 \
  --set training.log_interval_steps=1000 --set restart.max_restarts=0)
mallory=$(submit mallory --set training.steps=10000 --set lr_schedule.decay_steps=9995 \
  --set checkpoint.interval_steps=200 --set training.log_interval_steps=1)
# Python over `ringmaster checkpoints JOB -o json` (c: its checkpoints, newest first).
checkpoints() { rm_cli checkpoints "$1" -o json | python3 -c "import json, sys; c = json.load(sys.stdin).get('checkpoints', []); print($2)"; }
has_checkpoints() { [ "$(checkpoints "$1" 'len(c)')" -ge "$2" ]; }
wait_until 120 "alice's job $alice committed no two checkpoints" has_checkpoints "$alice" 2
wait_until 60 "mallory's job $mallory committed no checkpoint" has_checkpoints "$mallory" 1
# Both trainers are stopped (SIGSTOP) while mallory attacks, so that every
# attack meets both jobs running in generation 1 however fast this machine
# trains; they continue afterwards.
frozen=$(trainer_pids "$alice"; trainer_pids "$mallory")
[ "$(wc -w <<<"$frozen")" = 2 ] || fail "expected the 2 trainers of $alice and $mallory, found: $frozen"
kill -STOP $frozen
host_of() { job_field "$1" 'r["job"]["placement"]["ranks"][0]["hostname"]'; }
node_of() { job_field "$1" 'r["job"]["placement"]["ranks"][0]["nodeId"]'; }
alice_host=$(host_of "$alice") alice_node=$(node_of "$alice")
mallory_host=$(host_of "$mallory") mallory_node=$(node_of "$mallory")
echo "alice's job $alice runs on $alice_host ($alice_node), mallory's $mallory on $mallory_host ($mallory_node);" \
  "alice's newest checkpoint: step $(checkpoints "$alice" 'c[0]["step"]')"
[ "$alice_host" != "$mallory_host" ] || fail "both jobs run on $alice_host (one slot per worker)"
credential=$state/$mallory_host/node-credential  # mallory's worker's, as if she had stolen it
credential_flag=(--credential-file "$credential")
if [ ! -s "$credential" ]; then
  echo "note: $mallory_host keeps no node credential ($credential): the credentialed attacks go without one"
  credential= credential_flag=()
fi
jobs_before=$(stored_jobs)

# --- 1. env that loads code --------------------------------------------------------
env_refused() {  # NAME=VALUE
  local name=${1%%=*} out code
  out=$(timeout 30 "$cli" --coordinator "$addr" --token-file "$state/mallory.token" submit "$spec" "${one_rank[@]}" \
    --set training.steps=10 --set "env.$1" --skip-local-validation 2>&1)
  code=$?
  echo "  exit $code: $(head -c 300 <<<"$out")"
  [ $code -ne 0 ] && grep -qE "env\.$name: .*\(INVALID_ARGUMENT\)" <<<"$out"
}
for kv in CUDA_INJECTION64_PATH=/tmp/x.so NCCL_NET_PLUGIN=/tmp/x.so LD_PRELOAD=/tmp/x.so NCCL_DEBUG_FILE=/tmp/x.log; do
  check "1. env.${kv%%=*} refused at submit with INVALID_ARGUMENT naming it" env_refused "$kv"
done
check "1. nothing stored by the refused submissions ($(stored_jobs) jobs, were $jobs_before)" \
  [ "$(stored_jobs)" = "$jobs_before" ]

# --- 2. forged commits into alice's directory -------------------------------------
# mallory plants a checkpoint in her own directory (a copy of her newest,
# renamed to a step alice never reaches, its manifest still verifying).
mallory_path=$(checkpoints "$mallory" 'c[0]["path"]')
planted=$root/$mallory/gen-1/step-999999999
cp -r "$mallory_path" "$planted"
python3 - "$planted/MANIFEST.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["step"] = 999999999
json.dump(m, open(sys.argv[1], "w"))
EOF
climb=$root/$mallory/../$alice/gen-1/step-999999999
refused() {  # REGEX COMMAND...: COMMAND's last line starts with a code matching REGEX
  local want=$1 out
  shift
  out=$("$@" 2>&1 | tail -1)
  echo "  $out"
  grep -qE "^($want) " <<<"$out"
}
check "2. mallory's commit of $climb through her worker's agent socket (as her rank) refused" \
  refused PERMISSION_DENIED "$checkpoint_probe" "unix:$state/$mallory_host/agent.sock" "$mallory" 1 999999999 \
  "$climb" "$planted/MANIFEST.json"
# A process on alice's node reaches its worker's agent socket too (with ranks
# under other accounts the socket is 0666): a commit for alice's rank 0 at
# exactly the directory the coordinator gave her job, as her rank would send
# it, but without the generation's secret from her rank.json.
check "2. a commit for alice's rank 0 at her own checkpoint directory through $alice_host's agent socket, without her secret, refused" \
  refused PERMISSION_DENIED "$checkpoint_probe" "unix:$state/$alice_host/agent.sock" "$alice" 1 999999999 \
  "$root/$alice/gen-1/step-999999999" "$planted/MANIFEST.json"
# Straight to the coordinator, with checkpoint_probe's CREDENTIAL_FILE ("-": none) and JOIN_TOKEN_FILE.
commit() { "$checkpoint_probe" "$addr" "$1" 1 999999999 "$climb" "$planted/MANIFEST.json" "${@:2}"; }
check "2. a commit for alice's job of $climb from a process that is not a worker refused" \
  refused "UNAUTHENTICATED|PERMISSION_DENIED" commit "$alice"
check "2. the same with the join token and $mallory_host's node credential refused" \
  refused PERMISSION_DENIED commit "$alice" "${credential:--}" "$state/join-token"
check "2. the same for mallory's own job (whose rank runs on $mallory_host) refused" \
  refused PERMISSION_DENIED commit "$mallory" "${credential:--}" "$state/join-token"
no_forged() {
  local steps
  steps=$(checkpoints "$alice" '" ".join(str(x["step"]) for x in c)') || return 1
  echo "  alice's checkpoints: steps $steps"
  ! grep -qw 999999999 <<<"$steps"
}
check "2. alice's job has no forged checkpoint" no_forged

# --- 3. a forged rank exit for alice's rank 0 ---------------------------------------
exit78() { "$node_probe" "$addr" exit --job "$alice" --generation 1 --rank 0 "$@"; }
check "3. ReportRankExit(exit 78) of alice's rank 0 from a process that is not a worker refused" \
  refused "UNAUTHENTICATED|PERMISSION_DENIED" exit78 --as-node "$alice_node"
check "3. the same from a node of mallory's own (registered with the join token) refused" \
  refused PERMISSION_DENIED exit78 --join-token-file "$state/join-token" --register evil --as-node "$alice_node"
check "3. the same with $mallory_host's node credential refused" \
  refused PERMISSION_DENIED exit78 --join-token-file "$state/join-token" "${credential_flag[@]}" --as-node "$mallory_node"
running() { local s; s=$(job_state "$alice"); echo "  alice's job $alice is $s"; [ "$s" = JOB_STATE_RUNNING ]; }
check "3. alice's job is untouched: still RUNNING" running

# --- 4. 66,000 labels ------------------------------------------------------------
jobs_before=$(stored_jobs)
python3 - "$state/labels.json" <<'EOF'
import json, sys
spec = {"name": "labels", "model": {"mlp": {}}, "data": {"dataset": "synthetic"}, "training": {"steps": 1},
        "resources": {"device": "cpu", "nodes": 1, "ranksPerNode": 1},
        "labels": {"k%05d" % i: "v" * 16 for i in range(66000)}}
json.dump(spec, open(sys.argv[1], "w"))
EOF
labels_refused() {
  local out code
  out=$(timeout 60 "$cli" --coordinator "$addr" --token-file "$state/mallory.token" submit "$state/labels.json" \
    --skip-local-validation 2>&1)
  code=$?
  echo "  exit $code: $(head -c 300 <<<"$out")"
  [ $code -ne 0 ] && grep -qE "labels: .*\(INVALID_ARGUMENT\)" <<<"$out"
}
check "4. a 66,000-label spec refused with INVALID_ARGUMENT naming labels" labels_refused
check "4. nothing stored ($(stored_jobs) jobs, were $jobs_before)" [ "$(stored_jobs)" = "$jobs_before" ]

# --- 5. a slowloris on the coordinator's metrics endpoint ----------------------------
slowloris_run() {
  timeout 60 python3 "$slowloris" --stalls 64 --interval 0.5 --seconds 5 --probe-every 0.25 --within 1 \
    "127.0.0.1:$mport" >"$state/slowloris.out" 2>&1
  local rc=$?
  sed 's/^/  /' "$state/slowloris.out" | tail -5
  return $rc
}
check "5. /healthz and /metrics answer within 1 s under 64 stalled connections" slowloris_run
check "5. alice's job is still RUNNING after the attacks" running

kill -CONT $frozen 2>/dev/null  # (a trainer that a forged exit ended is gone)

# --- 6. a job that logs every step -------------------------------------------------
finished() { case $(job_state "$1") in JOB_STATE_SUCCEEDED | JOB_STATE_FAILED | JOB_STATE_CANCELLED) return 0 ;; esac; return 1; }
wait_until 120 "mallory's job $mallory did not finish" finished "$mallory"
rank_log() { find "$state/$(host_of "$1")/jobs/$1" -name 'rank-0.log' | head -1; }
# `ringmaster logs JOB` once it accounts for every line the rank wrote (the
# marker's count of dropped lines included): the worker ships them late.
logs_complete() {
  as "$2" logs "$1" >"$state/$1.logs" 2>&1 || return 1
  local shown dropped
  shown=$(grep -vc "dropped: the job's log quota" "$state/$1.logs")
  dropped=$(sed -nE "s/^\[rank 0\] \.\.\. ([0-9]+) lines \([0-9]+ bytes\) dropped: the job's log quota.*/\1/p" "$state/$1.logs")
  [ $((shown + ${dropped:-0})) -eq "$(wc -l <"$(rank_log "$1")")" ]
}
wait_until 20 "mallory's logs never accounted for the lines her rank wrote" logs_complete "$mallory" mallory
written=$(wc -l <"$(rank_log "$mallory")")
stored=$(find "$state/coordinator/logs/$mallory" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
echo "  mallory's rank wrote $written lines; the coordinator stores $stored bytes of them; ringmaster logs shows:"
head -2 "$state/$mallory.logs" | cut -c1-200 | sed 's/^/  | /'
find "$state/coordinator/logs/$mallory" -type f -printf '  %p %s\n' | head
check "6. mallory's stored logs stay within the $quota-byte quota ($stored bytes)" [ "$stored" -le "$quota" ]

# --- the end ----------------------------------------------------------------------
wait_until 180 "alice's job $alice did not finish" finished "$alice"
succeeded() { local s; s=$(job_state "$alice"); echo "  alice's job $alice is $s $(job_field "$alice" 'r["job"].get("message", "")')"; [ "$s" = JOB_STATE_SUCCEEDED ]; }
check "alice's job SUCCEEDED" succeeded
alice_logs_whole() {
  logs_complete "$alice" alice || return 1
  echo "  $(wc -l <"$state/$alice.logs") lines, as her rank wrote them"
  ! grep -q "dropped: the job's log quota" "$state/$alice.logs"
}
check "6. alice's logs are whole" alice_logs_whole
# Every file of each of alice's checkpoints lies in her job's directory and
# matches the SHA-256 the coordinator recorded at commit.
intact() {
  rm_cli checkpoints "$alice" -o json | python3 -c '
import hashlib, json, os, sys
root, job = sys.argv[1], sys.argv[2]
c = json.load(sys.stdin).get("checkpoints", [])
print("  %d checkpoints: steps %s" % (len(c), " ".join(str(x["step"]) for x in c)))
bad = 0 if c else 1
for x in c:
    if not x["path"].startswith(f"{root}/{job}/gen-") or "/../" in x["path"]:
        print(f"  {x['"'"'path'"'"']} is not in {root}/{job}"); bad += 1
    for shard in x["shards"]:
        for f in shard["files"]:
            p = os.path.join(x["path"], f["path"])
            h = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else "missing"
            if h != f["checksum"]["hex"]:
                print(f"  {p}: {h}, recorded {f['"'"'checksum'"'"']['"'"'hex'"'"']}"); bad += 1
sys.exit(1 if bad else 0)
' "$root" "$alice"
}
check "alice's committed checkpoints are hers and intact (SHA-256s as recorded)" intact
touch "$state/stop-jobs"
wait "$jobs_loop" 2>/dev/null
touch "$state/jobs-calls" "$state/jobs-failures"
calls=$(wc -l <"$state/jobs-calls") failed=$(wc -l <"$state/jobs-failures")
jobs_answered() {
  echo "  carol's ringmaster jobs: $calls calls, $failed failed"
  [ -s "$state/jobs-failures" ] && head -3 "$state/jobs-failures" | sed 's/^/  /'
  [ "$calls" -gt 0 ] && [ "$failed" -eq 0 ]
}
check "ringmaster jobs answered throughout" jobs_answered
echo "took $((SECONDS - started)) s"

if [ ${#failures[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
  fail "${#failures[@]} check(s) failed"
fi
echo "PASS: every attack of mallory's on alice's running job was refused; alice's job succeeded with its checkpoints" \
  "intact, and ringmaster jobs answered throughout"
