#!/usr/bin/env bash
# Packs what running the GPU tests and benchmarks on a bare GPU machine needs
# into OUTDIR (git-ignored: gpu-pack/ by default):
#   bin/    ringmaster-trainer, -coordinator, -worker, ringmaster (CLI), every
#           cc_test tagged "gpu", and the GPU benchmarks (bench targets tagged
#           "gpu"), built with CUDA (sm_80, sm_90 + PTX) and stripped;
#   lib/    every shared library ldd resolves for them that such a machine
#           lacks (Debian's gRPC, protobuf, Abseil, spdlog, fmt, yaml-cpp,
#           sqlite, gloo, openblas, gtest, ... and libstdc++), but not glibc
#           and not the CUDA libraries (cudart, cuBLAS(Lt), cuDNN, NCCL): the
#           machine has those from PyTorch's wheels and gpu-run.sh puts them
#           on LD_LIBRARY_PATH;
#   tests/  the GPU training test script, examples/ the job specs,
#   data/   Fashion-MNIST and the KJV text the examples train on;
#   MANIFEST the targets packed and the tests to run.
# Usage: scripts/gpu-pack.sh [OUTDIR]   (run from the repository root)
set -euo pipefail

out=${1:-gpu-pack}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fashion=/usr/share/datasets/fashion-mnist
kjv=/usr/local/share/ringmaster/kjv.txt

binaries=(//engine:ringmaster-trainer //coordinator:ringmaster-coordinator //worker:ringmaster-worker
          //client:ringmaster)
mapfile -t gpu_tests < <(bazel query --output=label 'kind("cc_test", attr(tags, "\bgpu\b", //...))' 2>/dev/null)
mapfile -t gpu_benches < <(bazel query --output=label 'kind("cc_binary", attr(tags, "\bgpu\b", //bench/...))' 2>/dev/null || true)
if [[ ${#gpu_tests[@]} -eq 0 ]]; then
  echo "gpu-pack: no cc_test tagged gpu: is CUDA detected in this build (not --config=cpu)?" >&2
  exit 1
fi
echo "gpu-pack: building ${#binaries[@]} binaries, ${#gpu_tests[@]} GPU tests, ${#gpu_benches[@]} GPU benches (CUDA)"
bazel build "${binaries[@]}" "${gpu_tests[@]}" "${gpu_benches[@]}"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests" "$out/examples" "$out/data/fashion-mnist"

# bazel-bin path of a label: //pkg:name -> bazel-bin/pkg/name
path_of() { local l=${1#//}; echo "bazel-bin/${l%%:*}/${l#*:}"; }
packed=()
for label in "${binaries[@]}" "${gpu_tests[@]}" "${gpu_benches[@]}"; do
  src=$(path_of "$label")
  name=$(basename "$src")
  # Test binaries of different packages may share a name: prefix the package.
  if [[ " ${gpu_tests[*]} " == *" $label "* ]]; then
    pkg=${label#//}; pkg=${pkg%%:*}; name="${pkg//\//_}__$name"
  fi
  install -m 0755 "$src" "$out/bin/$name"
  strip --strip-unneeded "$out/bin/$name"
  packed+=("$name")
done

# Libraries a bare GPU machine has: glibc's, the kernel's vDSO, the driver,
# and the CUDA libraries PyTorch's wheels carry.
provided='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink)\.so'
missing=0
for b in "$out"/bin/*; do
  while read -r lib arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then echo "gpu-pack: $b: $lib not found here" >&2; missing=1; continue; fi
    [[ "$lib" =~ $provided ]] && continue
    [[ -e "$out/lib/$lib" ]] || { cp -L "$path" "$out/lib/$lib"; strip --strip-unneeded "$out/lib/$lib" 2>/dev/null || true; }
  done < <(ldd "$b")
done
[[ $missing -eq 0 ]] || exit 1

install -m 0755 tests/gpu_training_test.sh "$out/tests/"
install -m 0755 scripts/gpu-run.sh "$out/"
cp examples/*.yaml "$out/examples/"
cp "$fashion"/*.gz "$out/data/fashion-mnist/"
cp "$kjv" "$out/data/kjv.txt"
{
  echo "# ringmaster GPU pack, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  for n in "${packed[@]}"; do echo "bin $n"; done
  for l in "${gpu_tests[@]}"; do echo "test $l"; done
  for l in "${gpu_benches[@]}"; do echo "bench $l"; done
} >"$out/MANIFEST"

size=$(du -sb "$out" | cut -f1)
echo "gpu-pack: $out holds $(ls "$out/bin" | wc -l) binaries and $(ls "$out/lib" | wc -l) libraries," \
  "$((size / 1024 / 1024)) MiB ($size bytes)"
if ((size > 64 * 1024 * 1024)); then
  echo "gpu-pack: over the 64 MiB limit" >&2
  exit 1
fi
