#!/usr/bin/env bash
# Builds Ringmaster's container image offline: the root filesystem comes from
# Debian's package archive (mmdebstrap), never from a registry. It holds
#   - the four binaries in /usr/local/bin (the CUDA build);
#   - the Debian packages that own the shared libraries they load (found with
#     ldd and dpkg -S: exactly those, plus Debian's essential set);
#   - the CUDA libraries they load from the toolkit (cudart, cuBLAS/cuBLASLt,
#     cuDNN with the engine libraries it opens at run time, NCCL), in
#     /usr/local/lib/ringmaster-cuda; never the driver (the node's container
#     toolkit mounts it);
#   - a non-root user `ringmaster` (10001:10001), the image's default user;
#   - OCI labels with the version and the source revision.
# Writes OUT_DIR/ringmaster-<version>.oci.tar, an OCI image layout archive
# that `podman load -i` and `skopeo copy oci-archive:...` accept, tagged
# <version>. Needs root (mmdebstrap's root mode and the layer's file owners)
# and mmdebstrap, umoci and skopeo (scripts/install-deps.sh image).
# Usage: scripts/build-image.sh [--out DIR] [--bin-dir DIR]
#   --bin-dir: take the four binaries from DIR instead of building them.
set -euo pipefail
# chroot, ldconfig and friends live in sbin, which a minimal PATH (Bazel tests) leaves out.
export PATH=$PATH:/usr/sbin:/sbin
# mmdebstrap mounts /dev, /proc and /sys into the root filesystem it builds:
# in a mount namespace of the build's own, a build that is killed leaves no
# mount behind (the namespace goes with its last process).
if [ "$(id -u)" -eq 0 ] && [ -z "${RINGMASTER_IMAGE_NS:-}" ] && command -v unshare >/dev/null; then
  RINGMASTER_IMAGE_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
cd "$(dirname "$0")/.."

out=bazel-image
bin_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
step() { echo "build-image: [$(date +%T)] $*"; }
[ "$(id -u)" -eq 0 ] || { echo "build-image: run as root (mmdebstrap's root mode, file owners in the layer)" >&2; exit 1; }
for tool in mmdebstrap umoci skopeo; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing: scripts/install-deps.sh image" >&2; exit 1; }
done

version=$(sed -n 's/.*kVersion\[\] = "\(.*\)";/\1/p' common/cli_flags.h)
# The source revision: RINGMASTER_REVISION, else the checkout's commit (+ "-dirty"
# with uncommitted changes), else "unknown" (e.g. outside a git checkout).
if [ -n "${RINGMASTER_REVISION:-}" ]; then
  revision=$RINGMASTER_REVISION
elif revision=$(git rev-parse HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null || revision="$revision-dirty"
else
  revision=unknown
fi
binaries=(ringmaster-coordinator ringmaster-worker ringmaster-trainer ringmaster)
if [ -z "$bin_dir" ]; then
  step "building the binaries (CUDA)"
  bazel build //coordinator:ringmaster-coordinator //worker:ringmaster-worker //engine:ringmaster-trainer \
    //client:ringmaster
  bin_dir=$(mktemp -d)
  for b in coordinator/ringmaster-coordinator worker/ringmaster-worker engine/ringmaster-trainer client/ringmaster; do
    cp "bazel-bin/$b" "$bin_dir/"
  done
fi
for b in "${binaries[@]}"; do [ -x "$bin_dir/$b" ] || { echo "build-image: no $bin_dir/$b" >&2; exit 1; }; done

# What the binaries load: Debian packages by owner, CUDA libraries by path.
owner() {  # the package owning a library, whichever path dpkg knows it by
  local f=$1 p
  for p in "$f" "$(realpath "$f")" "/usr$f" "$(realpath "/usr$f" 2>/dev/null)"; do
    dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}
packages=() cuda=()
while read -r lib; do
  case $lib in
    /usr/local/cuda*) cuda+=("$(realpath "$lib")") ;;
    *) pkg=$(owner "$lib") || { echo "build-image: no Debian package owns $lib" >&2; exit 1; }
       packages+=("$pkg") ;;
  esac
