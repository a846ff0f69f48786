#!/usr/bin/env bash
# The container image (scripts/build-image.sh): built offline from Debian's
# archive with the binaries under test, it is an OCI archive skopeo reads,
# tagged with the version, with OCI labels, a non-root default user, the
# CUDA libraries the binaries load and no driver. Containers cannot run on
# the development machines (podman fails on rlimits and cgroups), so the test
# unpacks the image with skopeo and umoci and, chrooted into its root
# filesystem as the image's user, runs a coordinator, a worker and a 2-rank
# CPU job to completion; then it tries `podman run`, where the machine allows.
# Everything runs in a mount and PID namespace of its own, so no mount or
# process outlives the test. Skips without root, the tools, the Debian
# archive, or with binaries built without CUDA (the image is the CUDA build).
# Usage: image_test.sh CLI COORDINATOR WORKER TRAINER
set -uo pipefail
# chroot, ldconfig and friends live in sbin, which a minimal PATH (Bazel tests) leaves out.
export PATH=$PATH:/usr/sbin:/sbin
skip() { echo "SKIP: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root (mmdebstrap, chroot, unshare)"
for tool in mmdebstrap umoci skopeo unshare; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/install-deps.sh image)"
done
[[ $(ldd "$4") == *libcudart* ]] || skip "the binaries are built without CUDA (--config=cpu); the image is the CUDA build"
[ -d /usr/share/datasets/fashion-mnist ] || skip "no Fashion-MNIST (Debian package dataset-fashion-mnist)"

tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rm-image-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cp "$(realpath "$1")" "$tmp/bin/ringmaster"
cp "$(realpath "$2")" "$tmp/bin/ringmaster-coordinator"
cp "$(realpath "$3")" "$tmp/bin/ringmaster-worker"
cp "$(realpath "$4")" "$tmp/bin/ringmaster-trainer"
version=$("$tmp/bin/ringmaster" --version | awk '{print $2}')

if ! scripts/build-image.sh --out "$tmp/out" --bin-dir "$tmp/bin" >"$tmp/build.log" 2>&1; then
  tail -20 "$tmp/build.log"
  grep -qiE 'could not resolve|failed to fetch|temporary failure|unable to connect' "$tmp/build.log" &&
    skip "the Debian archive cannot be reached"
  fail "scripts/build-image.sh"
fi
archive=$tmp/out/ringmaster-$version.oci.tar
[ -f "$archive" ] || fail "no $archive"
echo "ok: built $(basename "$archive"), $(du -h "$archive" | cut -f1) ($(grep -c . "$tmp/build.log") lines of log)"

# The archive as skopeo reads it: labels, user, tag.
skopeo inspect --config "oci-archive:$archive" >"$tmp/config.json" || fail "skopeo cannot read the archive"
python3 - "$tmp/config.json" "$version" <<'PY' || exit 1
import json, sys
c = json.load(open(sys.argv[1]))
version = sys.argv[2]
labels = c["config"].get("Labels", {})
errors = []
if labels.get("org.opencontainers.image.version") != version: errors.append(f"version label {labels.get('org.opencontainers.image.version')}")
if not labels.get("org.opencontainers.image.revision"): errors.append("no revision label")
if c["config"].get("User") != "10001:10001": errors.append(f"user {c['config'].get('User')}")
if errors: print("FAIL: image config: " + "; ".join(errors)); sys.exit(1)
print(f"ok: labels version {version}, revision {labels['org.opencontainers.image.revision']}; user 10001:10001")
PY
skopeo copy --quiet "oci-archive:$archive" "oci:$tmp/layout:$version" || fail "skopeo copy to a layout"
umoci unpack --image "$tmp/layout:$version" "$tmp/bundle" >/dev/null || fail "umoci unpack"
root=$tmp/bundle/rootfs

# What the root filesystem holds.
for b in ringmaster ringmaster-coordinator ringmaster-worker ringmaster-trainer; do
  [ -x "$root/usr/local/bin/$b" ] || fail "no /usr/local/bin/$b in the image"
