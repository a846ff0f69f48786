#!/usr/bin/env bash
# Packs what running the GPU tests and benchmarks on a bare GPU machine needs
# into OUTDIR (git-ignored: gpu-pack/ by default). To stay under 64 MiB, all
# but the (already gzipped) Fashion-MNIST files and gpu-run.sh travel in
# OUTDIR/payload.tar.xz, which gpu-run.sh unpacks; the payload holds:
#   bin/    ringmaster-trainer, -coordinator, -worker, ringmaster (CLI),
#           gpu-versions (the CUDA driver and libraries actually loaded, which
#           gpu-run.sh prints first), every cc_test tagged "gpu", and the GPU
#           benchmarks (cc_binary targets tagged "gpu"), built with CUDA
#           (sm_80, sm_90 + PTX) and stripped;
#   lib/    every shared library ldd resolves for them that such a machine
#           lacks (Debian's gRPC, protobuf, Abseil, spdlog, fmt, yaml-cpp,
#           sqlite, gloo, openblas, gtest, ... and libstdc++), but not glibc
#           and not the CUDA libraries (cudart, cuBLAS(Lt), cuDNN, NCCL): the
#           machine has those from PyTorch's wheels and gpu-run.sh puts them
#           on LD_LIBRARY_PATH;
#   tests/  the GPU training test script, examples/ the job specs,
#   bench/  bench/gpu_vs_pytorch.sh, its GPT-2 spec and the PyTorch twins
#           (bench/reference/*.py) it runs beside ours,
#   data/   the KJV text the GPT example trains on (OUTDIR/data/fashion-mnist
#           beside the payload: the CNN's dataset);
#   MANIFEST the targets packed and the tests to run (also beside the payload).
# Usage: scripts/gpu-pack.sh [OUTDIR]   (run from the repository root)
set -euo pipefail

out=${1:-gpu-pack}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fashion=/usr/share/datasets/fashion-mnist
kjv=/usr/local/share/ringmaster/kjv.txt

binaries=(//engine:ringmaster-trainer //coordinator:ringmaster-coordinator //worker:ringmaster-worker
          //client:ringmaster //engine/tools:checkpoint-diff //engine/gpu:gpu-versions)
mapfile -t gpu_tests < <(bazel query --output=label 'kind("cc_test", attr(tags, "\bgpu\b", //...))' 2>/dev/null)
mapfile -t gpu_benches < <(bazel query --output=label 'kind("cc_binary", attr(tags, "\bgpu\b", //...))' 2>/dev/null || true)
if [[ ${#gpu_tests[@]} -eq 0 ]]; then
  echo "gpu-pack: no cc_test tagged gpu: is CUDA detected in this build (not --config=cpu)?" >&2
  exit 1
fi
echo "gpu-pack: building ${#binaries[@]} binaries, ${#gpu_tests[@]} GPU tests, ${#gpu_benches[@]} GPU benches (CUDA)"
bazel build "${binaries[@]}" "${gpu_tests[@]}" "${gpu_benches[@]}"

rm -rf "$out"
staging=$(mktemp -d /tmp/rm-gpu-pack-XXXXXX)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$out/data/fashion-mnist" "$staging/bin" "$staging/lib" "$staging/tests" "$staging/examples" \
  "$staging/data" "$staging/bench/reference"

# bazel-bin path of a label: //pkg:name -> bazel-bin/pkg/name
path_of() { local l=${1#//}; echo "bazel-bin/${l%%:*}/${l#*:}"; }
packed=() sources=()
for label in "${binaries[@]}" "${gpu_tests[@]}" "${gpu_benches[@]}"; do
  src=$(path_of "$label")
  name=$(basename "$src")
  # Test binaries of different packages may share a name: prefix the package.
  if [[ " ${gpu_tests[*]} " == *" $label "* ]]; then
    pkg=${label#//}; pkg=${pkg%%:*}; name="${pkg//\//_}__$name"
  fi
  install -m 0755 "$src" "$staging/bin/$name"
  strip --strip-unneeded "$staging/bin/$name"
  packed+=("$name") sources+=("$src")
done

# Libraries a bare GPU machine has: glibc's, the kernel's vDSO, the driver,
# and the CUDA libraries PyTorch's wheels carry.
provided='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink)\.so'
# ldd runs on the binaries where Bazel built them: test binaries find Bazel's
# own shared libraries (_solib_k8) through an rpath relative to that place, and
# those are packed too.
missing=0
for b in "${sources[@]}"; do
  while read -r lib arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then echo "gpu-pack: $b: $lib not found here" >&2; missing=1; continue; fi
    [[ "$lib" =~ $provided ]] && continue
    [[ -e "$staging/lib/$lib" ]] || { cp -L "$path" "$staging/lib/$lib"; chmod u+w "$staging/lib/$lib"; strip --strip-unneeded "$staging/lib/$lib" 2>/dev/null || true; }
  done < <(ldd "$b")
done
[[ $missing -eq 0 ]] || exit 1

install -m 0755 tests/gpu_training_test.sh tests/gpu_parallel_test.sh "$staging/tests/"
install -m 0755 scripts/gpu-run.sh "$out/"
cp examples/*.yaml "$staging/examples/"
install -m 0755 bench/gpu_vs_pytorch.sh "$staging/bench/"
cp bench/gpt2_124m.yaml "$staging/bench/"
cp bench/reference/gpt2_bench.py bench/reference/fashion_cnn.py "$staging/bench/reference/"
cp "$fashion"/*.gz "$out/data/fashion-mnist/"
cp "$kjv" "$staging/data/kjv.txt"
{
  echo "# ringmaster GPU pack, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  for n in "${packed[@]}"; do echo "bin $n"; done
  for l in "${gpu_tests[@]}"; do echo "test $l"; done
  for l in "${gpu_benches[@]}"; do echo "bench $l"; done
} >"$staging/MANIFEST"
cp "$staging/MANIFEST" "$out/MANIFEST"
unpacked=$(du -sb "$staging" | cut -f1)
tar -C "$staging" -cf - . | xz -T0 -6 >"$out/payload.tar.xz"

size=$(du -sb "$out" | cut -f1)
echo "gpu-pack: $out holds $(ls "$staging/bin" | wc -l) binaries and $(ls "$staging/lib" | wc -l) libraries" \
  "($((unpacked / 1024 / 1024)) MiB unpacked): $((size / 1024 / 1024)) MiB ($size bytes) in all"
if ((size > 64 * 1024 * 1024)); then
  echo "gpu-pack: over the 64 MiB limit" >&2
  exit 1
fi