done < <(for b in "${binaries[@]}"; do ldd "$bin_dir/$b"; done | awk '/=> \// {print $3}' | sort -u)
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
# cuDNN opens its engine libraries (libcudnn_*.so.9) at run time.
for lib in "${cuda[@]}"; do
  case $(basename "$lib") in
    libcudnn.so.*) for e in "$(dirname "$lib")"/libcudnn_*.so.9; do cuda+=("$(realpath "$e")"); done ;;
  esac
done
mapfile -t cuda < <(printf '%s\n' "${cuda[@]}" | sort -u)
step "${#packages[@]} Debian packages: ${packages[*]}"
step "${#cuda[@]} CUDA libraries: $(for c in "${cuda[@]}"; do basename "$c"; done | tr '\n' ' ')"

mkdir -p "$out"
work=$(mktemp -d "$out/.work-XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
# The host's own Debian sources: the same archive its libraries came from.
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
step "mmdebstrap bookworm (essential + the packages) from $sources"
mmdebstrap --variant=essential --quiet \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  bookworm "$rootfs" "$sources"

step "binaries, CUDA libraries, user"
install -m 0755 -t "$rootfs/usr/local/bin" "${binaries[@]/#/$bin_dir/}"
mkdir -p "$rootfs/usr/local/lib/ringmaster-cuda"
for lib in "${cuda[@]}"; do
  cp "$lib" "$rootfs/usr/local/lib/ringmaster-cuda/"
done
# The SONAME links the loader looks for (libcudart.so.13 -> libcudart.so.13.x.y).
echo /usr/local/lib/ringmaster-cuda >"$rootfs/etc/ld.so.conf.d/ringmaster-cuda.conf"
chroot "$rootfs" /sbin/ldconfig
mkdir -p "$rootfs/usr/share/doc/ringmaster"
cat >"$rootfs/usr/share/doc/ringmaster/README" <<EOF
Ringmaster $version ($revision). CUDA libraries from the NVIDIA CUDA toolkit, cuDNN and NCCL
in /usr/local/lib/ringmaster-cuda, redistributed under their licences; the driver is not included.
EOF
echo "ringmaster:x:10001:10001:Ringmaster:/var/lib/ringmaster:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
echo "ringmaster:x:10001:" >>"$rootfs/etc/group"
echo "ringmaster:!*:19000::::::" >>"$rootfs/etc/shadow"
mkdir -p "$rootfs/var/lib/ringmaster"
chown 10001:10001 "$rootfs/var/lib/ringmaster"
for b in "${binaries[@]}"; do
  chroot "$rootfs" "/usr/local/bin/$b" --help >/dev/null || { echo "build-image: $b does not start in the image" >&2; exit 1; }
done

step "OCI layout"
layout=$work/oci
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci insert --image "$layout:$version" "$rootfs" /
config=(--config.user 10001:10001 --config.workingdir /var/lib/ringmaster
  --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.cmd /usr/local/bin/ringmaster)
for label in "org.opencontainers.image.title=ringmaster" "org.opencontainers.image.version=$version" \
  "org.opencontainers.image.revision=$revision" \
  "org.opencontainers.image.description=Ringmaster: coordinator, worker, trainer and CLI (CUDA build)" \
  "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  config+=(--config.label "$label" --manifest.annotation "$label")
done
umoci config --image "$layout:$version" "${config[@]}"
umoci gc --layout "$layout"
archive=$out/ringmaster-$version.oci.tar
# Through skopeo, so that the archive's index names the image ringmaster:<version>
# (podman load then tags it localhost/ringmaster:<version>).
rm -f "$archive.tmp"
skopeo copy --quiet "oci:$layout:$version" "oci-archive:$archive.tmp:ringmaster:$version"
mv "$archive.tmp" "$archive"
skopeo inspect "oci-archive:$archive" >/dev/null
step "wrote $archive ($(du -h "$archive" | cut -f1)), revision $revision"
