#!/usr/bin/env bash
# Installs every Debian package Ringmaster's build, tests and examples need.
# Idempotent: checks what is installed first, runs `apt-get update` at most once,
# and installs only what is missing. Usage: scripts/install-deps.sh [build|demo|test|bench|image|slurm]...
# (no argument = build + test; test includes image, which tests/image_test.sh uses,
# and slurm, which deploy/slurm_test.sh uses).
set -euo pipefail

build_pkgs=(
  bazel-bootstrap g++ pkg-config protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libgloo-dev libsqlite3-dev
  libcli11-dev libyaml-cpp-dev libcpp-httplib-dev libssl-dev zlib1g-dev libopenblas-dev prometheus-cpp-dev
  nlohmann-json3-dev
)
# What the tests and the examples read or run: promtool and prometheus, the
# datasets, the corpus; for deploy/: systemd-analyze, PyYAML, node (the
# Kubernetes schema check, below); zsh (the CLI's zsh completion is checked).
# python3-grpcio, -protobuf and -torch: the Python SDK (python/) and examples/pytorch_ddp.
test_pkgs=(prometheus dataset-fashion-mnist bible-kjv bible-kjv-text iproute2 procps python3 python3-yaml systemd
  nodejs curl zsh python3-grpcio python3-protobuf python3-torch)
# kubectl (for `kubectl kustomize`) and npm come from Debian only where no other
# install provides them (a vendor's kubectl package, or a nodejs that bundles npm).
optional_cmds=(kubectl:kubernetes-client npm:npm)
# scripts/build-image.sh: the image's root filesystem from Debian's archive,
# the OCI layout and archive; podman where containers can run.
image_pkgs=(mmdebstrap umoci skopeo podman)
# deploy/slurm_test.sh: a one-node Slurm (its own munged, slurmctld, slurmd)
# runs deploy/slurm/ringmaster-worker.sbatch.
slurm_pkgs=(munge slurmctld slurmd slurm-client)
# The README's main command: the build and the data set it trains on.
demo_pkgs=(dataset-fashion-mnist python3)
# Only the benchmarks compare against PyTorch on the CPU.
bench_pkgs=(python3-torch python3-numpy)

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(build test)
wanted=()
for g in "${groups[@]}"; do
  case "$g" in
    build) wanted+=("${build_pkgs[@]}") ;;
    demo) wanted+=("${demo_pkgs[@]}") ;;
    test)
      wanted+=("${test_pkgs[@]}" "${image_pkgs[@]}" "${slurm_pkgs[@]}")
      for entry in "${optional_cmds[@]}"; do
        command -v "${entry%%:*}" >/dev/null || wanted+=("${entry#*:}")
      done
      ;;
    bench) wanted+=("${bench_pkgs[@]}") ;;
    image) wanted+=("${image_pkgs[@]}") ;;
    slurm) wanted+=("${slurm_pkgs[@]}") ;;
    *) echo "install-deps: unknown group '$g' (expected build, demo, test, bench, image or slurm)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
# The GPT examples' default corpus: the King James Bible as plain text. Debian's
# bible-kjv-text stores it compressed; its `bible` program prints it.
corpus=/usr/local/share/ringmaster/kjv.txt
make_corpus() {
  [[ " ${wanted[*]} " == *" bible-kjv "* ]] || return 0
  [ -s "$corpus" ] && return 0
  "${sudo[@]}" mkdir -p "$(dirname "$corpus")"
  bible -f 'gen1:1-rev22:21' | "${sudo[@]}" tee "$corpus.tmp" >/dev/null
  "${sudo[@]}" mv "$corpus.tmp" "$corpus"
  echo "install-deps: wrote $corpus ($(wc -c <"$corpus") bytes)"
}

# deploy/kubernetes_test.sh validates the manifests offline against the
# Kubernetes OpenAPI schemas of the npm package kubernetes-models (docs/decisions.md).
# The Prometheus Operator's CRDs (PodMonitor, ServiceMonitor) come from its sibling package.
k8s_models_version=5.1.0
k8s_prom_models_version=6.0.0
k8s_models=/usr/local/share/ringmaster/npm
install_k8s_models() {
  [[ " ${wanted[*]} " == *" nodejs "* ]] || return 0
  grep -qs "\"version\": \"$k8s_models_version\"" "$k8s_models/node_modules/kubernetes-models/package.json" &&
    grep -qs "\"version\": \"$k8s_prom_models_version\"" \
      "$k8s_models/node_modules/@kubernetes-models/prometheus-operator/package.json" && return 0
  "${sudo[@]}" mkdir -p "$k8s_models"
  # Not fatal: without it deploy/kubernetes_test.sh skips, saying so.
  if "${sudo[@]}" npm install --silent --no-audit --no-fund --prefix "$k8s_models" \
    "kubernetes-models@$k8s_models_version" "@kubernetes-models/prometheus-operator@$k8s_prom_models_version"; then
    echo "install-deps: kubernetes-models $k8s_models_version and its prometheus-operator models in $k8s_models"
  else
    echo "install-deps: WARNING: npm could not install kubernetes-models; the Kubernetes schema check will skip" >&2
  fi
}

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#wanted[@]} packages present"
  make_corpus
  install_k8s_models
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# Package scripts must not start daemons (prometheus, munge, slurmctld, slurmd) on a build machine.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  made_policy=1
fi
trap '[ $made_policy -eq 1 ] && "${sudo[@]}" rm -f "$policy"' EXIT
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
make_corpus
install_k8s_models
echo "install-deps: done"
