#!/usr/bin/env bash
# Security on real processes, all on loopback (docs/security.md):
#   1. the coordinator refuses to start insecure beyond loopback, and TLS
#      without user/join tokens;
#   2. with TLS + tokens: a worker call without a client certificate, with
#      one from another CA, with an expired one, or without the join token
#      is UNAUTHENTICATED (the workers themselves log it too); a CLI call
#      without a token or with a wrong one is UNAUTHENTICATED; a CLI that
#      does not trust the server's CA reports a TLS handshake failure as
#      UNAUTHENTICATED;
#   3. a worker with mTLS and the join token registers, alice's 2-rank job
#      (Gloo rendezvous through the coordinator with the generation's
#      secret) succeeds and is owned by alice; bob cannot cancel alice's
#      job (PERMISSION_DENIED), alice can;
#   4. no token, join token, rendezvous secret or key, node credential appears in any log,
#      CLI output or /metrics.
# Everything started here is stopped (SIGTERM, then SIGKILL) and reaped
# (cluster_lib.sh's cleanup).
# Usage: security_test.sh CLI COORDINATOR WORKER TRAINER SPEC PROBE DEV_CA
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"  # cluster_init (state dir, $addr, cleanup trap), fail
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5") probe=$(realpath "$6") dev_ca=$(realpath "$7")
expect() {  # expect NAME TEXT PATTERN
  echo "$2" | grep -qE -- "$3" || fail "$1: expected /$3/ in: $2"
  echo "ok: $1"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- credentials ---------------------------------------------------------------
"$dev_ca" --expired "$state/ca" >/dev/null || fail "dev-ca.sh failed"
"$dev_ca" "$state/other" >/dev/null || fail "dev-ca.sh (other CA) failed"
alice_token=$(openssl rand -hex 24) bob_token=$(openssl rand -hex 24) admin_token=$(openssl rand -hex 24)
join_token=$(openssl rand -hex 24)
umask 077
bob_hash=$(printf '%s' "$bob_token" | sha256sum | cut -d' ' -f1)
printf '# test users\n%s alice\nsha256:%s bob\n%s root admin\n' "$alice_token" "$bob_hash" "$admin_token" \
  >"$state/tokens"
for u in alice bob admin; do v=${u}_token; printf '%s\n' "${!v}" >"$state/$u.token"; done
printf 'wrong-token-0123456789abcdef\n' >"$state/wrong.token"
printf '%s\n' "$join_token" >"$state/join.token"
umask 022

mport=$(free_port) wmport=$(free_port) port=${addr##*:}
tls_server=(--tls-ca "$state/ca/ca.crt" --tls-cert "$state/ca/coordinator.crt" --tls-key "$state/ca/coordinator.key")

# --- 1. refusals at startup ----------------------------------------------------
out=$(timeout 20 "$coordinator" --listen "0.0.0.0:$port" --state-dir "$state/refused" --metrics-listen "" 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "an insecure coordinator on 0.0.0.0 started"
expect "insecure non-loopback listen refused" "$out" "0.0.0.0:$port is not a loopback address: .*TLS"
out=$(timeout 20 "$coordinator" --listen "$addr" --state-dir "$state/refused" --metrics-listen "" "${tls_server[@]}" 2>&1)
[ $? -ne 0 ] || fail "a TLS coordinator without tokens started"
expect "TLS without tokens refused" "$out" "--token-file and --join-token-file are required"

# --- 2. the secure coordinator ---------------------------------------------------
"$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "127.0.0.1:$mport" \
  --heartbeat-interval 500ms --log-level debug "${tls_server[@]}" --token-file "$state/tokens" \
  --join-token-file "$state/join.token" >"$state/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "coordinator serving" "$state/coordinator.log" && break; sleep 0.1; done
grep -q "coordinator serving" "$state/coordinator.log" || fail "the coordinator did not start"

p() { "$probe" "$addr" "$@"; }
ca=$state/ca other=$state/other
expect "worker call without client certificate" "$(p register "$ca/ca.crt" - - "$state/join.token")" \
  "^UNAUTHENTICATED no client certificate"
expect "worker call with a certificate of another CA" \
  "$(p register "$ca/ca.crt" "$other/worker.crt" "$other/worker.key" "$state/join.token")" \
  "^UNAUTHENTICATED client certificate is not issued by the cluster CA"
expect "worker call with an expired certificate" \
  "$(p register "$ca/ca.crt" "$ca/worker-expired.crt" "$ca/worker-expired.key" "$state/join.token")" \
  "^UNAUTHENTICATED client certificate expired"
expect "worker call without join token" "$(p register "$ca/ca.crt" "$ca/worker.crt" "$ca/worker.key")" \
  "^UNAUTHENTICATED no join token"
expect "worker call with a wrong join token" \
  "$(p register "$ca/ca.crt" "$ca/worker.crt" "$ca/worker.key" "$state/wrong.token")" \
  "^UNAUTHENTICATED the join token is not valid"
expect "a user's token is no worker credential" \
  "$(p register "$ca/ca.crt" "$ca/worker.crt" "$ca/worker.key" - "$state/alice.token")" "^UNAUTHENTICATED"
expect "user call without token" "$(p list-jobs "$ca/ca.crt")" "^UNAUTHENTICATED no bearer token"
expect "user call with a token" "$(p list-jobs "$ca/ca.crt" - - - "$state/bob.token")" "^OK"

# The worker binary itself, with a bad certificate or no join token: refused.
w=0
for case in expired other nojoin untrusted; do
  w=$((w + 1))
  args=(--tls-ca "$ca/ca.crt" --tls-cert "$ca/worker.crt" --tls-key "$ca/worker.key" --join-token-file "$state/join.token")
  case $case in
    expired) args=(--tls-ca "$ca/ca.crt" --tls-cert "$ca/worker-expired.crt" --tls-key "$ca/worker-expired.key"
                   --join-token-file "$state/join.token") ;;
    other) args=(--tls-ca "$ca/ca.crt" --tls-cert "$other/worker.crt" --tls-key "$other/worker.key"
                 --join-token-file "$state/join.token") ;;
    nojoin) args=(--tls-ca "$ca/ca.crt" --tls-cert "$ca/worker.crt" --tls-key "$ca/worker.key") ;;
    untrusted) args=(--tls-ca "$other/ca.crt" --tls-cert "$other/worker.crt" --tls-key "$other/worker.key"
                     --join-token-file "$state/join.token") ;;  # does not trust the coordinator's CA
  esac
  "$worker" --coordinator "$addr" --cpu-slots 1 --state-dir "$state/bad$w" --trainer "$trainer" --run-as self \
    --listen-address 127.0.0.1 --node-name "bad-$case" --metrics-listen "" "${args[@]}" >"$state/bad-$case.log" 2>&1 &
  bad=$!
  for _ in $(seq 100); do grep -q UNAUTHENTICATED "$state/bad-$case.log" && break; sleep 0.1; done
  kill -TERM $bad 2>/dev/null; wait $bad 2>/dev/null
  why=$(grep -m1 UNAUTHENTICATED "$state/bad-$case.log")
  case $case in
    expired) expect "worker with an expired certificate refused" "$why" "UNAUTHENTICATED: client certificate expired" ;;
    other) expect "worker with another CA's certificate refused" "$why" "UNAUTHENTICATED: client certificate is not issued" ;;
    nojoin) expect "worker without join token refused" "$why" "UNAUTHENTICATED: no join token" ;;
    untrusted) expect "worker not trusting the coordinator's CA" "$why" "UNAUTHENTICATED: TLS handshake with the coordinator failed" ;;
  esac
