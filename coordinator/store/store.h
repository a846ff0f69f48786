#ifndef RINGMASTER_COORDINATOR_STORE_H_
#define RINGMASTER_COORDINATOR_STORE_H_

// Store: the coordinator's durable state in one embedded SQLite database.
//
// Owns the database file and its schema (coordinator/store_schema.h). Every
// method that changes state is ONE transaction: a job and its event, a
// placement with its rank assignments and event, a checkpoint shard with
// the retention it causes. The database runs in WAL mode with
// synchronous=FULL, so a method that returned OK survives a crash of the
// process or the machine; a crash mid-method leaves the previous state.
// A coordinator that restarts reloads everything with the Load* methods.
//
// What is NOT stored: node leases (a restarted coordinator grants every
// known node a fresh lease), rank progress (re-reported by the trainers),
// rendezvous state (per generation, in memory).
//
// Errors: ABORTED when the database is locked by another process (retry the
// call), UNAVAILABLE for I/O errors, DATA_LOSS for a corrupt file,
// FAILED_PRECONDITION at Open for a schema newer than this binary, NOT_FOUND
// for an unknown job in UpdateJob / LoadPlacement.
//
// Timelines are bounded: of each event kind a job keeps its first event and
// the newest kEventsKeptPerKind; appending one more deletes the oldest of
// those newest ones and adds it (and what it had folded) to `folded` of the
// next one of its kind, in the same transaction. Reads of a timeline come in
// pages (LoadEventPage), each under the mutex for that page only.
//
// Thread-safe: one connection, serialized by an internal mutex.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/store/sqlite_db.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

// Of each event kind, a job's timeline keeps the first event and this many
// newest (proto/job.proto, JobEvent).
inline constexpr int kEventsKeptPerKind = 32;
// An event's reason as read back: longer ones (an older coordinator stored
// them unbounded) are cut to this many bytes.
inline constexpr size_t kMaxStoredEventReasonBytes = 2048;

// Which page of a job's timeline to read (Store::LoadEventPage).
struct EventPageQuery {
  int64_t after_sequence = 0;   // only events with a larger sequence
  int64_t before_sequence = 0;  // only events with a smaller sequence; 0: no bound
  int max_events = 100;         // >= 1
  size_t max_bytes = size_t{1} << 20;  // serialized events; the first event always fits
};

// The newest events matching an EventPageQuery that fit, oldest first.
struct EventPage {
  std::vector<v1::JobEvent> events;
  // Matching events older than events.front() were left out (the page was
  // full): read them with before_sequence = events.front().sequence().
  bool more = false;
};

struct StoreOptions {
  // The database file (created if absent; its directory must exist).
  // ":memory:" gives a private in-memory database (tests only).
  std::string path;
  // How long a write waits for a lock held by another connection before
  // failing with ABORTED.
  absl::Duration busy_timeout = absl::Seconds(5);
};

// A job as stored. `job` holds every persistent Job field: id, spec, state,
// generation, restarts, submit/start/end times, reason, message, the goodput
// account as of its last event (Job.goodput; absent when none was stored:
// jobs stored before schema 7, or not updated since submission), and (when
// loaded) the current generation's placement. Job.progress and
// Job.last_checkpoint are not stored here.
struct JobRecord {
  v1::Job job;
  int64_t submit_seq = 0;  // FIFO order within a priority; assigned by CreateJob
  std::string user;        // who submitted it; empty until authentication exists
  std::string request_id;  // SubmitJobRequest.request_id; empty: none
};

// One checkpoint as stored, with its retention status.
struct StoredCheckpoint {
  v1::CheckpointInfo info;  // shards included, ordered by pipeline_stage
  bool pruned = false;      // fell out of retention; never offered again
  int64_t pruned_by_generation = 0;  // the commit that pruned it (if pruned)
  int64_t pruned_by_step = 0;
};

