#!/usr/bin/env bash
# The coordinator's layers hold by construction: Bazel visibility makes a
# dependency across them a build error. On a copy of the workspace, probe
# targets that cross a layer must fail analysis with Bazel's visibility error,
# a probe along the allowed direction must pass, and `bazel query visible()`
# must find no forbidden edge. Runs a private Bazel server (its own output
# root under TEST_TMPDIR), shut down on exit.
# Usage: layering_test.sh WORKSPACE_FILE
set -uo pipefail
workspace=$(dirname "$(readlink -f "$1")")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
ws=$tmp/ws root=$tmp/bazel-root
failures=0

bazel_() { (cd "$ws" && timeout 300 bazel --output_user_root="$root" --max_idle_secs=60 "$@"); }
trap 'bazel_ shutdown >/dev/null 2>&1; rm -rf "$ws"' EXIT

mkdir -p "$ws"
tar -C "$workspace" --exclude='./bazel-*' --exclude=./.git -cf - . | tar -C "$ws" -xf - || exit 1

probe() {  # probe PACKAGE NAME DEP: a cc_library in PACKAGE depending on DEP
  printf '\ncc_library(\n    name = "%s",\n    deps = ["%s"],\n    tags = ["manual"],\n)\n' "$2" "$3" >>"$ws/$1/BUILD"
}
probe coordinator/core core_uses_service //coordinator/service:services
probe coordinator/store store_uses_core //coordinator/core:job_controller
probe engine engine_uses_coordinator //coordinator/core:rendezvous
probe worker worker_uses_coordinator_store //coordinator/store:store
probe coordinator/service service_uses_core //coordinator/core:job_controller

must_fail() {  # must_fail TARGET DEP
  local out
  out=$(bazel_ build --nobuild --symlink_prefix=/ "$1" 2>&1)
  if [ $? -ne 0 ] && grep -q "target '$2' is not visible from target '$1'" <<<"$out"; then
    echo "PASS: $1 -> $2 fails the build (not visible)"
  else
    echo "FAIL: $1 -> $2 was not refused for visibility:"; tail -5 <<<"$out"
    failures=$((failures + 1))
  fi
}
must_fail //coordinator/core:core_uses_service //coordinator/service:services
must_fail //coordinator/store:store_uses_core //coordinator/core:job_controller
must_fail //engine:engine_uses_coordinator //coordinator/core:rendezvous
must_fail //worker:worker_uses_coordinator_store //coordinator/store:store

# The control: the same kind of probe along an allowed edge analyzes cleanly.
if out=$(bazel_ build --nobuild --symlink_prefix=/ //coordinator/service:service_uses_core 2>&1); then
  echo "PASS: //coordinator/service -> //coordinator/core is allowed"
else
  echo "FAIL: the allowed probe did not analyze:"; tail -5 <<<"$out"
  failures=$((failures + 1))
fi

query_count() { bazel_ query "$1" 2>/dev/null | grep -c '^//'; }
# No library of the services is visible to the core, none of the core's to
# the store, none of the coordinator's to the engine or the worker.
for q in 'visible(//coordinator/core:job_controller, kind("cc_library", //coordinator/service:all))' \
         'visible(//coordinator/store:store, kind("cc_library", //coordinator/core:all))' \
         'visible(//engine:ringmaster-trainer, kind("cc_library", //coordinator/...))' \
         'visible(//worker:ringmaster-worker, kind("cc_library", //coordinator/...))'; do
  n=$(query_count "$q")
  if [ "$n" -eq 0 ]; then echo "PASS: query $q is empty"; else echo "FAIL: query $q found $n"; failures=$((failures + 1)); fi
done
n=$(query_count 'visible(//coordinator/service:services, kind("cc_library", //coordinator/core:all))')
if [ "$n" -gt 0 ]; then echo "PASS: the services see $n core libraries"; else echo "FAIL: the services see no core library"; failures=$((failures + 1)); fi

[ "$failures" -eq 0 ] && echo "layering holds" || { echo "$failures layering checks failed"; exit 1; }
