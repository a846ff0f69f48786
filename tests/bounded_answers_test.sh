#!/usr/bin/env bash
# Bounded input and bounded answers (issue #27, item 4), through a real
# coordinator and the CLI, two authenticated users (alice, bob):
#   - a database an older coordinator left behind (seed_legacy_store): a job
#     whose spec carries 66,000 labels (17 MB, stored twice) and a job with
#     10,000 checkpoint commits in its timeline. After the upgrade `jobs`
#     (table, wide, json) answers for both users, under the message limit;
#     the timeline table is compacted (bounded) and `describe` answers for
#     both jobs;
#   - a spec with 66,000 labels submitted past the CLI's own check
#     (--skip-local-validation): INVALID_ARGUMENT naming `labels`, and
#     nothing stored (`jobs` lists nothing new, the database holds no row).
# Every check runs and each failure is listed, then the test fails.
# Usage: bounded_answers_test.sh CLI COORDINATOR WORKER TRAINER SPEC SEED_LEGACY_STORE
set -uo pipefail
source "$(dirname "$0")/cluster_lib.sh"
cluster_init "$1" "$2" "$3" "$4"
spec=$(realpath "$5")
seed=$(realpath "$6")
db="$state/coordinator/coordinator.db"

failures=()
check() {  # check DESCRIPTION COMMAND...: records DESCRIPTION when COMMAND fails
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures+=("$what"); fi
}

# Two users, one token each.
(umask 077
 echo "alice-token-0123456789abcdef alice" >"$state/tokens"
 echo "bob-token-0123456789abcdef bob" >>"$state/tokens"
 echo "alice-token-0123456789abcdef" >"$state/alice"
 echo "bob-token-0123456789abcdef" >"$state/bob")
as() { local user=$1; shift; rm_cli --token-file "$state/$user" "$@"; }
quietly() { "$@" >"$state/quiet" 2>&1 || { head -c 300 "$state/quiet"; echo; return 1; }; }

mkdir -p "$state/coordinator"
"$seed" "$db" 66000 10000 || fail "seed_legacy_store failed"
echo "seeded $db: $(du -k "$db" | cut -f1) KiB"
sql() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$db" "$1"; }

start_coordinator --token-file "$state/tokens"
wait_until 30 "the coordinator did not start" as alice nodes

# --- `jobs` answers for every user, whatever is stored ---
jobs_lists_both() {  # USER [-o FORMAT]
  local user=$1 out
  shift
  out=$(as "$user" jobs --limit 0 "$@" 2>"$state/err") || { echo "  $(cat "$state/err")"; return 1; }
  printf '%s\n' "$out" | head -c 300 | sed 's/^/  | /'; echo
  [ "${#out}" -lt $((4 << 20)) ] || { echo "  answer of ${#out} bytes"; return 1; }
  grep -q 'j-1\b' <<<"$out" && grep -q 'j-2\b' <<<"$out"
}
for user in alice bob; do
  check "$user: jobs lists both stored jobs" jobs_lists_both "$user"
  check "$user: jobs -o wide" jobs_lists_both "$user" -o wide
  check "$user: jobs -o json" jobs_lists_both "$user" -o json
done

# --- the 10,000-commit timeline is bounded, and describe answers ---
rows=$(sql "SELECT COUNT(*) FROM job_events WHERE job_id = 'j-2'")
echo "j-2: $rows rows in job_events"
check "j-2's timeline is compacted to at most 100 rows (has $rows)" [ "$rows" -le 100 ]
describe_bounded() {  # JOB: describe answers; its timeline is at most 100 events and accounts for every commit
  as alice describe "$1" -o json >"$state/describe.json" 2>"$state/err" || { echo "  $(cat "$state/err")"; return 1; }
  python3 - "$state/describe.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
events = r.get("events", [])
commits = [e for e in events if e["kind"] == "JOB_EVENT_KIND_CHECKPOINT_COMMITTED"]
folded = sum(int(e.get("folded", 0)) for e in commits)
print("  %d events shown, %d commits + %d folded" % (len(events), len(commits), folded))
sys.exit(0 if len(events) <= 100 and (not commits or len(commits) + folded == 10000) else 1)
EOF
}
check "describe j-2 answers with a bounded timeline" describe_bounded j-2
check "describe j-2 (table) answers" quietly as bob describe j-2
check "describe j-1 (the oversized job) answers" quietly as alice describe j-1

# --- a 66,000-label spec is refused at Submit, naming labels ---
python3 - "$spec" "$state/labels.json" <<'EOF'
import json, sys
spec = {"name": "labels", "model": {"mlp": {}}, "data": {"dataset": "synthetic"}, "training": {"steps": 1},
        "resources": {"device": "cpu", "nodes": 1, "ranksPerNode": 1},
        "labels": {"k%05d" % i: "v" * 16 for i in range(66000)}}
json.dump(spec, open(sys.argv[2], "w"))
EOF
refused() {  # EXIT-CODE PATTERN ARGS...: the submission fails with that exit code and message
  local want=$1 pattern=$2 code
  shift 2
  as alice submit "$state/labels.json" "$@" >"$state/out" 2>"$state/err"
  code=$?
  echo "  exit $code: $(head -c 300 "$state/err") $(head -c 100 "$state/out")"
  [ "$code" = "$want" ] && grep -qE "$pattern" "$state/err"
}
check "66,000 labels past the CLI's check: INVALID_ARGUMENT naming labels" \
  refused 1 '^ringmaster: labels: at most 64 labels, got 66000 \(INVALID_ARGUMENT\)$' --skip-local-validation
check "66,000 labels: the CLI refuses them itself, naming labels" refused 2 'labels: at most 64 labels, got 66000'
jobs=$(sql "SELECT COUNT(*) FROM jobs")
check "nothing stored by the refused submissions (jobs table has $jobs rows)" [ "$jobs" = 2 ]
only_seeded() { [ "$(as bob jobs --limit 0 -o json | python3 -c 'import json, sys
print(" ".join(sorted(j["id"] for j in json.load(sys.stdin).get("jobs", []))))')" = "j-1 j-2" ]; }
check "jobs lists nothing new" only_seeded

if [ ${#failures[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
  fail "${#failures[@]} check(s) failed"
fi
echo "PASS: jobs answers for every user over a legacy oversized job; a 10,000-commit timeline is compacted and" \
  "described; 66,000 labels refused naming labels, nothing stored"
