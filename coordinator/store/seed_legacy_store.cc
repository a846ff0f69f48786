// seed_legacy_store: writes a coordinator database as a coordinator of schema
// version 4 (before spec limits and event compaction) could have left it, for
// tests/bounded_answers_test.sh:
//   j-1  QUEUED, owned by "mallory", its spec carrying LABELS labels of 250
//        bytes each (66,000: about 17 MB, stored twice: Job.spec and
//        Job.submitted), as a Submit of the time accepted it;
//   j-2  SUCCEEDED, owned by "alice", with EVENTS CHECKPOINT_COMMITTED
//        events in its timeline (one per commit, as that version kept them).
// The schema is made by this binary's first four migrations (as released)
// and the rows with that version's SQL, so the database is what such a
// coordinator left behind, whatever this binary's own store writes.
//
//   seed_legacy_store DB LABELS EVENTS
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "coordinator/store/sqlite_db.h"
#include "coordinator/store/store_schema.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::coordinator {
namespace {

constexpr int kLegacySchemaVersion = 4;

v1::JobSpec SmallSpec(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_model()->mutable_mlp()->add_hidden_sizes(32);
  spec.mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  spec.mutable_training()->set_steps(10);
  spec.mutable_resources()->set_device(v1::ResourceSpec::CPU);
  spec.mutable_resources()->set_nodes(1);
  spec.mutable_resources()->set_ranks_per_node(1);
  spec.mutable_resources()->set_cpus_per_rank(1);
  return spec;
}

struct LegacyJob {
  std::string user;
  v1::JobSpec spec;
  v1::JobState state = v1::JOB_STATE_QUEUED;
  int64_t generation = 0;
  int64_t submit_us = 0;
  int64_t end_us = 0;  // 0: not ended
  std::string message;
};

// INSERT as schema version 4 does (store.cc of that version); returns the id.
absl::StatusOr<std::string> InsertJob(SqliteDb* db, const LegacyJob& job) {
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   db->Prepare("INSERT INTO jobs (request_id, user, spec, state, priority, generation, restarts, "
                               "submit_time_us, start_time_us, end_time_us, reason, message, submitted) "
                               "VALUES (NULL, ?, ?, ?, 0, ?, 0, ?, ?, ?, '', ?, ?)"));
  v1::SubmittedSpec submitted;
  *submitted.mutable_spec() = job.spec;
  insert.Bind(1, job.user)
      .BindBlob(2, job.spec.SerializeAsString())
      .Bind(3, static_cast<int64_t>(job.state))
      .Bind(4, job.generation)
      .Bind(5, job.submit_us);
  if (job.end_us > 0) {
    insert.Bind(6, job.submit_us).Bind(7, job.end_us);
  } else {
    insert.BindNull(6).BindNull(7);
  }
  insert.Bind(8, job.message).BindBlob(9, submitted.SerializeAsString());
  RETURN_IF_ERROR(insert.Run());
  const int64_t seq = db->LastInsertRowId();
  const std::string id = absl::StrCat("j-", seq);
  ASSIGN_OR_RETURN(SqliteStatement set_id, db->Prepare("UPDATE jobs SET id = ? WHERE submit_seq = ?"));
  set_id.Bind(1, id).Bind(2, seq);
  RETURN_IF_ERROR(set_id.Run());
  return id;
}

struct LegacyEvent {
  v1::JobEventKind kind;
  v1::JobState from, to;
  std::string reason;
};

absl::Status InsertEvents(SqliteDb* db, const std::string& job_id, const std::vector<LegacyEvent>& events,
                          int64_t time_us) {
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   db->Prepare("INSERT INTO job_events (job_id, sequence, time_us, from_state, to_state, kind, "
                               "reason, generation, rank, node_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, -1, '')"));
  int64_t sequence = 0;
  for (const LegacyEvent& e : events) {
    ++sequence;
    insert.Reset();
    insert.Bind(1, job_id)
        .Bind(2, sequence)
        .Bind(3, time_us + sequence)
        .Bind(4, static_cast<int64_t>(e.from))
        .Bind(5, static_cast<int64_t>(e.to))
        .Bind(6, static_cast<int64_t>(e.kind))
        .Bind(7, e.reason)
        .Bind(8, int64_t{e.kind == v1::JOB_EVENT_KIND_SUBMITTED ? 0 : 1});
    RETURN_IF_ERROR(insert.Run());
  }
  return absl::OkStatus();
}

absl::Status Seed(const std::string& path, int labels, int commits) {
  ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(path));
  const std::vector<Migration>& all = StoreMigrations();
  if (all.size() < kLegacySchemaVersion) return absl::InternalError("this binary has fewer than 4 migrations");
  RETURN_IF_ERROR(Migrate(&db, std::vector<Migration>(all.begin(), all.begin() + kLegacySchemaVersion)));
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db));

  LegacyJob huge{"mallory", SmallSpec("huge"), v1::JOB_STATE_QUEUED, 0, now_us - 2000000, 0, "queued"};
  const std::string value(250, 'v');
  for (int i = 0; i < labels; ++i) (*huge.spec.mutable_labels())[absl::StrFormat("k%06d", i)] = value;
  ASSIGN_OR_RETURN(std::string huge_id, InsertJob(&db, huge));
  RETURN_IF_ERROR(InsertEvents(&db, huge_id,
                               {{v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED,
                                 "submitted by mallory"}},
                               huge.submit_us));

  LegacyJob chatty{"alice", SmallSpec("chatty"), v1::JOB_STATE_SUCCEEDED, 1, now_us - 1000000, now_us,
                   "all 1 ranks exited 0"};
  ASSIGN_OR_RETURN(std::string chatty_id, InsertJob(&db, chatty));
  std::vector<LegacyEvent> events = {
      {v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, "submitted by alice"},
      {v1::JOB_EVENT_KIND_PLACED, v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED, "placed on n1"},
      {v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_PLACED, v1::JOB_STATE_STARTING, "start orders sent"},
      {v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING, "every rank joined"}};
  for (int i = 1; i <= commits; ++i) {
    events.push_back({v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RUNNING,
                      absl::StrCat("checkpoint at step ", i, " committed")});
  }
  events.push_back(
      {v1::JOB_EVENT_KIND_SUCCEEDED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED, "all 1 ranks exited 0"});
  RETURN_IF_ERROR(InsertEvents(&db, chatty_id, events, chatty.submit_us));
  return txn.Commit();
}

}  // namespace
}  // namespace ringmaster::coordinator

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: seed_legacy_store DB LABELS EVENTS\n";
    return 2;
  }
  absl::Status status = ringmaster::coordinator::Seed(argv[1], std::atoi(argv[2]), std::atoi(argv[3]));
  if (!status.ok()) {
    std::cerr << "seed_legacy_store: " << status << "\n";
    return 1;
  }
  return 0;
}
