#!/usr/bin/env bash
# End to end: a local cluster on loopback (coordinator + 1 worker x 2 CPU
# slots, each with --metrics-listen) and a real Prometheus server (Debian's
# package; temp dir, loopback port, 1 s scrape and rule interval) configured
# from deploy/prometheus/prometheus.yml and its rule files. While a 2-rank job
# trains and checkpoints:
#   - `promtool check metrics` is clean on the coordinator's and the worker's
#     /metrics (with the rank's series present);
#   - every PromQL expression of every dashboard panel and every rule is
#     evaluated through Prometheus' HTTP API and returns data
#     (deploy/tests/check_promql.py; alerts: parse, and their selectors select;
#     annotations: evaluate), the GPU panels from a recorded DCGM exporter
#     scrape joined to a rank by UUID.
# The job is then cancelled; everything started here is stopped and reaped.
# Usage: observability_e2e_test.sh CLI COORDINATOR WORKER TRAINER SPEC
set -uo pipefail
for tool in prometheus promtool curl; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not found (scripts/install-deps.sh test installs prometheus and curl)"; exit 0; }
done
source tests/cluster_lib.sh  # cluster_init (state dir, gRPC address, cleanup trap), fail, rm_cli, wait_until
deploy=$(realpath deploy)
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# cluster_lib's start_coordinator/start_worker turn /metrics off: these keep it on.
cmetrics=127.0.0.1:$(free_port) wmetrics=127.0.0.1:$(free_port) prom=127.0.0.1:$(free_port)
# No GPU here: the GPU panels read recorded series. A DCGM exporter's scrape
# (deploy/tests/dcgm_sample.prom) as the dcgm job, and, once the job exists,
# what a CUDA rank's worker adds for it (ringmaster_rank_gpu_info with the
# sample GPU's UUID) as one more worker target. Served by static HTTP servers.
dcgm=127.0.0.1:$(free_port) gpuinfo=127.0.0.1:$(free_port)
mkdir -p "$state/dcgm" "$state/gpuinfo"
cp "$deploy/tests/dcgm_sample.prom" "$state/dcgm/metrics"
: >"$state/gpuinfo/metrics"
for served in "dcgm $dcgm" "gpuinfo $gpuinfo"; do
  set -- $served
  python3 -m http.server --bind 127.0.0.1 --directory "$state/$1" "${2##*:}" >"$state/$1.log" 2>&1 &
  pids+=($!)
done
"$coordinator" --listen "$addr" --state-dir "$state/coordinator" --metrics-listen "$cmetrics" \
  --heartbeat-interval 500ms >"$state/coordinator.log" 2>&1 &
pids+=($!)
"$worker" --coordinator "$addr" --cpu-slots 2 --state-dir "$state/w" --trainer "$trainer" --listen-address 127.0.0.1 \
  --node-name obs-node --metrics-listen "$wmetrics" >"$state/worker.log" 2>&1 &
pids+=($!)

