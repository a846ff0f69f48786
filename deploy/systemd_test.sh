#!/usr/bin/env bash
# deploy/systemd: `systemd-analyze verify` is clean (no output at all) on both
# units. It needs the ExecStart binaries to exist, so it verifies copies whose
# /usr/local/bin paths point at the built binaries and whose EnvironmentFile is
# the example beside them. Also checks what the units promise: restart on
# failure, an environment file, a state directory, sandboxing, and no
# PrivateDevices= on the worker (it would hide /dev/nvidia*).
# Usage: systemd_test.sh COORDINATOR WORKER TRAINER
set -uo pipefail
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not found (Debian package systemd)"; exit 0; }
coordinator=$(realpath "$1") worker=$(realpath "$2") trainer=$(realpath "$3")
units=$(realpath deploy/systemd)
tmp=$(mktemp -d /tmp/rm-systemd-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
for name in coordinator worker; do
  unit=ringmaster-$name.service
  sed -e "s|/usr/local/bin/ringmaster-coordinator|$coordinator|" -e "s|/usr/local/bin/ringmaster-worker|$worker|" \
      -e "s|/usr/local/bin/ringmaster-trainer|$trainer|" -e "s|^EnvironmentFile=.*|EnvironmentFile=$units/$name.env.example|" \
      "$units/$unit" >"$tmp/$unit"
  grep -q "^ExecStart=$( [ $name = coordinator ] && echo "$coordinator" || echo "$worker")" "$tmp/$unit" ||
    fail "$unit: ExecStart was not pointed at the built binary"
  out=$(cd "$tmp" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify "./$unit" 2>&1); rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then fail "systemd-analyze verify $unit (exit $rc):"; echo "$out"; else echo "ok: systemd-analyze verify $unit"; fi
  for key in 'Restart=on-failure' 'EnvironmentFile=/etc/ringmaster/' "StateDirectory=ringmaster/$name" \
             'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=yes' 'PrivateTmp=yes'; do
    grep -q "^$key" "$units/$unit" || fail "$unit has no $key"
  done
  # Every flag the unit and its example environment pass is one the binary has.
  bin=$( [ $name = coordinator ] && echo "$coordinator" || echo "$worker")
  known=$("$bin" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  for flag in $(sed -n '/^ExecStart=/,/[^\\]$/p' "$units/$unit" | grep -oE -- ' --[a-z][a-z-]*'; \
                grep -E '^RINGMASTER_[A-Z_]*ARGS=' "$units/$name.env.example" | sed 's/^[^=]*=/ /' |
                  grep -oE -- ' --[a-z][a-z-]*'); do
    grep -qx -- "$flag" <<<"$known" || fail "$unit: $(basename "$bin") has no flag $flag"
  done
  # Every variable ExecStart uses is set in the example environment file.
  for var in $(grep -oE '\$\{?RINGMASTER_[A-Z_]+' "$units/$unit" | tr -d '${' | sort -u); do
    grep -q "^$var=" "$units/$name.env.example" || fail "$name.env.example does not set $var"
  done
done
grep -q '^PrivateDevices=' "$units/ringmaster-worker.service" && fail "the worker must keep /dev/nvidia*: no PrivateDevices="
grep -q '^MemoryDenyWriteExecute=' "$units/ringmaster-worker.service" && fail "the CUDA driver JIT needs W+X memory"
# A real check: a broken unit is caught.
printf '[Service]\nExecStart=%s\nRestart=sometimes\n' "$coordinator" >"$tmp/broken.service"
out=$(cd "$tmp" && systemd-analyze verify ./broken.service 2>&1)
[ -n "$out" ] || fail "systemd-analyze verify printed nothing for a broken unit: the check would not catch one"
[ $failed -eq 0 ] && echo "PASS: both units verify clean"
exit $failed
