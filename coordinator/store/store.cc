// Store: opening, jobs, events and placements. Nodes and checkpoints are in
// store_nodes_checkpoints.cc.
#include "coordinator/store/store.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/proto_time.h"
#include "common/utf8.h"
#include "coordinator/store/store_schema.h"

namespace ringmaster::coordinator {
namespace {

constexpr absl::string_view kJobColumns =
    "submit_seq, id, request_id, user, spec, state, priority, generation, restarts, "
    "submit_time_us, start_time_us, end_time_us, reason, message, submitted, goodput";

absl::StatusOr<JobRecord> ReadJobRow(const SqliteStatement& stmt) {
  JobRecord r;
  r.submit_seq = stmt.ColumnInt(0);
  r.job.set_id(stmt.ColumnText(1));
  r.request_id = stmt.ColumnIsNull(2) ? "" : stmt.ColumnText(2);
  r.user = stmt.ColumnText(3);
  r.job.set_owner(r.user);
  if (!r.job.mutable_spec()->ParseFromString(stmt.ColumnBlob(4))) {
    return absl::DataLossError(absl::StrCat("store: job ", r.job.id(), ": unreadable spec"));
  }
  r.job.set_state(static_cast<v1::JobState>(stmt.ColumnInt(5)));
  // column 6 (priority) mirrors spec.priority, kept as a column for queries.
  r.job.set_generation(stmt.ColumnInt(7));
  r.job.set_restarts(static_cast<int32_t>(stmt.ColumnInt(8)));
  *r.job.mutable_submit_time() = FromMicros(stmt.ColumnInt(9));
  if (!stmt.ColumnIsNull(10)) *r.job.mutable_start_time() = FromMicros(stmt.ColumnInt(10));
  if (!stmt.ColumnIsNull(11)) *r.job.mutable_end_time() = FromMicros(stmt.ColumnInt(11));
  r.job.set_reason(stmt.ColumnText(12));
  r.job.set_message(stmt.ColumnText(13));
  if (!stmt.ColumnIsNull(14) && !r.job.mutable_submitted()->ParseFromString(stmt.ColumnBlob(14))) {
    return absl::DataLossError(absl::StrCat("store: job ", r.job.id(), ": unreadable submitted spec"));
  }
  if (!stmt.ColumnIsNull(15) && !r.job.mutable_goodput()->ParseFromString(stmt.ColumnBlob(15))) {
    return absl::DataLossError(absl::StrCat("store: job ", r.job.id(), ": unreadable goodput account"));
  }
  return r;
}

// The states in which a job's generation holds its placement.
bool HoldsPlacement(v1::JobState state) {
  return state == v1::JOB_STATE_PLACED || state == v1::JOB_STATE_STARTING || state == v1::JOB_STATE_RUNNING;
}

// When `job` entered its state: the time of the event that moved it there
// (every state change carries one), else of its first event, else its end
// time; nullopt when none says.
std::optional<int64_t> TransitionMicros(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  for (const v1::JobEvent& e : events) {
    if (e.to_state() == job.state() && e.from_state() != e.to_state()) return ToMicros(e.time());
  }
  if (!events.empty()) return ToMicros(events.front().time());
  if (job.has_end_time()) return ToMicros(job.end_time());
  return std::nullopt;
}

void BindOptionalTime(SqliteStatement& stmt, int index, bool has, const google::protobuf::Timestamp& ts) {
  if (has) {
    stmt.Bind(index, ToMicros(ts));
  } else {
    stmt.BindNull(index);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("store: empty database path");
  ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(options.path));
  RETURN_IF_ERROR(SqliteStatus(
      sqlite3_busy_timeout(db.raw(), static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout))),
      db.raw(), "busy_timeout"));
  if (options.path != ":memory:") {
    ASSIGN_OR_RETURN(std::string mode, db.QueryText("PRAGMA journal_mode=WAL"));
    if (mode != "wal") {
      return absl::UnavailableError(
          absl::StrCat("store: ", options.path, ": cannot enable WAL journaling (got \"", mode, "\")"));
    }
  }
  RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Migrate(&db, StoreMigrations()));
  ASSIGN_OR_RETURN(int version, SchemaVersion(&db));
  return std::unique_ptr<Store>(new Store(std::move(db), version));
}

absl::StatusOr<std::optional<JobRecord>> Store::FindByRequestIdLocked(const std::string& request_id) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE request_id = ?")));
  stmt.Bind(1, request_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<JobRecord>();
  ASSIGN_OR_RETURN(JobRecord record, ReadJobRow(stmt));
  if (record.job.generation() > 0) {
    ASSIGN_OR_RETURN(*record.job.mutable_placement(),
                     LoadPlacementLocked(record.job.id(), record.job.generation()));
  }
  return std::optional<JobRecord>(std::move(record));
}

