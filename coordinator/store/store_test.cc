#include "coordinator/store/store.h"

#include <memory>
#include <string>

#include "common/proto_time.h"
#include "coordinator/store/sqlite_db.h"
#include "coordinator/store/store_schema.h"
#include "coordinator/testing/test_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::MakeNode;
using testing::MakeSpec;
using testing::NewTempDir;

const absl::Time kT0 = absl::FromUnixSeconds(1795000000);  // 2026-11-18

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

v1::JobEvent Event(v1::JobEventKind kind, v1::JobState from, v1::JobState to, int64_t gen, absl::Time t,
                   const std::string& reason) {
  v1::JobEvent e;
  e.set_kind(kind);
  e.set_from_state(from);
  e.set_to_state(to);
  e.set_generation(gen);
  *e.mutable_time() = ToProtoTime(t);
  e.set_reason(reason);
  e.set_rank(-1);
  return e;
}

JobRecord NewJob(int priority, absl::Time t) {
  JobRecord r;
  *r.job.mutable_spec() = MakeSpec(1, 2, v1::ResourceSpec::CUDA, priority);
  r.job.set_state(v1::JOB_STATE_QUEUED);
  *r.job.mutable_submit_time() = ToProtoTime(t);
  r.user = "alice";
  return r;
}

v1::Placement TwoRankPlacement(int64_t gen) {
  v1::Placement p;
  p.set_generation(gen);
  p.set_world_size(2);
  p.set_data_parallel_size(2);
  p.set_pipeline_parallel_size(1);
  p.set_nodes(1);
  p.set_ranks_per_node(2);
  for (int r = 0; r < 2; ++r) {
    v1::RankAssignment* a = p.add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r);
    a->set_node_id("n-1");
    a->set_hostname("host-a");
    a->set_data_rank(r);
    a->set_gpu_uuid("host-a-gpu" + std::to_string(r));
  }
  return p;
}

TEST(StoreTest, FreshDatabaseIsAtLatestSchemaInWalMode) {
  std::string path = NewTempDir("store") + "/rm.db";
  std::unique_ptr<Store> store = OpenOrDie(path);
  EXPECT_EQ(store->schema_version(), static_cast<int>(StoreMigrations().size()));
  absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw->QueryText("PRAGMA journal_mode"), "wal");
}

TEST(StoreTest, CreateJobAssignsIncreasingIdsAndFirstEvent) {
  std::unique_ptr<Store> store = OpenOrDie(NewTempDir("store") + "/rm.db");
  bool created = false;
  absl::StatusOr<JobRecord> a = store->CreateJob(
      NewJob(0, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, "submitted"),
      &created);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(created);
  EXPECT_EQ(a->job.id(), "j-1");
  EXPECT_EQ(a->submit_seq, 1);
  absl::StatusOr<JobRecord> b = store->CreateJob(NewJob(0, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, ""), &created);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->job.id(), "j-2");
  absl::StatusOr<std::vector<v1::JobEvent>> events = store->LoadEvents("j-1", 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].sequence(), 1);
  EXPECT_EQ((*events)[0].job_id(), "j-1");
  EXPECT_EQ((*events)[0].reason(), "submitted");
}

TEST(StoreTest, RequestIdMakesCreateIdempotent) {
  std::unique_ptr<Store> store = OpenOrDie(NewTempDir("store") + "/rm.db");
  JobRecord r = NewJob(0, kT0);
  r.request_id = "req-42";
  v1::JobEvent e = Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, "");
  bool created = false;
  absl::StatusOr<JobRecord> first = store->CreateJob(r, e, &created);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(created);
  absl::StatusOr<JobRecord> again = store->CreateJob(r, e, &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->job.id(), first->job.id());
  EXPECT_EQ(store->LoadJobs()->size(), 1u);
  EXPECT_EQ(store->LoadEvents(first->job.id(), 0)->size(), 1u);
}

