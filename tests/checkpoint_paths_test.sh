#!/usr/bin/env bash
# Checkpoint and data paths belong to the coordinator and the worker, not to
# a job (issue #27, item 2). On a loopback cluster of one coordinator and one
# worker (3 CPU slots), a victim job A and an attacker job B run side by side:
#   1. forged commits, each refused with PERMISSION_DENIED:
#      a. B commits, through the worker's agent socket, a path that climbs
#         into A's directory (<root>/B/../A/gen-1/step-999999999);
#      b. a commit for A, through the agent socket, of a checkpoint B planted
#         in its own directory (<root>/A/../B/gen-1/step-999999999, a real
#         checkpoint with a manifest that verifies);
#      c. the same commit straight to the coordinator (with the node's
#         credential, where it issues one: a worker's, stolen), and one
#         with doubled slashes;
#      then A's checkpoints are the ones it wrote, intact (every file matches
#      the SHA-256 the coordinator recorded), and A, killed, resumes from its
#      own newest checkpoint and succeeds;
#   2. a checkpoint.directory through a symbolic link planted under an allowed
#      checkpoint root (pointing at the coordinator's own root): the job fails
#      at once naming the link, and nothing is written through it;
#   3. a data directory holding a symbolic link to a file outside the data
#      roots: the job fails at once naming the file; it is never read.
# Every check is reported; the test fails if any did.
# Usage: checkpoint_paths_test.sh CLI COORDINATOR WORKER TRAINER SPEC PROBE
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
probe=$(realpath "$6")
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
mkdir -p "$state/shared" "$state/data" "$state/outside"
start_coordinator --checkpoint-allowed-roots "$state/shared"
start_worker n1 3 --data-roots "/usr/share/datasets,$state/data"
wait_nodes_ready 1
root=$state/coordinator/checkpoints
socket=unix:$state/n1/agent.sock
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

one_rank=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1
          --set parallelism.data=1 --set training.eval_interval_steps=1000000 --set training.log_interval_steps=100
          --set lr_schedule.warmup_steps=5 --set checkpoint.interval_steps=100 --set checkpoint.keep=3)
submit() { local out; out=$(rm_cli submit "$spec" "${one_rank[@]}" "$@" 2>&1) || fail "submit failed: $out"; job_id_of "$out"; }
# Python over `ringmaster checkpoints JOB -o json` (c: its checkpoints).
checkpoints() { rm_cli checkpoints "$1" -o json | python3 -c "import json, sys; c = json.load(sys.stdin).get('checkpoints', []); print($2)"; }
has_checkpoints() { [ "$(checkpoints "$1" 'len(c)')" -ge "$2" ]; }
finished() { local s; s=$(job_state "$1"); [ "$s" = JOB_STATE_SUCCEEDED ] || [ "$s" = JOB_STATE_FAILED ]; }

# ---- 1. forged commits ----
a=$(submit --set training.steps=5000 --set lr_schedule.decay_steps=4995 --set restart.max_restarts=2)
b=$(submit --set training.steps=200000 --set lr_schedule.decay_steps=199995)
wait_until 120 "job $a committed no two checkpoints" has_checkpoints "$a" 2
wait_until 120 "job $b committed no checkpoint" has_checkpoints "$b" 1
# Freeze A so that it stays running (its generation current) and its newest
# checkpoint stays the newest; a commit it sent just before lands first.
frozen=$(trainer_pids "$a")
[ -n "$frozen" ] || fail "no trainer of job $a is running"
kill -STOP $frozen
before=$(checkpoints "$a" '[(x["step"], x["path"]) for x in c]')
for _ in $(seq 10); do
  sleep 0.5
  again=$(checkpoints "$a" '[(x["step"], x["path"]) for x in c]')
  [ "$again" = "$before" ] && break
  before=$again
done
a_newest=$(checkpoints "$a" 'c[0]["step"]')
b_path=$(checkpoints "$b" 'c[0]["path"]')
echo "victim $a newest step $a_newest; attacker $b newest $b_path"

# B plants a checkpoint of its own, renamed to a step A never reaches, whose
# manifest verifies (this much any job can do in its own directory).
planted=$root/$b/gen-1/step-999999999
cp -r "$b_path" "$planted"
python3 - "$planted/MANIFEST.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["step"] = 999999999
json.dump(m, open(sys.argv[1], "w"))
EOF

expect_denied() {  # expect_denied WHAT TARGET JOB PATH [CREDENTIAL_FILE]
  local out
  out=$("$probe" "$2" "$3" 1 999999999 "$4" "$planted/MANIFEST.json" ${5:+"$5"} 2>&1)
  if grep -q "^PERMISSION_DENIED " <<<"$out"; then
    echo "PASS: $1 refused: $(head -1 <<<"$out")"
  else
    bad "$1 was not refused with PERMISSION_DENIED: $out"
  fi
}
expect_denied "B's commit into A's directory (agent socket)" "$socket" "$b" "$root/$b/../$a/gen-1/step-999999999"
expect_denied "a commit for A of B's planted checkpoint (agent socket)" "$socket" "$a" "$root/$a/../$b/gen-1/step-999999999"
# Straight to the coordinator with the node's own credential, where the
# coordinator issues one (the worker's, stolen): the path alone is refused.
credential=$state/n1/node-credential
[ -f "$credential" ] || credential=
expect_denied "a commit for A of B's planted checkpoint (coordinator)" "$addr" "$a" \
  "$root/$a/../$b/gen-1/step-999999999" "$credential"
