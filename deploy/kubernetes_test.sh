#!/usr/bin/env bash
# deploy/kubernetes: `kubectl kustomize` builds it and its overlays
# (example-secrets, prometheus-operator), and every object they yield passes an
# offline schema check against Kubernetes' OpenAPI schemas (npm package
# kubernetes-models and its prometheus-operator models, installed by
# scripts/install-deps.sh test; see docs/decisions.md). Then what the manifests
# promise. The default build: no Secret, no :latest (the images are tagged with
# the version the binaries report), IPC_LOCK and an RDMA device on the worker,
# /dev/shm in memory, every probe of the coordinator a gRPC health check on
# its plaintext health listener (--health-listen, admitted by its
# NetworkPolicy) and every probe of the worker on /healthz of its metrics
# port, service accounts without API tokens, a PodDisruptionBudget for the
# coordinator and NetworkPolicies. With the example Secrets: a coordinator
# StatefulSet with a state volume claim, a worker DaemonSet with GPUs, host
# networking, the ReadWriteMany checkpoint volume and TLS Secrets behind the
# flags, and scrape ports that match deploy/prometheus/prometheus-kubernetes.yml;
# given the binaries, that every flag the manifests pass exists.
# Usage: kubernetes_test.sh [COORDINATOR WORKER]
set -uo pipefail
models=${RINGMASTER_K8S_MODELS:-/usr/local/share/ringmaster/npm/node_modules}
skip() { echo "SKIP: $* (scripts/install-deps.sh test installs it)"; exit 0; }
command -v kubectl >/dev/null || skip "kubectl not found (Debian package kubernetes-client)"
command -v node >/dev/null || skip "node not found (Debian package nodejs)"
[ -f "$models/kubernetes-models/package.json" ] || skip "npm package kubernetes-models not in $models"
py=""
for p in /usr/bin/python3 python3; do "$p" -c 'import yaml' 2>/dev/null && { py=$p; break; }; done
[ -n "$py" ] || skip "no python3 with PyYAML (Debian package python3-yaml)"