struct CheckpointKey {
  std::string job_id;
  int64_t generation = 0;
  int64_t step = 0;
};

// Everything one checkpoint commit changes, written in one transaction.
struct CheckpointWrite {
  v1::CheckpointInfo info;    // the checkpoint after the commit (shards ignored)
  v1::CheckpointShard shard;  // the shard committed (pipeline_stage, rank, files, commit_time)
  // Checkpoints this commit prunes (marked pruned_by info's generation/step).
  std::vector<CheckpointKey> prune;
  // Appended to the job's timeline in the same transaction, if set.
  std::optional<v1::JobEvent> event;
  // With event: the job's goodput account after it, stored with it.
  std::optional<v1::GoodputBreakdown> goodput;
};

// The queue recorded for a job whose spec names none (jobs submitted before
// queues existed): the name of the one queue a coordinator without a queues
// file has.
inline constexpr char kDefaultQueueName[] = "default";

// How Store::LoadUsage groups placements.
enum class UsageGroup { kUser, kQueue, kJob };

struct UsageQuery {
  UsageGroup by = UsageGroup::kUser;
  // Usage within [since, now]: a placement that began earlier counts from
  // `since`; one still held counts up to `now`.
  absl::Time since = absl::InfinitePast();
  absl::Time now;
  std::string user;  // only this user's placements; empty: everyone's
};

// One placement's hold on slots, as fair share reads it back after a restart.
struct PlacementHold {
  std::string queue;
  absl::Time start;
  absl::Time end = absl::InfiniteFuture();  // still held
  int64_t gpus = 0;
  int64_t cpu_slots = 0;
};

// One group's usage: slot-seconds within the query's window.
struct UsageTotal {
  std::string key;  // the user, queue or job id
  double gpu_seconds = 0;
  double cpu_slot_seconds = 0;
  int64_t placements = 0;  // generations that held slots within the window
};

class Store {
 public:
  // Opens or creates the database, sets WAL + synchronous=FULL + the busy
  // timeout and applies pending migrations.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  int schema_version() const { return schema_version_; }

  // ---- jobs ----

  // Inserts a new job with its first event (kind SUBMITTED) in one
  // transaction; assigns submit_seq and the id "j-<submit_seq>" (never
  // reused) and the event's sequence (1). If record.request_id is set and a
  // job with that request id exists, nothing is written and that job is
  // returned with *created = false.
  absl::StatusOr<JobRecord> CreateJob(const JobRecord& record, v1::JobEvent submitted, bool* created);

  // Writes a job's state (everything but id, submit_seq, user, request_id,
  // submit_time; the goodput account when record.job has one), appends
  // `events` (their job_id and sequence are assigned here: the next numbers
  // of the job's timeline) and, if `placement` is
  // not null, records that generation's placement and rank assignments; all
  // in one transaction. The placement is recorded with the job's user, queue
  // (spec.queue; empty: kDefaultQueueName) and slots, held from the first
  // event's time. When the job's new state is not PLACED, STARTING or RUNNING,
  // its held placement ends at the time of the event that changed the state,
  // in the same transaction. Returns the events as stored.
  absl::StatusOr<std::vector<v1::JobEvent>> UpdateJob(const JobRecord& record,
                                                       std::vector<v1::JobEvent> events,
                                                       const v1::Placement* placement);

  // Every job in submit order, each with its current generation's placement.
  // Deletes the jobs and everything stored of them (events, rank
  // assignments, checkpoint records) in one transaction (retention of
  // finished jobs), but their placements: those are the accounting record
  // (LoadUsage), one small row per generation. Unknown ids are ignored.
  absl::Status DeleteJobs(const std::vector<std::string>& job_ids);
  absl::StatusOr<std::vector<JobRecord>> LoadJobs();
  // One page of a job's timeline (see EventPageQuery); the mutex is held for
  // that page only.
  absl::StatusOr<EventPage> LoadEventPage(const std::string& job_id, const EventPageQuery& query);
  // A job's events with sequence > after_sequence, in order: LoadEventPage
  // page after page (the timeline is bounded, so this is too).
  absl::StatusOr<std::vector<v1::JobEvent>> LoadEvents(const std::string& job_id, int64_t after_sequence);
  // One generation's placement; NOT_FOUND if that generation was never placed.
  absl::StatusOr<v1::Placement> LoadPlacement(const std::string& job_id, int64_t generation);

