#include "coordinator/store/store_schema.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {
namespace {

// Version 1: every table. Times are microseconds since the Unix epoch;
// enums are the ringmaster.v1 enum numbers; BLOBs are serialized protos.
constexpr absl::string_view kSchemaV1 = R"sql(
CREATE TABLE jobs (
  submit_seq      INTEGER PRIMARY KEY AUTOINCREMENT,  -- FIFO order; never reused
  id              TEXT UNIQUE,                        -- "j-<submit_seq>"
  request_id      TEXT,                               -- idempotency key; NULL if none
  user            TEXT NOT NULL DEFAULT '',
  spec            BLOB NOT NULL,                      -- ringmaster.v1.JobSpec, defaults applied
  state           INTEGER NOT NULL,                   -- ringmaster.v1.JobState
  priority        INTEGER NOT NULL,
  generation      INTEGER NOT NULL,
  restarts        INTEGER NOT NULL,
  submit_time_us  INTEGER NOT NULL,
  start_time_us   INTEGER,                            -- NULL until first RUNNING
  end_time_us     INTEGER,                            -- NULL until terminal
  reason          TEXT NOT NULL DEFAULT '',
  message         TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX jobs_request_id ON jobs(request_id) WHERE request_id IS NOT NULL;

CREATE TABLE job_events (
  job_id      TEXT NOT NULL,
  sequence    INTEGER NOT NULL,                       -- per job, from 1
  time_us     INTEGER NOT NULL,
  from_state  INTEGER NOT NULL,
  to_state    INTEGER NOT NULL,
  kind        INTEGER NOT NULL,                       -- ringmaster.v1.JobEventKind
  reason      TEXT NOT NULL,
  generation  INTEGER NOT NULL,
  rank        INTEGER NOT NULL,
  node_id     TEXT NOT NULL,
  PRIMARY KEY (job_id, sequence)
) WITHOUT ROWID;

CREATE TABLE nodes (
  seq               INTEGER PRIMARY KEY AUTOINCREMENT,
  node_id           TEXT UNIQUE,                      -- "n-<seq>"
  hostname          TEXT NOT NULL,
  address           TEXT NOT NULL,
  info              BLOB NOT NULL,                    -- ringmaster.v1.NodeInfo: gpus, cpu_slots, labels, version
  state             INTEGER NOT NULL,                 -- ringmaster.v1.NodeState
  register_time_us  INTEGER NOT NULL
);

CREATE TABLE placements (
  job_id                  TEXT NOT NULL,
  generation              INTEGER NOT NULL,
  world_size              INTEGER NOT NULL,
  data_parallel_size      INTEGER NOT NULL,
  pipeline_parallel_size  INTEGER NOT NULL,
  nodes                   INTEGER NOT NULL,
  ranks_per_node          INTEGER NOT NULL,
  created_us              INTEGER NOT NULL,
  PRIMARY KEY (job_id, generation)
) WITHOUT ROWID;

CREATE TABLE rank_assignments (
  job_id         TEXT NOT NULL,
  generation     INTEGER NOT NULL,
  global_rank    INTEGER NOT NULL,
  local_rank     INTEGER NOT NULL,
  node_rank      INTEGER NOT NULL,
  node_id        TEXT NOT NULL,
  hostname       TEXT NOT NULL,
  data_rank      INTEGER NOT NULL,
  pipeline_rank  INTEGER NOT NULL,
  gpu_uuid       TEXT NOT NULL,
  PRIMARY KEY (job_id, generation, global_rank)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
  job_id                TEXT NOT NULL,
  generation            INTEGER NOT NULL,
  step                  INTEGER NOT NULL,
  path                  TEXT NOT NULL,
  pipeline_stages       INTEGER NOT NULL,
  complete              INTEGER NOT NULL,
  total_bytes           INTEGER NOT NULL,
  commit_time_us        INTEGER NOT NULL,
  pruned                INTEGER NOT NULL DEFAULT 0,   -- fell out of retention
  pruned_by_generation  INTEGER,                      -- the checkpoint whose commit pruned it
  pruned_by_step        INTEGER,
  PRIMARY KEY (job_id, generation, step)
) WITHOUT ROWID;

CREATE TABLE checkpoint_shards (
  job_id          TEXT NOT NULL,
  generation      INTEGER NOT NULL,
  step            INTEGER NOT NULL,
  pipeline_stage  INTEGER NOT NULL,
  rank            INTEGER NOT NULL,
  shard           BLOB NOT NULL,                      -- ringmaster.v1.CheckpointShard (files, checksums)
  commit_time_us  INTEGER NOT NULL,
  PRIMARY KEY (job_id, generation, step, pipeline_stage)
) WITHOUT ROWID;
)sql";

// Version 2: indexes for the queries a worker session and the scheduler make.
constexpr absl::string_view kSchemaV2 = R"sql(
CREATE INDEX rank_assignments_by_node ON rank_assignments(node_id, job_id, generation);
CREATE INDEX jobs_by_state ON jobs(state, priority, submit_seq);
)sql";