tmp=$(mktemp -d /tmp/rm-k8s-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# A real copy: kustomize refuses files that are symlinks out of its root (Bazel's runfiles).
cp -rL deploy/kubernetes "$tmp/kubernetes"
build() {  # build DIR NAME: kustomize, convert to JSON, schema-check
  kubectl kustomize "$tmp/$1" >"$tmp/$2.yaml" 2>"$tmp/kustomize.err"
  local rc=$?
  if [ $rc -ne 0 ] || [ -s "$tmp/kustomize.err" ]; then echo "FAIL: kubectl kustomize $1 (exit $rc):"; cat "$tmp/kustomize.err"; exit 1; fi
  "$py" deploy/tests/k8s_to_json.py <"$tmp/$2.yaml" >"$tmp/$2.json" || { echo "FAIL: $1: the output is not YAML"; exit 1; }
  node deploy/tests/validate_k8s.mjs "$models" <"$tmp/$2.json" >"$tmp/validate.out" 2>&1 ||
    { cat "$tmp/validate.out"; echo "FAIL: $1: schema check"; exit 1; }
  echo "ok: kubectl kustomize deploy/$1: $(grep -c '^kind:' "$tmp/$2.yaml") objects pass the schema check"
}
build kubernetes default
build kubernetes/overlays/example-secrets all
build kubernetes/overlays/prometheus-operator monitors
# The version the binaries report (given them), else the one they are built with.
if [ $# -ge 1 ]; then
  version=$("$1" --version | awk '{print $2}')
else
  version=$(sed -n 's/.*kVersion\[\] = "\(.*\)";/\1/p' common/cli_flags.h)
fi
[ -n "$version" ] || { echo "FAIL: no version (ringmaster-coordinator --version, common/cli_flags.h)"; exit 1; }

"$py" - "$tmp/default.json" "$tmp/monitors.json" "$version" <<'PY' || exit 1
import json, sys
objs = json.load(open(sys.argv[1]))
monitors = json.load(open(sys.argv[2]))
version = sys.argv[3]
by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
errors = []
def need(cond, what):
    if not cond: errors.append(what)
need(not any(o["kind"] == "Secret" for o in objs), "no Secret in the default kustomization")
ss = by[("StatefulSet", "ringmaster-coordinator")]
ds = by[("DaemonSet", "ringmaster-worker")]
for o, name in ((ss, "coordinator"), (ds, "worker")):
    pod = o["spec"]["template"]["spec"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        need(c["image"] == f"ringmaster:{version}", f"{name}/{c['name']}: image ringmaster:{version}, got {c['image']}")
    c = pod["containers"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if name == "coordinator":  # gRPC health on the health listener (the gRPC port needs TLS)
            port = c.get(probe, {}).get("grpc", {}).get("port")
            need(port is not None and f"--health-listen=0.0.0.0:{port}" in c["args"] and
                 any(p["containerPort"] == port for p in c["ports"]),
                 f"{name}: {probe} a gRPC check on --health-listen's port, got {c.get(probe)}")
        else:  # no gRPC port: /healthz on the metrics port
            get = c.get(probe, {}).get("httpGet", {})
            need(get.get("path") == "/healthz" and f"--metrics-listen=0.0.0.0:{get.get('port')}" in c["args"],
                 f"{name}: {probe} on /healthz of the metrics port, got {c.get(probe)}")
    sa = by.get(("ServiceAccount", pod.get("serviceAccountName", "")))
    need(sa is not None and sa.get("automountServiceAccountToken") is False, f"{name}: its own ServiceAccount, no token")
    need(pod.get("automountServiceAccountToken") is False, f"{name}: pod mounts no API token")
    need(c["securityContext"].get("allowPrivilegeEscalation") is False, f"{name}: no privilege escalation")
    need(c["securityContext"]["capabilities"]["drop"] == ["ALL"], f"{name}: every capability dropped")
    policy = by.get(("NetworkPolicy", f"ringmaster-{name}"))
    need(policy is not None and policy["spec"]["podSelector"]["matchLabels"] == o["spec"]["selector"]["matchLabels"],
         f"{name}: a NetworkPolicy selecting its pods")
need(not any(k == "Role" or k == "ClusterRole" or k.endswith("Binding") for k, _ in by), "no RBAC (nothing calls the API)")
w = ds["spec"]["template"]["spec"]["containers"][0]
need(w["securityContext"]["capabilities"].get("add") == ["IPC_LOCK", "SETUID", "SETGID", "CHOWN", "FOWNER", "KILL"],
     "worker: IPC_LOCK, and what starting ranks as other accounts needs (SETUID, SETGID, CHOWN, FOWNER, KILL), "
     f"nothing more; got {w['securityContext']['capabilities'].get('add')}")
need(any(a.startswith("--run-as=") and a not in ("--run-as=self", "--run-as=root", "--run-as=0")
         for a in w["args"]), "worker: ranks run as an unprivileged account (--run-as)")
need(any(r.startswith("rdma/") for r in w["resources"]["limits"]), "worker: an RDMA device resource")
# A rolling update drains each node before its worker stops (SIGUSR1), with
# time for the drain's checkpoint (the coordinator's 5-minute patience).
pre_stop = " ".join(w.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", []))
need("kill -USR1 1" in pre_stop, "worker: a preStop hook that drains the node (SIGUSR1 to the worker)")
need(ds["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30) >= 360,
     "worker: terminationGracePeriodSeconds covers the drain")
shm = next((v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "shm"), {})
need(shm.get("emptyDir", {}).get("medium") == "Memory", "worker: /dev/shm memory-backed")
need(any(m["mountPath"] == "/dev/shm" and m["name"] == "shm" for m in w["volumeMounts"]), "worker: /dev/shm mounted")
pdb = next((o for o in objs if o["kind"] == "PodDisruptionBudget"), None)
need(pdb is not None and pdb["spec"]["selector"]["matchLabels"] == ss["spec"]["selector"]["matchLabels"],
     "a PodDisruptionBudget for the coordinator")
cp = by.get(("NetworkPolicy", "ringmaster-coordinator"))
if cp:
    health = ss["spec"]["template"]["spec"]["containers"][0]["livenessProbe"].get("grpc", {}).get("port")
    need(any(p["port"] == health for r in cp["spec"]["ingress"] if "from" not in r for p in r["ports"]),
         "coordinator NetworkPolicy: the health port open to the kubelet's probes")
    grpc = next(r for r in cp["spec"]["ingress"] if any(p["port"] == 50051 for p in r["ports"]))
    need(any(f.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component") == "worker" for f in grpc["from"]),
         "coordinator gRPC: from the workers")
    need(any(f.get("podSelector", {}).get("matchLabels", {}).get("ringmaster.io/client") == "true" for f in grpc["from"]),
         "coordinator gRPC: from CLI pods")
kinds = sorted(o["kind"] for o in monitors if o["apiVersion"].startswith("monitoring.coreos.com/"))
need(kinds == ["PodMonitor", "ServiceMonitor", "ServiceMonitor"],
     f"prometheus-operator: a PodMonitor and ServiceMonitors (coordinator, DCGM exporter), got {kinds}")
for m in monitors:
    if m["kind"] == "ServiceMonitor" and m["metadata"]["name"] == "nvidia-dcgm-exporter":
        need(m["spec"]["endpoints"][0]["relabelings"][0] == {"targetLabel": "job", "replacement": "dcgm"},
             "DCGM ServiceMonitor: scrape job dcgm, as the static configs name it")
    elif m["kind"] == "ServiceMonitor":
        svc = by.get(("Service", "ringmaster-coordinator-metrics"))
        need(m["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(), "ServiceMonitor selects the metrics Service")
        need(m["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"], "ServiceMonitor: the metrics port by name")
    if m["kind"] == "PodMonitor":
        need(m["spec"]["selector"]["matchLabels"] == ds["spec"]["selector"]["matchLabels"], "PodMonitor selects the workers")
        need(m["spec"]["podMetricsEndpoints"][0]["port"] in [p["name"] for p in w["ports"]], "PodMonitor: the workers' metrics port by name")
    if m["apiVersion"].startswith("monitoring.coreos.com/"):
        need(m["metadata"].get("namespace") == "ringmaster", f"{m['kind']}: namespace ringmaster")
if errors:
    print("FAIL: " + "; ".join(errors)); sys.exit(1)
print(f"ok: no Secret, images ringmaster:{version}, probes on gRPC health (coordinator) and /healthz (worker), no API tokens, IPC_LOCK + RDMA + memory /dev/shm + a draining preStop on the worker, a coordinator PDB, NetworkPolicies, the operator's monitors (DCGM too)")
PY

# The check can fail: a port that is not a number, a DaemonSet without a selector.
"$py" - "$tmp/all.json" >"$tmp/broken.json" <<'PY'
import json, sys
objs = json.load(open(sys.argv[1]))
ds = next(o for o in objs if o["kind"] == "DaemonSet")
del ds["spec"]["selector"]
ss = next(o for o in objs if o["kind"] == "StatefulSet")
ss["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "grpc"
print(json.dumps([ds, ss]))
PY
out=$(node deploy/tests/validate_k8s.mjs "$models" <"$tmp/broken.json" 2>&1) && { echo "FAIL: broken objects passed: $out"; exit 1; }
grep -q 'selector' <<<"$out" && grep -q 'containerPort' <<<"$out" || { echo "FAIL: errors not named: $out"; exit 1; }
echo "ok: broken objects are rejected"

"$py" - "$tmp/all.json" deploy/prometheus/prometheus-kubernetes.yml deploy/prometheus/prometheus-kubernetes-sd.yml <<'PY' || exit 1
import json, re, sys, yaml
objs = json.load(open(sys.argv[1]))
prom = yaml.safe_load(open(sys.argv[2]))
sd = yaml.safe_load(open(sys.argv[3]))["scrape_configs"][0]  # Debian's promtool cannot check it: check what it selects
by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
errors = []
def need(cond, what):
    if not cond: errors.append(what)
for o in objs:
    need(o["metadata"].get("namespace") == "ringmaster" or o["kind"] == "Namespace", f"{o['kind']}/{o['metadata']['name']}: not in namespace ringmaster")
ss = by.get(("StatefulSet", "ringmaster-coordinator"))
ds = by.get(("DaemonSet", "ringmaster-worker"))
need(ss and ds, "coordinator StatefulSet and worker DaemonSet")
if ss and ds:
    claims = [c["metadata"]["name"] for c in ss["spec"].get("volumeClaimTemplates", [])]
    mounts = {m["name"]: m["mountPath"] for m in ss["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    args = ss["spec"]["template"]["spec"]["containers"][0]["args"]
    need("state" in claims and mounts.get("state") == "/var/lib/ringmaster/coordinator", "the coordinator's state on a claimed volume")
    need("--state-dir=/var/lib/ringmaster/coordinator" in args, "--state-dir on the claimed volume")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    need(pod.get("hostNetwork") is True, "worker hostNetwork")
    need("nvidia.com/gpu" in c["resources"]["limits"], "worker requests nvidia.com/gpu")
    pvc = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    claim = by.get(("PersistentVolumeClaim", pvc.get("checkpoints", "")))
    need(claim and claim["spec"]["accessModes"] == ["ReadWriteMany"], "the shared checkpoint PVC is ReadWriteMany")
    for o, name in ((ss, "coordinator"), (ds, "worker")):
        p = o["spec"]["template"]["spec"]
        secrets = [v["secret"]["secretName"] for v in p["volumes"] if "secret" in v]
        need(secrets and all(("Secret", s) in by for s in secrets), f"{name}: Secret mounted and defined")
        keys = set(by[("Secret", secrets[0])].get("stringData", {})) if secrets and ("Secret", secrets[0]) in by else set()
        file_args = [a for a in p["containers"][0]["args"] if a.startswith(("--tls-", "--token-file", "--join-token-file"))]
        need(len([a for a in file_args if a.startswith("--tls-")]) == 3, f"{name}: --tls-ca, --tls-cert, --tls-key")
        need(any(a.startswith("--join-token-file=") for a in file_args), f"{name}: --join-token-file")
        mount = next(m["mountPath"] for m in p["containers"][0]["volumeMounts"] if m["name"] == "secrets")
        for a in file_args:
            path = a.split("=", 1)[1]
            need(path.startswith(mount + "/") and path[len(mount) + 1:] in keys, f"{name}: {a} names a key of its Secret")
        ann = o["spec"]["template"]["metadata"]["annotations"]
        job = next(j for j in prom["scrape_configs"] if j["job_name"] == f"ringmaster-{name}")
        port = job["dns_sd_configs"][0]["port"]
        need(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(port), f"{name}: scrape annotations on port {port}")
        need(any(a == f"--metrics-listen=0.0.0.0:{port}" for a in p["containers"][0]["args"]), f"{name}: --metrics-listen on port {port}")
        svc_name = job["dns_sd_configs"][0]["names"][0].split(".")[0]
        svc = by.get(("Service", svc_name))
        need(svc and svc["spec"].get("clusterIP") == "None" and svc["spec"]["ports"][0]["port"] == port, f"headless Service {svc_name} on port {port}")
def relabel(source):
    return next(r for r in sd["relabel_configs"] if r.get("source_labels") == [source])
need(sd["kubernetes_sd_configs"][0]["namespaces"]["names"] == ["ringmaster"], "-sd: the namespace ringmaster")
for o in (ss, ds):
    meta = o["spec"]["template"]["metadata"]
    name_rule = relabel("__meta_kubernetes_pod_label_app_kubernetes_io_name")
    scrape_rule = relabel("__meta_kubernetes_pod_annotation_prometheus_io_scrape")
    job_rule = relabel("__meta_kubernetes_pod_label_app_kubernetes_io_component")
    comp = meta["labels"]["app.kubernetes.io/component"]
    need(re.fullmatch(name_rule["regex"], meta["labels"]["app.kubernetes.io/name"]), f"-sd keeps the {comp} pods by name")
    need(re.fullmatch(scrape_rule["regex"], meta["annotations"]["prometheus.io/scrape"]), f"-sd keeps the {comp} pods by annotation")
    job = job_rule["replacement"].replace("$1", comp)
    need(job in [j["job_name"] for j in prom["scrape_configs"]], f"-sd names the {comp}'s scrape job {job} like prometheus-kubernetes.yml")
if errors:
    print("FAIL: " + "; ".join(errors)); sys.exit(1)
print("ok: StatefulSet state claim, DaemonSet GPUs/hostNetwork/RWX checkpoints, Secrets behind the TLS and token flags, scrape ports and pod discovery match deploy/prometheus")
PY
# Every flag the containers pass is one the binary has (given the binaries).
if [ $# -ge 2 ]; then
  for pair in "coordinator:$1" "worker:$2"; do
    name=${pair%%:*} bin=$(realpath "${pair#*:}")
    known=$("$bin" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    for flag in $(grep -oE -- '^ *- --[a-z][a-z-]*' "deploy/kubernetes/base/"*"$name"*.yaml | grep -oE -- '--[a-z-]+'); do
      grep -qx -- "$flag" <<<"$known" || { echo "FAIL: the $name's manifest passes $flag, which $(basename "$bin") does not have"; exit 1; }
    done
  done
  echo "ok: every flag in the manifests is one the binaries accept"
fi
echo "PASS: deploy/kubernetes and its overlays build and pass the schema check"