TEST(StoreTest, UpdateOfUnknownJobIsNotFoundAndWritesNothing) {
  std::unique_ptr<Store> store = OpenOrDie(NewTempDir("store") + "/rm.db");
  JobRecord r = NewJob(0, kT0);
  r.job.set_id("j-99");
  v1::Placement p = TwoRankPlacement(1);
  absl::StatusOr<std::vector<v1::JobEvent>> s = store->UpdateJob(
      r, {Event(v1::JOB_EVENT_KIND_PLACED, v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED, 1, kT0, "")}, &p);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->LoadEvents("j-99", 0)->empty());
  EXPECT_EQ(store->LoadPlacement("j-99", 1).status().code(), absl::StatusCode::kNotFound);
}

// Everything written survives close + reopen: jobs (queue order, state,
// generation, times), timelines, placements, nodes, checkpoints; ids are
// never reused after a reopen.
TEST(StoreTest, ReopenKeepsEverything) {
  std::string path = NewTempDir("store") + "/rm.db";
  std::vector<JobRecord> jobs_before;
  std::vector<v1::JobEvent> events_before;
  std::vector<v1::NodeInfo> nodes_before;
  std::vector<StoredCheckpoint> checkpoints_before;
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    bool created;
    for (int prio : {0, 5, 0}) {
      ASSERT_TRUE(store->CreateJob(NewJob(prio, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, "submitted"), &created).ok());
    }
    JobRecord j2 = store->LoadJobs()->at(1);
    j2.job.set_state(v1::JOB_STATE_PLACED);
    j2.job.set_generation(1);
    j2.job.set_message("placed on host-a");
    v1::Placement p = TwoRankPlacement(1);
    ASSERT_TRUE(store->UpdateJob(j2, {Event(v1::JOB_EVENT_KIND_PLACED, v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED, 1, kT0 + absl::Seconds(1), "placed")}, &p).ok());
    j2.job.set_state(v1::JOB_STATE_RUNNING);
    *j2.job.mutable_start_time() = ToProtoTime(kT0 + absl::Seconds(2));
    ASSERT_TRUE(store->UpdateJob(j2, {Event(v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_PLACED, v1::JOB_STATE_STARTING, 1, kT0 + absl::Seconds(2), ""),
                                      Event(v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING, 1, kT0 + absl::Seconds(2), "")},
                                 nullptr).ok());
    v1::NodeInfo node = MakeNode("host-a", 8, 64, {{"rack", "a3"}});
    node.set_state(v1::NODE_STATE_READY);
    *node.mutable_register_time() = ToProtoTime(kT0);
    absl::StatusOr<std::string> id = store->PutNode(node);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, "n-1");
    CheckpointWrite w;
    w.info.set_job_id("j-2");
    w.info.set_generation(1);
    w.info.set_step(100);
    w.info.set_path("/ckpt/j-2/step-100");
    w.info.set_pipeline_stages(1);
    w.info.set_complete(true);
    w.info.set_total_bytes(1234);
    *w.info.mutable_commit_time() = ToProtoTime(kT0 + absl::Seconds(3));
    w.shard.set_pipeline_stage(0);
    w.shard.set_rank(0);
    v1::CheckpointFile* f = w.shard.add_files();
    f->set_path("model.safetensors");
    f->set_size_bytes(1234);
    f->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
    f->mutable_checksum()->set_hex("0badf00d");
    *w.shard.mutable_commit_time() = w.info.commit_time();
    w.event = Event(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RUNNING, 1, kT0 + absl::Seconds(3), "step 100");
    absl::StatusOr<std::optional<v1::JobEvent>> ev = store->CommitCheckpoint(w);
    ASSERT_TRUE(ev.ok()) << ev.status();
    ASSERT_TRUE(ev->has_value());
    EXPECT_EQ((*ev)->sequence(), 5);

    jobs_before = *store->LoadJobs();
    events_before = *store->LoadEvents("j-2", 0);
    nodes_before = *store->LoadNodes();
    checkpoints_before = *store->LoadCheckpoints();
  }
  std::unique_ptr<Store> store = OpenOrDie(path);
  std::vector<JobRecord> jobs = *store->LoadJobs();
  ASSERT_EQ(jobs.size(), 3u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(jobs[i].job, jobs_before[i].job)) << jobs[i].job.DebugString();
    EXPECT_EQ(jobs[i].submit_seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(jobs[i].user, "alice");
  }
  EXPECT_EQ(jobs[1].job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs[1].job.placement().ranks_size(), 2);
  EXPECT_EQ(jobs[1].job.placement().ranks(1).gpu_uuid(), "host-a-gpu1");
  EXPECT_EQ(jobs[1].job.spec().priority(), 5);

  std::vector<v1::JobEvent> events = *store->LoadEvents("j-2", 0);
  ASSERT_EQ(events.size(), events_before.size());
  ASSERT_EQ(events.size(), 5u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(events[i], events_before[i]));
    EXPECT_EQ(events[i].sequence(), static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(store->LoadEvents("j-2", 3)->size(), 2u);

  std::vector<v1::NodeInfo> nodes = *store->LoadNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(nodes[0], nodes_before[0]));
  EXPECT_EQ(nodes[0].labels().at("rack"), "a3");
  EXPECT_EQ(nodes[0].gpus_size(), 8);

  std::vector<StoredCheckpoint> checkpoints = *store->LoadCheckpoints();
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(checkpoints[0].info, checkpoints_before[0].info));
  ASSERT_EQ(checkpoints[0].info.shards_size(), 1);
  EXPECT_EQ(checkpoints[0].info.shards(0).files(0).checksum().hex(), "0badf00d");

  bool created;
  absl::StatusOr<JobRecord> next = store->CreateJob(NewJob(0, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, ""), &created);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->job.id(), "j-4");
}