absl::StatusOr<JobRecord> Store::CreateJob(const JobRecord& record, v1::JobEvent submitted, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  *created = false;
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  if (!record.request_id.empty()) {
    ASSIGN_OR_RETURN(std::optional<JobRecord> existing, FindByRequestIdLocked(record.request_id));
    if (existing.has_value()) return *std::move(existing);
  }
  const v1::Job& job = record.job;
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   db_.Prepare("INSERT INTO jobs (request_id, user, spec, state, priority, generation, "
                               "restarts, submit_time_us, start_time_us, end_time_us, reason, message, submitted) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  if (record.request_id.empty()) {
    insert.BindNull(1);
  } else {
    insert.Bind(1, record.request_id);
  }
  insert.Bind(2, record.user)
      .BindBlob(3, job.spec().SerializeAsString())
      .Bind(4, static_cast<int64_t>(job.state()))
      .Bind(5, static_cast<int64_t>(job.spec().priority()))
      .Bind(6, job.generation())
      .Bind(7, static_cast<int64_t>(job.restarts()))
      .Bind(8, ToMicros(job.submit_time()));
  BindOptionalTime(insert, 9, job.has_start_time(), job.start_time());
  BindOptionalTime(insert, 10, job.has_end_time(), job.end_time());
  insert.Bind(11, job.reason()).Bind(12, job.message());
  if (job.has_submitted()) {
    insert.BindBlob(13, job.submitted().SerializeAsString());
  } else {
    insert.BindNull(13);
  }
  RETURN_IF_ERROR(insert.Run());

  JobRecord out = record;
  out.submit_seq = db_.LastInsertRowId();
  out.job.set_id(absl::StrCat("j-", out.submit_seq));
  ASSIGN_OR_RETURN(SqliteStatement set_id, db_.Prepare("UPDATE jobs SET id = ? WHERE submit_seq = ?"));
  set_id.Bind(1, out.job.id()).Bind(2, out.submit_seq);
  RETURN_IF_ERROR(set_id.Run());
  std::vector<v1::JobEvent> events;
  events.push_back(std::move(submitted));
  RETURN_IF_ERROR(AppendEventsLocked(out.job.id(), std::move(events)).status());
  RETURN_IF_ERROR(txn.Commit());
  *created = true;
  return out;
}

absl::StatusOr<std::vector<v1::JobEvent>> Store::UpdateJob(const JobRecord& record,
                                                           std::vector<v1::JobEvent> events,
                                                           const v1::Placement* placement) {
  std::lock_guard<std::mutex> lock(mu_);
  const v1::Job& job = record.job;
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  ASSIGN_OR_RETURN(SqliteStatement update,
                   db_.Prepare("UPDATE jobs SET spec = ?, state = ?, priority = ?, generation = ?, "
                               "restarts = ?, start_time_us = ?, end_time_us = ?, reason = ?, "
                               "message = ?, goodput = COALESCE(?, goodput) WHERE id = ?"));
  update.BindBlob(1, job.spec().SerializeAsString())
      .Bind(2, static_cast<int64_t>(job.state()))
      .Bind(3, static_cast<int64_t>(job.spec().priority()))
      .Bind(4, job.generation())
      .Bind(5, static_cast<int64_t>(job.restarts()));
  BindOptionalTime(update, 6, job.has_start_time(), job.start_time());
  BindOptionalTime(update, 7, job.has_end_time(), job.end_time());
  update.Bind(8, job.reason()).Bind(9, job.message());
  if (job.has_goodput()) {
    update.BindBlob(10, job.goodput().SerializeAsString());
  } else {
    update.BindNull(10);  // the stored account stays
  }
  update.Bind(11, job.id());
  RETURN_IF_ERROR(update.Run());
  if (db_.Changes() == 0) return absl::NotFoundError(absl::StrCat("job ", job.id(), " not found"));
  if (!HoldsPlacement(job.state())) {
    if (std::optional<int64_t> ended_us = TransitionMicros(job, events)) {
      RETURN_IF_ERROR(EndPlacementsLocked(job.id(), *ended_us));
    }
  }
  if (placement != nullptr) {
    int64_t created_us = events.empty() ? 0 : ToMicros(events.front().time());
    RETURN_IF_ERROR(EndPlacementsLocked(job.id(), created_us));  // at most one held per job
    RETURN_IF_ERROR(InsertPlacementLocked(record, *placement, created_us));
  }
  ASSIGN_OR_RETURN(std::vector<v1::JobEvent> stored, AppendEventsLocked(job.id(), std::move(events)));
  RETURN_IF_ERROR(txn.Commit());
  return stored;
}