// Version 3: whole-model checkpoints (one shard holds every stage) and
// checkpoints found damaged (never resumed from again).
constexpr absl::string_view kSchemaV3 = R"sql(
ALTER TABLE checkpoints ADD COLUMN whole_model INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN damage TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN damage_time_us INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 4: the spec as submitted, before defaults, with its --set
// assignments (ringmaster.v1.SubmittedSpec); NULL for older jobs.
constexpr absl::string_view kSchemaV4 = R"sql(
ALTER TABLE jobs ADD COLUMN submitted BLOB;
)sql";

// Version 5: bounded timelines (store.h, kEventsKeptPerKind). Of each kind a
// job keeps its first event and the newest 32; the ones between are deleted
// and counted in `folded` of the oldest kept one after them. Histories an
// older coordinator let grow (one event per checkpoint commit, for months)
// are compacted here, in the migration's transaction.
constexpr absl::string_view kSchemaV5 = R"sql(
ALTER TABLE job_events ADD COLUMN folded INTEGER NOT NULL DEFAULT 0;
CREATE INDEX job_events_by_kind ON job_events(job_id, kind, sequence);
CREATE TEMP TABLE events_to_fold AS
  SELECT job_id, sequence, n, total FROM (
    SELECT job_id, sequence,
           ROW_NUMBER() OVER (PARTITION BY job_id, kind ORDER BY sequence) AS n,
           COUNT(*) OVER (PARTITION BY job_id, kind) AS total
    FROM job_events)
  WHERE total > 33 AND n >= 2 AND n <= total - 31;
UPDATE job_events SET folded = (
    SELECT f.total - 33 FROM events_to_fold f
    WHERE f.job_id = job_events.job_id AND f.sequence = job_events.sequence)
  WHERE (job_id, sequence) IN (SELECT job_id, sequence FROM events_to_fold WHERE n = total - 31);
DELETE FROM job_events
  WHERE (job_id, sequence) IN (SELECT job_id, sequence FROM events_to_fold WHERE n <= total - 32);
DROP TABLE events_to_fold;
)sql";