# Prometheus, configured from the deploy files: the same jobs, relabelling and
# rule files, the targets pointed at this cluster, 1 s intervals.
mkdir -p "$state/prometheus/rules"
cp "$deploy"/prometheus/rules/*.yml "$state/prometheus/rules/"
sed -e "s|- targets: .*# COORDINATOR_TARGETS|- targets: ['$cmetrics']|" \
    -e "s|- targets: .*# WORKER_TARGETS|- targets: ['$wmetrics', '$gpuinfo']|" \
    -e "s|- targets: .*# DCGM_TARGETS|- targets: ['$dcgm']|" \
    -e 's|scrape_interval: 15s|scrape_interval: 1s|' -e 's|evaluation_interval: 15s|evaluation_interval: 1s|' \
    "$deploy/prometheus/prometheus.yml" >"$state/prometheus/prometheus.yml"
grep -q "$cmetrics" "$state/prometheus/prometheus.yml" && grep -q "$wmetrics" "$state/prometheus/prometheus.yml" ||
  fail "could not point deploy/prometheus/prometheus.yml at the cluster"
promtool check config "$state/prometheus/prometheus.yml" >/dev/null || fail "the derived configuration does not check"
prometheus --config.file="$state/prometheus/prometheus.yml" --storage.tsdb.path="$state/prometheus/data" \
  --web.listen-address="$prom" >"$state/prometheus.log" 2>&1 &
pids+=($!)

wait_nodes_ready 1
wait_until 30 "Prometheus did not become ready" curl -sf "http://$prom/-/ready" -o /dev/null

# A job that outlasts the checks: it is cancelled at the end.
out=$(rm_cli submit "$spec" --set resources.nodes=1 --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1 \
  --set parallelism.data=2 --set training.steps=100000 --set training.log_interval_steps=10 \
  --set checkpoint.interval_steps=10 --set checkpoint.keep=2 --set lr_schedule.warmup_steps=5 2>&1) || fail "submit: $out"
job=$(job_id_of "$out")
[ -n "$job" ] || fail "no job id in: $out"
echo "job $job submitted"
uuid=$(grep -o 'UUID="[^"]*"' "$deploy/tests/dcgm_sample.prom" | head -1)
printf '# TYPE ringmaster_rank_gpu_info gauge\nringmaster_rank_gpu_info{%s,job="%s",node="dgx-01",rank="0"} 1\n' \
  "$uuid" "$job" >"$state/gpuinfo/metrics"

# Rank series with a committed checkpoint on the worker's /metrics.
scrape() { curl -sf --max-time 5 "http://$1/metrics"; }
has_checkpoint() { scrape "$wmetrics" | grep "^ringmaster_rank_checkpoints_total{" | grep "job=\"$job\"" | grep -qE "rank=\"0\".*\} [1-9]"; }
wait_until 120 "no checkpoint of $job on the worker's /metrics" has_checkpoint
for endpoint in "coordinator $cmetrics" "worker $wmetrics"; do
  set -- $endpoint
  scrape "$2" >"$state/$1.metrics" || fail "scrape of the $1 failed"
  out=$(promtool check metrics <"$state/$1.metrics" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$out" ] || fail "promtool check metrics on the $1's /metrics (exit $rc): $out"
  echo "ok: promtool check metrics clean on the $1's /metrics ($(grep -c '^# TYPE' "$state/$1.metrics") families)"
done
grep -q "ringmaster_rank_step{job=\"$job\"" "$state/worker.metrics" || fail "the worker's /metrics has no rank series"
grep -q "ringmaster_job_state{job=\"$job\",state=\"running\"} 1" "$state/coordinator.metrics" ||
  fail "the coordinator does not show $job running"

# Enough history in Prometheus for the rate()s: 2 checkpoints, 20 s of steps.
prom_has() {
  python3 - "$prom" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = f"http://{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
sys.exit(0 if json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"] else 1)
PY
}
wait_until 120 "Prometheus did not collect 2 checkpoints and 20 s of steps of $job" \
  prom_has "ringmaster_rank_checkpoints_total{job=\"$job\"} >= 2 and on (job, rank) count_over_time(ringmaster_rank_step{job=\"$job\"}[1m]) >= 20"
expect_running() {  # polls a few times: a call may be slow on a busy machine
  for _ in $(seq 10); do job_in_state "$job" JOB_STATE_RUNNING && return 0; sleep 0.5; done
  rm_cli describe "$job"
  fail "$1"
}
expect_running "$job is not running"

python3 "$deploy/tests/check_promql.py" "http://$prom" "$job" "$deploy"/grafana/dashboards/*.json -- \
  "$deploy/prometheus/rules/recording.yml" "$deploy/prometheus/rules/alerts.yml" >"$state/check.txt" 2>&1
rc=$?
cat "$state/check.txt"
[ $rc -eq 0 ] || fail "dashboard and rule expressions did not all return data"
# The check can fail: for a job Prometheus never saw, the job panels have no data.
python3 "$deploy/tests/check_promql.py" "http://$prom" "j-never-submitted" "$deploy/grafana/dashboards/job-detail.json" -- \
  >"$state/check-negative.txt" 2>&1 && fail "check_promql.py passed for a job that does not exist"
grep -q "FAIL: .*no data" "$state/check-negative.txt" || fail "check_promql.py failed without naming the missing data"
# The job was running the whole time (the expressions saw live series).
expect_running "$job stopped during the checks"
rm_cli cancel "$job" >/dev/null 2>&1 || fail "cancel $job failed"
echo "PASS: promtool check metrics clean on both endpoints; every dashboard and rule expression returned data"