TEST(StoreTest, UnknownNodeIdGetsANewId) {
  std::unique_ptr<Store> store = OpenOrDie(NewTempDir("store") + "/rm.db");
  v1::NodeInfo node = MakeNode("host-a", 1);
  node.set_node_id("n-77");
  EXPECT_EQ(*store->PutNode(node), "n-1");
  node.set_node_id("n-1");
  node.set_address("10.0.0.9:1");
  EXPECT_EQ(*store->PutNode(node), "n-1");
  ASSERT_EQ(store->LoadNodes()->size(), 1u);
  EXPECT_EQ(store->LoadNodes()->at(0).address(), "10.0.0.9:1");
}

// ---- migrations ----

TEST(StoreTest, KeepsTheSubmittedSpecOlderJobsHaveNone) {
  std::string path = NewTempDir("store") + "/rm.db";
  {
    // A database of schema 3, with a job from before the submitted spec.
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    const std::vector<Migration> three(StoreMigrations().begin(), StoreMigrations().begin() + 3);
    ASSERT_TRUE(Migrate(&*raw, three).ok());
    ASSERT_TRUE(raw->Exec("INSERT INTO jobs (id, user, spec, state, priority, generation, restarts, submit_time_us) "
                          "VALUES ('j-1', '', x'', 1, 0, 0, 0, 0)")
                    .ok());
  }
  std::unique_ptr<Store> store = OpenOrDie(path);
  EXPECT_EQ(store->schema_version(), static_cast<int>(StoreMigrations().size()));
  JobRecord r = NewJob(0, kT0);
  r.job.mutable_submitted()->mutable_spec()->set_name("as-sent");
  r.job.mutable_submitted()->add_overrides("optimizer.lr=0.5");
  bool created = false;
  ASSERT_TRUE(store->CreateJob(r, Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED,
                                        v1::JOB_STATE_QUEUED, 0, kT0, ""),
                               &created)
                  .ok());
  std::vector<JobRecord> jobs = *OpenOrDie(path)->LoadJobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_FALSE(jobs[0].job.has_submitted());
  EXPECT_EQ(jobs[1].job.submitted().spec().name(), "as-sent");
  ASSERT_EQ(jobs[1].job.submitted().overrides_size(), 1);
  EXPECT_EQ(jobs[1].job.submitted().overrides(0), "optimizer.lr=0.5");
}