done

# --- 3. a job with everything on -----------------------------------------------
# --run-as self: the trainer lies in Bazel's runfiles, which no other account
# may reach (tests/rank_isolation_test.sh runs ranks as other accounts).
"$worker" --coordinator "$addr" --cpu-slots 2 --state-dir "$state/w1" --trainer "$trainer" --run-as self \
  --listen-address 127.0.0.1 --node-name node1 --metrics-listen "127.0.0.1:$wmport" --log-level debug \
  --tls-ca "$ca/ca.crt" --tls-cert "$ca/worker.crt" --tls-key "$ca/worker.key" \
  --join-token-file "$state/join.token" >"$state/worker.log" 2>&1 &
pids+=($!)
rm_cli() { "$cli" --coordinator "$addr" --tls-ca "$ca/ca.crt" "$@"; }
for _ in $(seq 150); do
  [ "$(rm_cli --token-file "$state/alice.token" nodes 2>/dev/null | grep -c READY)" -ge 1 ] && break
  sleep 0.2
done
[ "$(rm_cli --token-file "$state/alice.token" nodes 2>/dev/null | grep -c READY)" -ge 1 ] || fail "the worker did not register"
echo "ok: worker with mTLS and join token registered"
[ "$(stat -c %a "$state/w1")" = 700 ] || fail "worker state dir is $(stat -c %a "$state/w1"), not 700"
[ "$(stat -c %a "$state/w1/agent.sock")" = 600 ] || fail "agent socket is $(stat -c %a "$state/w1/agent.sock")"
echo "ok: worker state dir 0700, trainers' socket 0600"

