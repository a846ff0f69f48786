#!/usr/bin/env bash
# A full disk while saving a checkpoint: the trainer stops with a clear error
# naming the file and "No space left on device", and the previous checkpoint
# stays, verifies and is resumed from. The disk is a 4 MiB tmpfs in a private
# mount namespace (one MLP checkpoint is about 2.8 MB: the first fits, the
# second, written beside it before the first is removed, does not).
# Usage: checkpoint_disk_full_test.sh TRAINER SPEC
set -uo pipefail
if [ -z "${RM_DISK_FULL_NS:-}" ]; then
  RM_DISK_FULL_NS=1 exec unshare -rm -- bash "$0" "$@"
fi
trainer=$(realpath "$1") spec=$(realpath "$2")
disk=$(mktemp -d /tmp/rm-full-XXXXXX)
out=$(mktemp /tmp/rm-full-out-XXXXXX)
trap 'umount "$disk" 2>/dev/null; rm -rf "$disk" "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- trainer output"; tail -20 "$out"; ls -la "$disk/ckpt"; exit 1; }
mount -t tmpfs -o size=4m tmpfs "$disk" || fail "cannot mount a tmpfs (mount -t tmpfs)"
run() {
  "$trainer" --spec "$spec" --checkpoint-dir "$disk/ckpt" --set training.steps=20 \
    --set checkpoint.interval_steps=10 --set checkpoint.keep=1 --set lr_schedule.warmup_steps=2 "$@" >"$out" 2>&1
}
run
rc=$?
tail -3 "$out"
[ $rc -ne 0 ] || fail "the trainer succeeded on a full disk"
grep -qE "step-000000020/.*No space left on device \(errno 28\)" "$out" ||
  fail "no clear 'No space left on device' error naming the checkpoint file"
[ -d "$disk/ckpt/step-000000010" ] || fail "the previous checkpoint is gone"
[ ! -e "$disk/ckpt/step-000000020" ] || fail "a partial step-000000020 is visible"
ls -A "$disk/ckpt" | grep -q '^\.tmp-' && fail "the temporary directory was left behind"
# The previous checkpoint verifies: the trainer resumes from it.
run --max-steps 0
grep -q "resumed from step 10" "$out" || fail "step 10 was not resumed from"
echo "PASS: a full disk is a clear error; checkpoint 10 stays and is resumed from"
