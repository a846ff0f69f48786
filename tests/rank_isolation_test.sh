#!/usr/bin/env bash
# Ranks never run with the worker's privileges (issue #27 item 7), on a
# cluster-mode loopback cluster (TLS, users' tokens, the join token) whose
# worker runs as root and maps users to Unix accounts (--run-as owner:
# alice -> nobody, bob -> daemon):
#   - bob's job (the victim) trains as daemon;
#   - alice's job runs rank_probe in its rank's place, through the worker's
#     real launch path: it runs as nobody (no_new_privs, no capability, none
#     of root's groups) and the operating system refuses it (EACCES) the
#     worker's join token, its TLS key, its state directory, the victim's
#     rank.json, log, TMPDIR and checkpoints, and the worker's environment;
#     it reaches its own rank.json, its TMPDIR and the worker's agent socket;
#   - it then execs the real trainer, which trains, commits checkpoints
#     (written as nobody into the directory the worker made for it) and
#     succeeds.
# The binaries a rank runs are copied out of Bazel's runfiles (under /root,
# mode 0700) into a 0755 directory, as an operator installs them.
# Needs root (the worker must be able to become those accounts): prints
# "SKIP: why" and passes otherwise.
# Usage: rank_isolation_test.sh CLI COORDINATOR WORKER TRAINER SPEC PROBE DEV_CA
set -uo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: not root: the worker cannot start ranks as other accounts"
  exit 0
fi
for account in nobody daemon; do
  getent passwd "$account" >/dev/null || { echo "SKIP: this machine has no account '$account'"; exit 0; }
done
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5") probe=$(realpath "$6") dev_ca=$(realpath "$7")
chmod 0711 "$state"  # mktemp made it 0700: the run accounts reach bin/ and ckpt/ below it
bin=$state/bin ckpt=$state/ckpt
mkdir -m 0755 "$bin" && mkdir -m 0755 "$ckpt" || fail "cannot make $bin, $ckpt"
install -m 0755 "$trainer" "$bin/ringmaster-trainer" && install -m 0755 "$probe" "$bin/rank-probe" ||
  fail "cannot copy the trainer and the probe to $bin"

# --- cluster mode: TLS, users, the join token ----------------------------------
"$dev_ca" "$state/pki" >/dev/null || fail "dev-ca.sh failed"
alice_token=$(openssl rand -hex 24) bob_token=$(openssl rand -hex 24)
(
  umask 077
  printf '%s alice\n%s bob\n' "$alice_token" "$bob_token" >"$state/tokens"
  printf '%s\n' "$alice_token" >"$state/alice.token"
  printf '%s\n' "$bob_token" >"$state/bob.token"
  openssl rand -hex 24 >"$state/join-token"
)
printf '# user account\nalice nobody\nbob daemon\n' >"$state/accounts"
start_coordinator --tls-ca "$state/pki/ca.crt" --tls-cert "$state/pki/coordinator.crt" \
  --tls-key "$state/pki/coordinator.key" --token-file "$state/tokens" --join-token-file "$state/join-token" \
  --checkpoint-root "$ckpt"
run_as=(--run-as owner --run-as-map "$state/accounts")
# Read whole first: with pipefail, grep -q quitting early fails the pipeline
# (the worker's SIGPIPE) and would pass for "no --run-as".
if ! grep -q -- '--run-as' <<<"$("$worker" --help 2>&1)"; then
  echo "note: this worker has no --run-as: its ranks run as its own user (root)"
  run_as=()
fi
"$worker" --coordinator "$addr" --cpu-slots 2 --state-dir "$state/w" --trainer "$bin/rank-probe" \
  --listen-address 127.0.0.1 --node-name n1 --metrics-listen "" --tls-ca "$state/pki/ca.crt" \
  --tls-cert "$state/pki/worker.crt" --tls-key "$state/pki/worker.key" --join-token-file "$state/join-token" \
  "${run_as[@]}" >>"$state/n1.log" 2>&1 &
worker_pid=$!
pids+=("$worker_pid")
as() { local user=$1; shift; "$cli" --coordinator "$addr" --tls-ca "$state/pki/ca.crt" --token-file "$state/$user.token" "$@"; }
rm_cli() { as alice "$@"; }  # cluster_lib's helpers (wait_nodes_ready, job_field) as alice
wait_nodes_ready 1

small=(--set resources.nodes=1 --set resources.ranks_per_node=1 --set resources.cpus_per_rank=1
       --set parallelism.data=1 --set lr_schedule.warmup_steps=2 --set restart.max_restarts=0)

# --- bob's job, running ------------------------------------------------------------
out=$(as bob submit "$spec" "${small[@]}" --set training.steps=100000 --set training.log_interval_steps=1000 2>&1) ||
  fail "bob's submit failed: $out"