absl::StatusOr<std::vector<v1::JobEvent>> Store::AppendEventsLocked(const std::string& job_id,
                                                                    std::vector<v1::JobEvent> events) {
  if (events.empty()) return events;
  ASSIGN_OR_RETURN(SqliteStatement last,
                   db_.Prepare("SELECT COALESCE(MAX(sequence), 0) FROM job_events WHERE job_id = ?"));
  last.Bind(1, job_id);
  ASSIGN_OR_RETURN(bool row, last.Step());
  int64_t sequence = row ? last.ColumnInt(0) : 0;
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   db_.Prepare("INSERT INTO job_events (job_id, sequence, time_us, from_state, to_state, "
                               "kind, reason, generation, rank, node_id, folded) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"));
  std::set<v1::JobEventKind> kinds;
  for (v1::JobEvent& e : events) {
    e.set_job_id(job_id);
    e.set_sequence(++sequence);
    e.set_folded(0);
    kinds.insert(e.kind());
    insert.Reset();
    insert.Bind(1, job_id)
        .Bind(2, e.sequence())
        .Bind(3, ToMicros(e.time()))
        .Bind(4, static_cast<int64_t>(e.from_state()))
        .Bind(5, static_cast<int64_t>(e.to_state()))
        .Bind(6, static_cast<int64_t>(e.kind()))
        .Bind(7, e.reason())
        .Bind(8, e.generation())
        .Bind(9, static_cast<int64_t>(e.rank()))
        .Bind(10, e.node_id());
    RETURN_IF_ERROR(insert.Run());
  }
  for (v1::JobEventKind kind : kinds) RETURN_IF_ERROR(CompactEventsLocked(job_id, kind));
  return events;
}

absl::Status Store::CompactEventsLocked(const std::string& job_id, v1::JobEventKind kind) {
  ASSIGN_OR_RETURN(SqliteStatement count,
                   db_.Prepare("SELECT COUNT(*) FROM job_events WHERE job_id = ? AND kind = ?"));
  count.Bind(1, job_id).Bind(2, static_cast<int64_t>(kind));
  ASSIGN_OR_RETURN(bool counted, count.Step());
  const int64_t excess = (counted ? count.ColumnInt(0) : 0) - 1 - kEventsKeptPerKind;
  if (excess <= 0) return absl::OkStatus();
  // After the first: the `excess` oldest go, and the one after them counts them.
  ASSIGN_OR_RETURN(SqliteStatement oldest,
                   db_.Prepare("SELECT sequence, folded FROM job_events WHERE job_id = ? AND kind = ? "
                               "ORDER BY sequence LIMIT ? OFFSET 1"));
  oldest.Bind(1, job_id).Bind(2, static_cast<int64_t>(kind)).Bind(3, excess + 1);
  int64_t first_folded = 0, last_folded = 0, keeper = 0, folded = 0;
  for (int64_t i = 0; i <= excess; ++i) {
    ASSIGN_OR_RETURN(bool row, oldest.Step());
    if (!row) return absl::InternalError(absl::StrCat("store: events of job ", job_id, " changed while compacted"));
    if (i == 0) first_folded = oldest.ColumnInt(0);
    if (i < excess) {
      last_folded = oldest.ColumnInt(0);
      folded += oldest.ColumnInt(1) + 1;
    } else {
      keeper = oldest.ColumnInt(0);
      folded += oldest.ColumnInt(1);
    }
  }
  ASSIGN_OR_RETURN(SqliteStatement drop,
                   db_.Prepare("DELETE FROM job_events WHERE job_id = ? AND kind = ? AND sequence >= ? "
                               "AND sequence <= ?"));
  drop.Bind(1, job_id).Bind(2, static_cast<int64_t>(kind)).Bind(3, first_folded).Bind(4, last_folded);
  RETURN_IF_ERROR(drop.Run());
  ASSIGN_OR_RETURN(SqliteStatement count_in,
                   db_.Prepare("UPDATE job_events SET folded = ? WHERE job_id = ? AND sequence = ?"));
  count_in.Bind(1, folded).Bind(2, job_id).Bind(3, keeper);
  return count_in.Run();
}