expect_denied "a commit for A with doubled slashes (coordinator)" "$addr" "$a" "$root//$a/gen-1/step-999999999" \
  "$credential"

after=$(checkpoints "$a" '[(x["step"], x["path"]) for x in c]')
if [ "$after" = "$before" ]; then
  echo "PASS: job $a's checkpoints are unchanged: $after"
else
  bad "job $a's checkpoints changed: before $before, after $after"
fi
# Every file of every checkpoint of A lies in A's directory and matches the
# SHA-256 the coordinator recorded at commit.
intact=$(rm_cli checkpoints "$a" -o json | python3 -c '
import hashlib, json, os, sys
root, job = sys.argv[1], sys.argv[2]
for c in json.load(sys.stdin).get("checkpoints", []):
    if not c["path"].startswith(f"{root}/{job}/gen-"):
        print(f"{c['"'"'path'"'"']} is not in {root}/{job}")
    for shard in c["shards"]:
        for f in shard["files"]:
            p = os.path.join(c["path"], f["path"])
            h = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else "missing"
            if h != f["checksum"]["hex"]:
                print(f"{p}: {h}, recorded {f['"'"'checksum'"'"']['"'"'hex'"'"']}")
' "$root" "$a")
if [ -z "$intact" ]; then echo "PASS: job $a's checkpoint files are intact"; else bad "job $a's checkpoints: $intact"; fi

# A resumes from its own newest checkpoint, and succeeds.
kill -9 $frozen
resumed() { job_field "$a" '"|".join(e["reason"] for e in r["events"] if e["kind"] == "JOB_EVENT_KIND_RESTARTING")' | grep -q "resuming from step"; }
wait_until 120 "job $a did not restart" resumed
restart=$(job_field "$a" '"|".join(e["reason"] for e in r["events"] if e["kind"] == "JOB_EVENT_KIND_RESTARTING")')
if grep -q "resuming from step $a_newest\b" <<<"$restart"; then
  echo "PASS: job $a resumed from its own step $a_newest: $restart"
else
  bad "job $a did not resume from its own newest step $a_newest: $restart"
fi
wait_until 180 "job $a did not finish" finished "$a"
if [ "$(job_state "$a")" = JOB_STATE_SUCCEEDED ]; then
  echo "PASS: job $a succeeded"
else
  bad "job $a is $(job_state "$a"): $(job_field "$a" 'r["job"]["message"]')"
fi
rm_cli cancel "$b" >/dev/null 2>&1

# ---- 2. a symbolic link under an allowed checkpoint root ----
ln -s "$root" "$state/shared/link"
c=$(submit --set training.steps=40 --set lr_schedule.decay_steps=35 --set checkpoint.interval_steps=20 \
  --set checkpoint.directory="$state/shared/link")
wait_until 60 "job $c did not finish" finished "$c"
message=$(job_field "$c" 'r["job"]["message"]')
if [ "$(job_state "$c")" = JOB_STATE_FAILED ] && grep -q "$state/shared/link.*symbolic link" <<<"$message"; then
  echo "PASS: checkpoint.directory through a symbolic link refused: $message"
else
  bad "job $c (checkpoint.directory through a link) is $(job_state "$c"): $message"
fi
if [ -e "$root/$c" ]; then bad "job $c wrote through the link: $(find "$root/$c" | head -5)"; else echo "PASS: nothing written through the link"; fi

# ---- 3. a symbolic link inside a data directory ----
fmnist=/usr/share/datasets/fashion-mnist
mkdir -p "$state/data/planted"
cp "$fmnist"/t10k-* "$fmnist"/train-labels-* "$state/data/planted/"
cp "$fmnist"/train-images-idx3-ubyte.gz "$state/outside/"
ln -s "$state/outside/train-images-idx3-ubyte.gz" "$state/data/planted/train-images-idx3-ubyte.gz"
d=$(submit --set training.steps=20 --set lr_schedule.decay_steps=15 --set data.path="$state/data/planted")
wait_until 60 "job $d did not finish" finished "$d"
message=$(job_field "$d" 'r["job"]["message"]')
if [ "$(job_state "$d")" = JOB_STATE_FAILED ] && grep -q "train-images-idx3-ubyte.gz.*symbolic link" <<<"$message"; then
  echo "PASS: a data file through a symbolic link refused: $message"
else
  bad "job $d (a data file through a link) is $(job_state "$d"): $message"
fi
if [ "$(job_field "$d" 'r["job"].get("restarts", 0)')" = 0 ]; then echo "PASS: no restart used"; else bad "job $d used restarts"; fi

[ $failures -eq 0 ] || fail "$failures check(s) failed"
echo "PASS: checkpoint and data paths"
