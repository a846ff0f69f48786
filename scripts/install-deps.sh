#!/usr/bin/env bash
# Installs every Debian package Ringmaster's build, tests and examples need.
# Idempotent: checks what is installed first, runs `apt-get update` at most once,
# and installs only what is missing. Usage: scripts/install-deps.sh [build|test|bench]...
# (no argument = build + test).
set -euo pipefail

build_pkgs=(
  bazel-bootstrap g++ pkg-config protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libgloo-dev libsqlite3-dev
  libcli11-dev libyaml-cpp-dev libcpp-httplib-dev libssl-dev zlib1g-dev libopenblas-dev
)
# What the tests and the examples read or run: promtool, the datasets, the corpus.
test_pkgs=(prometheus dataset-fashion-mnist bible-kjv bible-kjv-text iproute2 procps python3)
# Only the benchmarks compare against PyTorch on the CPU.
bench_pkgs=(python3-torch python3-numpy)

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(build test)
wanted=()
for g in "${groups[@]}"; do
  case "$g" in
    build) wanted+=("${build_pkgs[@]}") ;;
    test) wanted+=("${test_pkgs[@]}") ;;
    bench) wanted+=("${bench_pkgs[@]}") ;;
    *) echo "install-deps: unknown group '$g' (expected build, test or bench)" >&2; exit 2 ;;
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

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#wanted[@]} packages present"
  make_corpus
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# Package scripts must not start daemons (prometheus) on a build machine.
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
echo "install-deps: done"
