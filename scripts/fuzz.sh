#!/usr/bin/env bash
# Long fuzzing runs with libFuzzer (coverage feedback) and ASan/UBSan.
#
#   scripts/fuzz.sh TARGET [SECONDS] [-- LIBFUZZER_FLAGS...]
#   scripts/fuzz.sh list
#
# TARGET is one of fuzz/BUILD's fuzz_test names (spec_fuzzer,
# job_service_fuzzer, ...); SECONDS defaults to 60. The script builds the
# generated protobuf code with Bazel, then compiles the target's sources
# (the same files its Bazel target uses, from `bazel query`) with
# clang++ -fsanitize=fuzzer,address,undefined outside Bazel, against the
# system libraries (pkg-config), into $FUZZ_OUT/TARGET/ (default /tmp/ringmaster-fuzz;
# objects are kept and rebuilt only when a source is newer). It runs libFuzzer on a working copy
# of the checked-in seeds ($FUZZ_OUT/TARGET/corpus; new inputs go there, the
# seeds in fuzz/corpus/TARGET stay as they are); a crash, a hang (-timeout)
# or a leak leaves its input in $FUZZ_OUT/TARGET/ (crash-*, timeout-*,
# leak-*). To keep a finding: copy it into fuzz/corpus/TARGET/ after the
# fix, so the test suite replays it. Needs clang-14 and libclang-rt-14-dev
# (Debian 12), which scripts/install-deps.sh does not install: apt-get
# install clang-14 libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${CXX:-clang++-14}
if [ "${1:-}" = "list" ] || [ $# -lt 1 ]; then
  echo "usage: scripts/fuzz.sh TARGET [SECONDS] [-- LIBFUZZER_FLAGS...]"
  echo "targets:"; grep -o 'name = "[a-z_]*_fuzzer"' fuzz/BUILD | sed 's/name = "\(.*\)"/  \1/'
  exit 0
fi
target=$1; shift
seconds=60
if [ $# -gt 0 ] && [ "$1" != "--" ]; then seconds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
command -v "$CXX" >/dev/null || { echo "fuzz.sh: $CXX not found: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
grep -q "name = \"$target\"" fuzz/BUILD || { echo "fuzz.sh: no fuzz target '$target' in fuzz/BUILD" >&2; exit 2; }

out=${FUZZ_OUT:-/tmp/ringmaster-fuzz}/$target
mkdir -p "$out/obj" "$out/corpus"

# The generated code (.pb.cc/.pb.h) and the list of sources, from Bazel.
bazel build "//fuzz:${target}_lib" >&2
sources=$(bazel query "kind('source file', deps(//fuzz:${target}_lib))" 2>/dev/null |
  grep -v '^@' | grep '\.cc$' | sed 's|^//||; s|:|/|')
generated=$(bazel query "kind('generated file', deps(//fuzz:${target}_lib))" 2>/dev/null |
  grep -v '^@' | grep '\.pb\.cc$' | sed 's|^//|bazel-bin/|; s|:|/|')

modules="grpc++ protobuf spdlog fmt yaml-cpp sqlite3 libcrypto zlib cpp-httplib absl_status absl_statusor absl_strings
  absl_str_format absl_synchronization absl_time absl_flat_hash_map absl_flat_hash_set absl_random_random
  absl_hash absl_cleanup"
cflags="-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -I. -Ibazel-bin $(pkg-config --cflags $modules)"
libs="$(pkg-config --libs $modules) -lgrpc++_reflection -pthread"

for src in $sources $generated; do
  obj=$out/obj/$(echo "$src" | tr '/' '_').o
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then echo "$src $obj"; fi
done | CXX=$CXX CFLAGS=$(echo $cflags) xargs -r -P "$(nproc)" -n 2 sh -c 'echo "  CXX $0" >&2; $CXX $CFLAGS -c "$0" -o "$1"'
objects=()
for src in $sources $generated; do objects+=("$out/obj/$(echo "$src" | tr '/' '_').o"); done
echo "  LINK $out/$target" >&2
$CXX -fsanitize=fuzzer,address,undefined $(printf '%s\n' "${objects[@]}" | sort -u) $libs -o "$out/$target"

cp -n fuzz/corpus/"$target"/* "$out/corpus/" 2>/dev/null || true
# The requests inflated to megabytes (the test replays them without mutating).
cp -n fuzz/corpus/"$target".oversized/* "$out/corpus/" 2>/dev/null || true
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "fuzz.sh: running $target for ${seconds}s on $out/corpus" >&2
exec "$out/$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$out/" "$@" "$out/corpus"