  // ---- accounting ----

  // Slot-seconds per group, by key, from every placement's [created, ended
  // or now] (one query over the placements table). A placement is held from
  // the event that placed its generation to the event that took the job out
  // of PLACED/STARTING/RUNNING (UpdateJob records both in their
  // transactions).
  absl::StatusOr<std::vector<UsageTotal>> LoadUsage(const UsageQuery& query);
  // Every placement held at or after `since` (still held ones included), in
  // no particular order: what the queues' fair share is seeded from.
  absl::StatusOr<std::vector<PlacementHold>> LoadPlacementHolds(absl::Time since);

  // ---- nodes ----

  // Inserts or updates a node (node_id, hostname, address, gpus, cpu_slots,
  // labels, worker_version, state, register_time; lease and allocations are
  // not stored). An empty node_id, or one this database never assigned, gets
  // a new id "n-<seq>". Returns the node's id.
  absl::StatusOr<std::string> PutNode(const v1::NodeInfo& node);
  // PutNode for each node, in order, in one transaction (one fsync): all are
  // written or none. Returns their ids, in order.
  absl::StatusOr<std::vector<std::string>> PutNodes(const std::vector<v1::NodeInfo>& nodes);
  // Every node ever registered, in registration order.
  absl::StatusOr<std::vector<v1::NodeInfo>> LoadNodes();

  // ---- checkpoints ----

  // Records a shard, the checkpoint row, the retention it causes and the
  // event (if any), in one transaction. Returns the event as stored.
  absl::StatusOr<std::optional<v1::JobEvent>> CommitCheckpoint(const CheckpointWrite& write);
  // Every checkpoint (pruned ones included) with its shards, by (job,
  // generation, step).
  absl::StatusOr<std::vector<StoredCheckpoint>> LoadCheckpoints();
  // Marks a checkpoint damaged (CheckpointInfo.damage, .damage_time) and
  // appends `event` to its job's timeline, in one transaction. Returns the
  // event as stored. NOT_FOUND for an unknown checkpoint.
  absl::StatusOr<v1::JobEvent> MarkCheckpointDamaged(const CheckpointKey& key, const std::string& damage,
                                                     const google::protobuf::Timestamp& time, v1::JobEvent event);

 private:
  Store(SqliteDb db, int schema_version) : db_(std::move(db)), schema_version_(schema_version) {}

  // Helpers; the caller holds mu_ and an open transaction.
  absl::StatusOr<std::vector<v1::JobEvent>> AppendEventsLocked(const std::string& job_id,
                                                               std::vector<v1::JobEvent> events);
  // Folds the job's events of `kind` beyond the first and the newest
  // kEventsKeptPerKind (see above).
  absl::Status CompactEventsLocked(const std::string& job_id, v1::JobEventKind kind);
  absl::Status InsertPlacementLocked(const JobRecord& record, const v1::Placement& placement,
                                     int64_t created_us);
  // Ends the job's placements still held (ended_us NULL) at `ended_us`.
  absl::Status EndPlacementsLocked(const std::string& job_id, int64_t ended_us);
  absl::StatusOr<v1::Placement> LoadPlacementLocked(const std::string& job_id, int64_t generation);
  absl::StatusOr<std::optional<JobRecord>> FindByRequestIdLocked(const std::string& request_id);
  absl::StatusOr<std::string> PutNodeLocked(const v1::NodeInfo& node);

  std::mutex mu_;
  SqliteDb db_;
  const int schema_version_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_STORE_H_