out=$(HOME=$state/nohome rm_cli jobs 2>&1)
expect "CLI without token" "$out" "UNAUTHENTICATED"
out=$(rm_cli --token-file "$state/wrong.token" jobs 2>&1)
expect "CLI with a wrong token" "$out" "bearer token is not valid.*UNAUTHENTICATED"
out=$("$cli" --coordinator "$addr" --tls-ca "$other/ca.crt" --token-file "$state/alice.token" jobs 2>&1)
expect "CLI that does not trust the server's CA" "$out" "TLS handshake with the coordinator at $addr failed.*UNAUTHENTICATED"
out=$("$cli" --coordinator "localhost:$port" --token-file "$state/alice.token" jobs 2>&1)
[ $? -ne 0 ] || fail "a plaintext CLI talked to the TLS coordinator"
echo "ok: plaintext CLI cannot talk to the TLS coordinator ($(echo "$out" | head -1))"

out=$(timeout 300 env RINGMASTER_TOKEN_FILE="$state/alice.token" "$cli" --coordinator "$addr" --tls-ca "$ca/ca.crt" \
  submit "$spec" --wait --set resources.nodes=1 --set resources.ranks_per_node=2 \
  --set resources.cpus_per_rank=1 --set parallelism.data=2 --set training.steps=12 \
  --set lr_schedule.warmup_steps=2 --set training.log_interval_steps=4 2>&1)
rc=$?
echo "$out" | tail -3
[ $rc -eq 0 ] || fail "alice's 2-rank job did not succeed (exit $rc)"
job=$(echo "$out" | grep -oE '\bj-[A-Za-z0-9-]+' | head -1)
[ -n "$job" ] || fail "no job id in: $out"
owner=$(rm_cli --token-file "$state/bob.token" -o json describe "$job" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["job"].get("owner",""))')
[ "$owner" = alice ] || fail "job $job is owned by '$owner', not alice"
echo "ok: alice's 2-rank job $job succeeded with TLS, tokens and the rendezvous secret; owner alice"

out=$(rm_cli --token-file "$state/alice.token" submit "$spec" --set training.steps=100000 2>&1) || fail "submit: $out"
long=$(echo "$out" | grep -oE '\bj-[A-Za-z0-9-]+' | head -1)
out=$(rm_cli --token-file "$state/bob.token" cancel "$long" 2>&1)
[ $? -ne 0 ] || fail "bob cancelled alice's job"
expect "bob cancels alice's job" "$out" "belongs to alice.*PERMISSION_DENIED"
out=$(rm_cli --token-file "$state/alice.token" cancel "$long" 2>&1) || fail "alice cannot cancel her job: $out"
echo "ok: alice cancels her own job"

# --- 4. no secret anywhere --------------------------------------------------------
curl -s "http://127.0.0.1:$mport/metrics" >"$state/coordinator-metrics.txt" || fail "no coordinator /metrics"
curl -s "http://127.0.0.1:$wmport/metrics" >"$state/worker-metrics.txt" || fail "no worker /metrics"
grep -q ringmaster_ "$state/coordinator-metrics.txt" || fail "empty coordinator /metrics"
key=$(cat "$state/coordinator/rendezvous.key")
secret=$(python3 -c 'import hmac,hashlib,sys; print(hmac.new(bytes.fromhex(sys.argv[1]), f"{sys.argv[2]}\n1".encode(), hashlib.sha256).hexdigest())' "$key" "$job")
node_credential=$(cat "$state/w1/node-credential")
[ "$(stat -c %a "$state/w1/node-credential")" = 600 ] || fail "the node credential file is not 600"
files=("$state"/*.log "$state"/*-metrics.txt)
while IFS= read -r f; do files+=("$f"); done < <(find "$state/w1" "$state/coordinator/logs" -type f -name '*.log' 2>/dev/null)
echo "checking ${#files[@]} logs and /metrics outputs for secrets"
for name in alice_token bob_token admin_token join_token key secret node_credential; do
  if grep -lF "${!name}" "${files[@]}"; then fail "the $name appears in the files above"; fi
done
if grep -l "PRIVATE KEY" "${files[@]}"; then fail "a private key appears in the files above"; fi
echo "ok: no token, join token, rendezvous key/secret, node credential or private key in logs or /metrics"
echo "PASS"