absl::Status Store::InsertPlacementLocked(const JobRecord& record, const v1::Placement& p, int64_t created_us) {
  const std::string& job_id = record.job.id();
  const v1::JobSpec& spec = record.job.spec();
  int64_t gpus = 0, cpu_ranks = 0;
  for (const v1::RankAssignment& r : p.ranks()) {
    if (r.gpu_uuid().empty()) {
      ++cpu_ranks;
    } else {
      ++gpus;
    }
  }
  const int64_t cpus_per_rank = spec.resources().has_cpus_per_rank() ? spec.resources().cpus_per_rank() : 1;
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   db_.Prepare("INSERT INTO placements (job_id, generation, world_size, data_parallel_size, "
                               "pipeline_parallel_size, nodes, ranks_per_node, created_us, user, queue, gpus, "
                               "cpu_slots, ended_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)"));
  insert.Bind(1, job_id)
      .Bind(2, p.generation())
      .Bind(3, static_cast<int64_t>(p.world_size()))
      .Bind(4, static_cast<int64_t>(p.data_parallel_size()))
      .Bind(5, static_cast<int64_t>(p.pipeline_parallel_size()))
      .Bind(6, static_cast<int64_t>(p.nodes()))
      .Bind(7, static_cast<int64_t>(p.ranks_per_node()))
      .Bind(8, created_us)
      .Bind(9, record.user)
      .Bind(10, spec.queue().empty() ? absl::string_view(kDefaultQueueName) : absl::string_view(spec.queue()))
      .Bind(11, gpus)
      .Bind(12, cpu_ranks * cpus_per_rank);
  RETURN_IF_ERROR(insert.Run());
  ASSIGN_OR_RETURN(SqliteStatement rank,
                   db_.Prepare("INSERT INTO rank_assignments (job_id, generation, global_rank, local_rank, "
                               "node_rank, node_id, hostname, data_rank, pipeline_rank, gpu_uuid) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (const v1::RankAssignment& r : p.ranks()) {
    rank.Reset();
    rank.Bind(1, job_id)
        .Bind(2, p.generation())
        .Bind(3, static_cast<int64_t>(r.global_rank()))
        .Bind(4, static_cast<int64_t>(r.local_rank()))
        .Bind(5, static_cast<int64_t>(r.node_rank()))
        .Bind(6, r.node_id())
        .Bind(7, r.hostname())
        .Bind(8, static_cast<int64_t>(r.data_rank()))
        .Bind(9, static_cast<int64_t>(r.pipeline_rank()))
        .Bind(10, r.gpu_uuid());
    RETURN_IF_ERROR(rank.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Placement> Store::LoadPlacementLocked(const std::string& job_id, int64_t generation) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare("SELECT world_size, data_parallel_size, pipeline_parallel_size, nodes, "
                               "ranks_per_node FROM placements WHERE job_id = ? AND generation = ?"));
  stmt.Bind(1, job_id).Bind(2, generation);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no placement for generation ", generation));
  }
  v1::Placement p;
  p.set_generation(generation);
  p.set_world_size(static_cast<int32_t>(stmt.ColumnInt(0)));
  p.set_data_parallel_size(static_cast<int32_t>(stmt.ColumnInt(1)));
  p.set_pipeline_parallel_size(static_cast<int32_t>(stmt.ColumnInt(2)));
  p.set_nodes(static_cast<int32_t>(stmt.ColumnInt(3)));
  p.set_ranks_per_node(static_cast<int32_t>(stmt.ColumnInt(4)));
  ASSIGN_OR_RETURN(SqliteStatement ranks,
                   db_.Prepare("SELECT global_rank, local_rank, node_rank, node_id, hostname, data_rank, "
                               "pipeline_rank, gpu_uuid FROM rank_assignments WHERE job_id = ? AND "
                               "generation = ? ORDER BY global_rank"));
  ranks.Bind(1, job_id).Bind(2, generation);
  while (true) {
    ASSIGN_OR_RETURN(bool more, ranks.Step());
    if (!more) break;
    v1::RankAssignment* r = p.add_ranks();
    r->set_global_rank(static_cast<int32_t>(ranks.ColumnInt(0)));
    r->set_local_rank(static_cast<int32_t>(ranks.ColumnInt(1)));
    r->set_node_rank(static_cast<int32_t>(ranks.ColumnInt(2)));
    r->set_node_id(ranks.ColumnText(3));
    r->set_hostname(ranks.ColumnText(4));
    r->set_data_rank(static_cast<int32_t>(ranks.ColumnInt(5)));
    r->set_pipeline_rank(static_cast<int32_t>(ranks.ColumnInt(6)));
    r->set_gpu_uuid(ranks.ColumnText(7));
  }
  return p;
}

absl::StatusOr<v1::Placement> Store::LoadPlacement(const std::string& job_id, int64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadPlacementLocked(job_id, generation);
}