victim=$(job_id_of "$out")
[ -n "$victim" ] || fail "no job id in: $out"
# (a function: wait_until re-runs it at each poll; "$(...)" in its arguments
# would be read once, before the trainer starts)
victim_running() { [ -n "$(trainer_pids "$victim")" ]; }
wait_until 60 "bob's job $victim has no trainer running" victim_running
victim_pid=$(trainer_pids "$victim" | head -1)
victim_context=$(tr '\0' '\n' <"/proc/$victim_pid/cmdline" | grep -A1 -x -- --rank-context | tail -1)
victim_tmp=$(tr '\0' '\n' <"/proc/$victim_pid/environ" | grep '^TMPDIR=' | cut -d= -f2-)
[ -f "$victim_context" ] || fail "bob's rank.json $victim_context is not a file"
echo "bob's job $victim: rank 0 is pid $victim_pid, running as $(stat -c %U "/proc/$victim_pid"), context $victim_context"

# --- alice's job tries to read what is not hers ---------------------------------
cat >"$bin/probe-targets" <<EOF
join-token $state/join-token
tls-key $state/pki/worker.key
worker-state-dir $state/w
worker-environ /proc/$worker_pid/environ
victim-rank.json $victim_context
victim-log $state/w/jobs/$victim/gen-1/rank-0.log
victim-tmpdir ${victim_tmp:-$state/w/no-tmpdir-for-the-victim}
victim-checkpoints $ckpt/$victim
EOF
chmod 0644 "$bin/probe-targets"
out=$(timeout 300 "$cli" --coordinator "$addr" --tls-ca "$state/pki/ca.crt" --token-file "$state/alice.token" \
  submit "$spec" --wait "${small[@]}" --set training.steps=40 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=20 2>&1)
rc=$?
attacker=$(job_id_of "$out")
[ -n "$attacker" ] || fail "no job id in: $out"
as alice logs "$attacker" >"$state/attacker.txt" 2>&1 || fail "cannot read the logs of $attacker"
echo "--- what alice's rank saw:"
grep 'probe ' "$state/attacker.txt"
grep -q 'probe uid=' "$state/attacker.txt" || fail "the probe did not run in alice's rank"
for target in join-token tls-key worker-state-dir worker-environ victim-rank.json victim-log victim-tmpdir \
  victim-checkpoints; do
  grep -qE "probe read $target: EACCES$" "$state/attacker.txt" ||
    fail "alice's rank was not refused $target by the OS: $(grep "probe read $target:" "$state/attacker.txt")"
done
ids=$(grep -oE 'probe uid=.*' "$state/attacker.txt" | head -1)
grep -qE "uid=$(id -u nobody) euid=$(id -u nobody) gid=$(id -g nobody) groups=$(id -g nobody) " <<<"$ids" ||
  fail "alice's rank does not run as nobody with nobody's groups only: $ids"
grep -qE 'no_new_privs=1 cap_eff=0+ cap_prm=0+$' <<<"$ids" ||
  fail "alice's rank kept privileges: $ids"
for own in "own rank.json" "write TMPDIR" "connect agent socket"; do
  grep -qE "probe $own: OK$" "$state/attacker.txt" || fail "alice's rank cannot $own: $(grep "probe $own" "$state/attacker.txt")"
done
echo "PASS: alice's rank runs as nobody, and the OS refuses it the worker's secrets and bob's job's files"

# --- ...and it trains as any rank does --------------------------------------------
[ $rc -eq 0 ] || { echo "$out" | tail -5; fail "alice's job did not succeed (submit --wait exited $rc)"; }
as alice checkpoints "$attacker" 2>&1 | grep -qE '\b40\b' || fail "alice's job committed no checkpoint of step 40"
owner=$(stat -c %U "$ckpt/$attacker/gen-1") || fail "no checkpoint directory $ckpt/$attacker/gen-1"
[ "$owner" = nobody ] || fail "alice's checkpoints are owned by $owner, not nobody"
private=$(grep -oE 'probe TMPDIR=.*' "$state/attacker.txt" | cut -d= -f2- | xargs dirname)
[ "$(stat -c '%U %a' "$private")" = "nobody 700" ] ||
  fail "alice's job directory $private is $(stat -c '%U %a' "$private"), not nobody's with mode 700"
[ "$(stat -c %U "/proc/$victim_pid")" = daemon ] || fail "bob's rank does not run as daemon"
as bob cancel "$victim" >/dev/null 2>&1 || fail "bob cannot cancel $victim"
echo "PASS: alice's job trained and committed its checkpoints as nobody; bob's ran as daemon"