TEST(StoreSchemaTest, DatabaseNewerThanBinaryIsRefused) {
  std::string path = NewTempDir("schema") + "/rm.db";
  { OpenOrDie(path); }
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("UPDATE schema_version SET version = 99").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 99 is newer than this binary supports"),
            std::string::npos)
      << store.status();
}

TEST(StoreSchemaTest, MigrationsApplyInOrderAndOnlyOnce) {
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(":memory:");
  ASSERT_TRUE(db.ok());
  std::vector<Migration> v1 = {{1, "t1", "CREATE TABLE t1 (x INTEGER)"}};
  ASSERT_TRUE(Migrate(&*db, v1).ok());
  EXPECT_EQ(*SchemaVersion(&*db), 1);
  std::vector<Migration> v2 = {v1[0], {2, "t2", "CREATE TABLE t2 (y INTEGER); INSERT INTO t1 VALUES (7)"}};
  ASSERT_TRUE(Migrate(&*db, v2).ok());
  EXPECT_EQ(*SchemaVersion(&*db), 2);
  ASSERT_TRUE(Migrate(&*db, v2).ok());  // nothing left to do: t1 keeps one row
  EXPECT_EQ(*db->QueryInt("SELECT COUNT(*) FROM t1"), 1);
}

TEST(StoreSchemaTest, FailingMigrationRollsBackCompletely) {
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(":memory:");
  ASSERT_TRUE(db.ok());
  std::vector<Migration> migrations = {
      {1, "t1", "CREATE TABLE t1 (x INTEGER)"},
      {2, "broken", "CREATE TABLE t2 (y INTEGER); INSERT INTO no_such_table VALUES (1)"},
  };
  absl::Status s = Migrate(&*db, migrations);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("schema migration 2 (broken)"), std::string::npos) << s;
  EXPECT_EQ(*SchemaVersion(&*db), 1);
  EXPECT_EQ(*db->QueryInt("SELECT COUNT(*) FROM sqlite_master WHERE name = 't2'"), 0);
}

TEST(SqliteStatusTest, CodesTellTheCallerWhetherToRetry) {
  EXPECT_EQ(SqliteStatus(SQLITE_BUSY, nullptr, "x").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(SqliteStatus(SQLITE_IOERR_FSYNC, nullptr, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteStatus(SQLITE_FULL, nullptr, "x").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SqliteStatus(SQLITE_CORRUPT, nullptr, "x").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteStatus(SQLITE_CONSTRAINT_UNIQUE, nullptr, "x").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(SqliteStatus(SQLITE_OK, nullptr, "x").ok());
}

// A second connection holding the write lock makes a write fail with ABORTED
// (retry the transaction) once the busy timeout (here 0) runs out, not hang.
TEST(StoreTest, LockedDatabaseIsAborted) {
  std::string path = NewTempDir("store") + "/rm.db";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path, absl::ZeroDuration()});
  ASSERT_TRUE(store.ok());
  absl::StatusOr<SqliteDb> other = SqliteDb::Open(path);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->Exec("BEGIN IMMEDIATE").ok());
  bool created;
  absl::StatusOr<JobRecord> r = (*store)->CreateJob(NewJob(0, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, ""), &created);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  ASSERT_TRUE(other->Exec("ROLLBACK").ok());
  EXPECT_TRUE((*store)->CreateJob(NewJob(0, kT0), Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0, kT0, ""), &created).ok());
}

}  // namespace
}  // namespace ringmaster::coordinator