absl::Status Store::DeleteJobs(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  // Placements stay: the accounting record (store.h).
  for (const char* table : {"job_events", "rank_assignments", "checkpoint_shards", "checkpoints"}) {
    ASSIGN_OR_RETURN(SqliteStatement del, db_.Prepare(absl::StrCat("DELETE FROM ", table, " WHERE job_id = ?")));
    for (const std::string& id : job_ids) {
      del.Reset();
      del.Bind(1, id);
      RETURN_IF_ERROR(del.Run());
    }
  }
  ASSIGN_OR_RETURN(SqliteStatement del, db_.Prepare("DELETE FROM jobs WHERE id = ?"));
  for (const std::string& id : job_ids) {
    del.Reset();
    del.Bind(1, id);
    RETURN_IF_ERROR(del.Run());
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<JobRecord>> Store::LoadJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY submit_seq")));
  std::vector<JobRecord> jobs;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(JobRecord record, ReadJobRow(stmt));
    jobs.push_back(std::move(record));
  }
  for (JobRecord& record : jobs) {
    if (record.job.generation() == 0) continue;
    absl::StatusOr<v1::Placement> p = LoadPlacementLocked(record.job.id(), record.job.generation());
    if (p.ok()) {
      *record.job.mutable_placement() = *std::move(p);
    } else if (!absl::IsNotFound(p.status())) {
      return p.status();
    }
  }
  return jobs;
}

absl::StatusOr<EventPage> Store::LoadEventPage(const std::string& job_id, const EventPageQuery& query) {
  const int max_events = std::max(query.max_events, 1);
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare("SELECT sequence, time_us, from_state, to_state, kind, substr(reason, 1, ?), "
                               "length(CAST(reason AS BLOB)), generation, rank, node_id, folded FROM job_events "
                               "WHERE job_id = ? AND sequence > ? AND sequence < ? ORDER BY sequence DESC LIMIT ?"));
  stmt.Bind(1, static_cast<int64_t>(kMaxStoredEventReasonBytes))
      .Bind(2, job_id)
      .Bind(3, query.after_sequence)
      .Bind(4, query.before_sequence > 0 ? query.before_sequence : INT64_MAX)
      .Bind(5, int64_t{max_events} + 1);
  EventPage page;
  size_t bytes = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    v1::JobEvent e;
    e.set_job_id(job_id);
    e.set_sequence(stmt.ColumnInt(0));
    *e.mutable_time() = FromMicros(stmt.ColumnInt(1));
    e.set_from_state(static_cast<v1::JobState>(stmt.ColumnInt(2)));
    e.set_to_state(static_cast<v1::JobState>(stmt.ColumnInt(3)));
    e.set_kind(static_cast<v1::JobEventKind>(stmt.ColumnInt(4)));
    // At most kMaxStoredEventReasonBytes characters read; cut to as many bytes.
    std::string reason = stmt.ColumnText(5);
    if (static_cast<size_t>(stmt.ColumnInt(6)) > kMaxStoredEventReasonBytes) {
      reason.resize(Utf8SafePrefix(reason, kMaxStoredEventReasonBytes - 16));
      reason += " [... cut]";
    }
    e.set_reason(std::move(reason));
    e.set_generation(stmt.ColumnInt(7));
    e.set_rank(static_cast<int32_t>(stmt.ColumnInt(8)));
    e.set_node_id(stmt.ColumnText(9));
    e.set_folded(stmt.ColumnInt(10));
    const size_t size = e.ByteSizeLong() + 8;  // and its framing in a repeated field
    const bool full = static_cast<int>(page.events.size()) == max_events;
    if (full || (!page.events.empty() && bytes + size > query.max_bytes)) {
      page.more = true;
      break;
    }
    bytes += size;
    page.events.push_back(std::move(e));
  }
  std::reverse(page.events.begin(), page.events.end());
  return page;
}

absl::StatusOr<std::vector<v1::JobEvent>> Store::LoadEvents(const std::string& job_id, int64_t after_sequence) {
  std::vector<std::vector<v1::JobEvent>> pages;  // newest first
  EventPageQuery query;
  query.after_sequence = after_sequence;
  query.max_events = 1000;
  while (true) {
    ASSIGN_OR_RETURN(EventPage page, LoadEventPage(job_id, query));
    if (!page.events.empty()) query.before_sequence = page.events.front().sequence();
    pages.push_back(std::move(page.events));
    if (!page.more) break;
  }
  std::vector<v1::JobEvent> events;
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    for (v1::JobEvent& e : *it) events.push_back(std::move(e));
  }
  return events;
}

}  // namespace ringmaster::coordinator
