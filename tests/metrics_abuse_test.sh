#!/usr/bin/env bash
# /healthz and /metrics under a slowloris (issue #27 item 5), on the real
# binaries: a coordinator and a worker on loopback, each with its metrics
# endpoint. slowloris.py holds 64 connections to each (half to /metrics,
# half to /healthz) that send one byte every half second and never finish
# their request, reopening any the server closes; meanwhile a fresh GET
# /healthz and GET /metrics to each daemon must answer 200 within 1 s, every
# quarter second for 8 s, and the server must close every stalled connection
# within 5 s of its opening (the whole-request deadline, 3 s, plus slack).
# Then both daemons still answer and stop cleanly on SIGTERM.
# Everything started here is stopped and reaped (cluster_lib.sh's cleanup).
# Usage: metrics_abuse_test.sh CLI COORDINATOR WORKER TRAINER SLOWLORIS
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"  # cluster_init (state dir, $addr, cleanup trap), fail, wait_until
cluster_init "$1" "$2" "$3" "$4"
slowloris=$(realpath "$5")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cport=$(free_port) wport=$(free_port)

"$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "127.0.0.1:$cport" \
  --heartbeat-interval 500ms >>"$state/coordinator.log" 2>&1 &
coordinator_pid=$!
pids+=("$coordinator_pid")
"$worker" --coordinator "$addr" --cpu-slots 1 --state-dir "$state/n1" --trainer "$trainer" \
  --listen-address 127.0.0.1 --node-name n1 --metrics-listen "127.0.0.1:$wport" >>"$state/n1.log" 2>&1 &
worker_pid=$!
pids+=("$worker_pid")
healthy() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$1/healthz")" = ok ]; }
wait_until 30 "the coordinator's /healthz did not answer" healthy "$cport"
wait_until 30 "the worker's /healthz did not answer" healthy "$wport"
wait_nodes_ready 1

out=$(timeout 60 python3 "$slowloris" --stalls 64 --interval 0.5 --seconds 8 --probe-every 0.25 --within 1 \
  --expect-closed-after 5 "127.0.0.1:$cport" "127.0.0.1:$wport" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "/healthz or /metrics did not answer within 1 s under 64 stalled connections (exit $rc)"
echo "ok: under 64 stalled connections each, the coordinator's and the worker's /healthz and /metrics answered within 1 s"

healthy "$cport" || fail "the coordinator's /healthz after the attack"
healthy "$wport" || fail "the worker's /healthz after the attack"
kill -0 "$coordinator_pid" 2>/dev/null || fail "the coordinator died"
kill -0 "$worker_pid" 2>/dev/null || fail "the worker died"
nodes_ready 1 || fail "the worker is no longer READY"
echo "ok: both daemons still serve and the node is READY"
echo "PASS: metrics and health endpoints withstand a slowloris"