done
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  [ -f "$root/usr/local/lib/ringmaster-cuda/$lib" ] || fail "no $lib in the image"
done
[ -z "$(find "$root" \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \) -print -quit)" ] || fail "the image holds the driver"
grep -q '^ringmaster:x:10001:10001:' "$root/etc/passwd" || fail "no user ringmaster (10001)"
missing=$(chroot "$root" /bin/sh -c 'for b in /usr/local/bin/*; do ldd "$b"; done' | grep 'not found' | sort -u)
[ -z "$missing" ] || fail "libraries missing in the image: $missing"
echo "ok: four binaries, the CUDA libraries, no driver, user ringmaster, every library resolves"

# A coordinator, a worker and a 2-rank CPU job, chrooted, as the image's user.
mkdir -p "$root/usr/share/datasets/fashion-mnist" "$root/job"
cp examples/fashion_mnist_mlp.yaml "$root/job/spec.yaml"
chown -R 10001:10001 "$root/job"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$root/job/run.sh" <<EOF
#!/bin/sh
addr=127.0.0.1:$port
cd /job
ringmaster-coordinator --listen \$addr --state-dir /job/coordinator --metrics-listen "" \
  --heartbeat-interval 500ms >/job/coordinator.log 2>&1 &
ringmaster-worker --coordinator \$addr --cpu-slots 2 --state-dir /job/worker --listen-address 127.0.0.1 \
  --node-name image --metrics-listen "" >/job/worker.log 2>&1 &
for i in \$(seq 150); do
  ringmaster --coordinator \$addr nodes 2>/dev/null | grep -q READY && break
  sleep 0.2
done
timeout 600 ringmaster --coordinator \$addr submit /job/spec.yaml --wait \
  --set resources.nodes=1 --set resources.ranks_per_node=2 --set resources.cpus_per_rank=1 \
  --set parallelism.data=2 --set training.steps=60 \
  --set training.eval_interval_steps=60 --set checkpoint.interval_steps=30 --set lr_schedule.warmup_steps=10
EOF
chmod 0755 "$root/job/run.sh"
# PID 1 of the namespace is the shell below: when it ends, the kernel kills
# every process left in the namespace, and the mounts go with the namespace.
unshare --mount --pid --fork --kill-child /bin/bash -c "
  set -e
  mount --make-rprivate /
  mount -t proc proc '$root/proc'
  mount --rbind /dev '$root/dev'
  mount -t tmpfs -o size=1g tmpfs '$root/dev/shm'
  mount --bind -o ro /usr/share/datasets/fashion-mnist '$root/usr/share/datasets/fashion-mnist'
  chroot --userspec=10001:10001 '$root' /job/run.sh
" >"$tmp/job.out" 2>&1
rc=$?
tail -8 "$tmp/job.out"
if [ $rc -ne 0 ] || ! grep -q SUCCEEDED "$tmp/job.out"; then
  for f in coordinator worker; do echo "--- $f.log"; tail -15 "$root/job/$f.log"; done
  fail "the 2-rank job in the image's root filesystem (exit $rc)"
fi
echo "ok: coordinator, worker and a 2-rank CPU job ran to SUCCEEDED in the image's root filesystem, as user 10001"

# podman, where the machine allows containers.
if command -v podman >/dev/null; then
  if podman load -q -i "$archive" >"$tmp/podman.log" 2>&1 &&
     podman run --rm "localhost/ringmaster:$version" ringmaster --version >>"$tmp/podman.log" 2>&1; then
    grep -q "ringmaster $version" "$tmp/podman.log" || fail "podman run printed: $(cat "$tmp/podman.log")"
    echo "ok: podman load and podman run"
  else
    echo "note: podman cannot run containers here: $(tail -1 "$tmp/podman.log")"
  fi
  podman rmi -f "localhost/ringmaster:$version" >/dev/null 2>&1 || true
else
  echo "note: podman not installed; podman run not tried"
fi
echo "PASS: the image builds offline and runs a 2-rank job"