// Version 6: accounting (store.h, Store::LoadUsage). A placement records
// who used it (user, queue), what it holds (GPUs: its ranks with a GPU; CPU
// slots: its CPU ranks x cpus_per_rank) and when its generation stopped
// holding it (ended_us; NULL while the job is PLACED, STARTING or RUNNING in
// it). Backfill: the user from the job; the queue "default" (no queue
// existed before); GPUs from the rank assignments; the end from the event
// that took the generation out of an active state, else the next
// generation's placement, else the job's end, else (the event was folded
// away, the job gone) the placement's own time: counted as nothing rather
// than forever. Not recoverable: cpus_per_rank lives in the serialized spec,
// so an older CPU placement counts one slot per rank (the default).
constexpr absl::string_view kSchemaV6 = R"sql(
ALTER TABLE placements ADD COLUMN user TEXT NOT NULL DEFAULT '';
ALTER TABLE placements ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE placements ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;
ALTER TABLE placements ADD COLUMN cpu_slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE placements ADD COLUMN ended_us INTEGER;
UPDATE placements SET
  user = COALESCE((SELECT j.user FROM jobs j WHERE j.id = placements.job_id), ''),
  queue = 'default',
  gpus = (SELECT COUNT(*) FROM rank_assignments r WHERE r.job_id = placements.job_id
            AND r.generation = placements.generation AND r.gpu_uuid != ''),
  cpu_slots = (SELECT COUNT(*) FROM rank_assignments r WHERE r.job_id = placements.job_id
                 AND r.generation = placements.generation AND r.gpu_uuid = ''),
  ended_us = CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.id = placements.job_id
                   AND j.generation = placements.generation AND j.state IN (2, 3, 4)) THEN NULL
    ELSE COALESCE(
      (SELECT MIN(e.time_us) FROM job_events e WHERE e.job_id = placements.job_id
         AND e.generation = placements.generation AND e.from_state IN (2, 3, 4)
         AND e.to_state NOT IN (2, 3, 4)),
      (SELECT MIN(n.created_us) FROM placements n WHERE n.job_id = placements.job_id
         AND n.generation > placements.generation),
      (SELECT j.end_time_us FROM jobs j WHERE j.id = placements.job_id),
      placements.created_us)
  END;
)sql";

// Version 7: a job's goodput account (ringmaster.v1.GoodputBreakdown as of
// its last event), so that a restarted coordinator carries on with it
// instead of rebuilding it from the timeline, which keeps no checkpoint
// stall and folds old events away. NULL (every job stored before): rebuilt
// from the timeline as before.
constexpr absl::string_view kSchemaV7 = R"sql(
ALTER TABLE jobs ADD COLUMN goodput BLOB;
)sql";

}  // namespace

const std::vector<Migration>& StoreMigrations() {
  static const std::vector<Migration>* migrations = new std::vector<Migration>{
      {1, "jobs, events, nodes, placements, rank assignments, checkpoints", kSchemaV1},
      {2, "indexes: rank assignments by node, jobs by state", kSchemaV2},
      {3, "checkpoints: whole_model, damage", kSchemaV3},
      {4, "jobs: submitted spec", kSchemaV4},
      {5, "job_events: bounded per kind (folded), compacted", kSchemaV5},
      {6, "placements: user, queue, gpus, cpu_slots, ended_us (accounting)", kSchemaV6},
      {7, "jobs: goodput account", kSchemaV7},
  };
  return *migrations;
}

absl::StatusOr<int> SchemaVersion(SqliteDb* db) {
  ASSIGN_OR_RETURN(int64_t tables,
                   db->QueryInt("SELECT COUNT(*) FROM sqlite_master "
                                "WHERE type = 'table' AND name = 'schema_version'"));
  if (tables == 0) return 0;
  ASSIGN_OR_RETURN(int64_t version, db->QueryInt("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
  return static_cast<int>(version);
}

absl::Status Migrate(SqliteDb* db, const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(int current, SchemaVersion(db));
  const int latest = static_cast<int>(migrations.size());
  if (current > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", current, " is newer than this binary supports (", latest,
        "); run a newer ringmaster-coordinator or restore a matching database"));
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(db));
    // Re-read inside the write lock: another process may have migrated.
    ASSIGN_OR_RETURN(int now, SchemaVersion(db));
    if (now >= m.version) continue;
    absl::Status status = db->Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    if (status.ok()) status = db->Exec(m.sql);
    if (status.ok()) status = db->Exec("DELETE FROM schema_version");
    if (status.ok()) {
      status = db->Exec(absl::StrCat("INSERT INTO schema_version (version) VALUES (", m.version, ")"));
    }
    if (status.ok()) status = txn.Commit();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("schema migration ", m.version, " (", m.summary,
                                                      "): ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::coordinator
