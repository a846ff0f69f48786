// Accounting in the store: placements end with their generation in the same
// transaction, LoadUsage sums their durations, migration 6 backfills older
// placements.
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "coordinator/store/sqlite_db.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_schema.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::MakeSpec;
using testing::NewTempDir;

const absl::Time kT0 = absl::FromUnixSeconds(1795000000);

v1::JobEvent Transition(v1::JobState from, v1::JobState to, absl::Time t, const std::string& reason = "") {
  v1::JobEvent e;
  switch (to) {  // the kind does not matter to accounting; the states do
    case v1::JOB_STATE_PLACED:
      e.set_kind(v1::JOB_EVENT_KIND_PLACED);
      break;
    case v1::JOB_STATE_RESTARTING:
      e.set_kind(v1::JOB_EVENT_KIND_RESTARTING);
      break;
    default:
      e.set_kind(v1::JOB_EVENT_KIND_RUNNING);
  }
  e.set_from_state(from);
  e.set_to_state(to);
  *e.mutable_time() = ToProtoTime(t);
  e.set_reason(reason);
  e.set_rank(-1);
  return e;
}

// `ranks` ranks on one node; GPU ranks carry a GPU's UUID, CPU ranks none.
v1::Placement Placement(int64_t generation, int ranks, bool gpu) {
  v1::Placement p;
  p.set_generation(generation);
  p.set_world_size(ranks);
  p.set_data_parallel_size(ranks);
  p.set_pipeline_parallel_size(1);
  p.set_nodes(1);
  p.set_ranks_per_node(ranks);
  for (int r = 0; r < ranks; ++r) {
    v1::RankAssignment* a = p.add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r);
    a->set_node_id("n-1");
    a->set_hostname("host-a");
    if (gpu) a->set_gpu_uuid(absl::StrCat("GPU-", r));
  }
  return p;
}

class StoreUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = NewTempDir("usage") + "/rm.db";
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // A QUEUED job of `user` in `queue` (empty: none named).
  JobRecord Create(const std::string& user, const std::string& queue, bool gpu, int cpus_per_rank = 1) {
    JobRecord r;
    *r.job.mutable_spec() = MakeSpec(1, 2, gpu ? v1::ResourceSpec::CUDA : v1::ResourceSpec::CPU);
    r.job.mutable_spec()->set_queue(queue);
    r.job.mutable_spec()->mutable_resources()->set_cpus_per_rank(cpus_per_rank);
    r.job.set_state(v1::JOB_STATE_QUEUED);
    *r.job.mutable_submit_time() = ToProtoTime(kT0);
    r.user = user;
    bool created = false;
    absl::StatusOr<JobRecord> stored =
        store_->CreateJob(r, Transition(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, kT0), &created);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.ok() ? *stored : r;
  }

  // Moves `job` to `to` at `t` (placing generation+1 with `ranks` ranks when
  // `ranks` > 0).
  absl::Status Move(JobRecord& job, v1::JobState to, absl::Time t, int ranks = 0, const std::string& why = "") {
    JobRecord next = job;
    const v1::JobState from = job.job.state();
    next.job.set_state(to);
    std::optional<v1::Placement> p;
    if (ranks > 0) {
      next.job.set_generation(job.job.generation() + 1);
      p = Placement(next.job.generation(), ranks, next.job.spec().resources().device() == v1::ResourceSpec::CUDA);
    }
    if (to == v1::JOB_STATE_SUCCEEDED || to == v1::JOB_STATE_FAILED || to == v1::JOB_STATE_CANCELLED) {
      *next.job.mutable_end_time() = ToProtoTime(t);
    }
    absl::Status s = store_->UpdateJob(next, {Transition(from, to, t, why)}, p ? &*p : nullptr).status();
    if (s.ok()) job = next;
    return s;
  }

  std::vector<UsageTotal> Usage(UsageGroup by, absl::Time now, absl::Time since = absl::InfinitePast(),
                                const std::string& user = "") {
    absl::StatusOr<std::vector<UsageTotal>> totals = store_->LoadUsage({by, since, now, user});
    EXPECT_TRUE(totals.ok()) << totals.status();
    return totals.ok() ? *totals : std::vector<UsageTotal>{};
  }

  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreUsageTest, APlacementIsHeldFromPlacementToTheGenerationsEnd) {
  JobRecord job = Create("alice", "team-a", /*gpu=*/true);
  ASSERT_TRUE(Move(job, v1::JOB_STATE_PLACED, kT0 + absl::Seconds(10), 2).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_STARTING, kT0 + absl::Seconds(11)).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_RUNNING, kT0 + absl::Seconds(20)).ok());

  // Still held: counted up to now.
  std::vector<UsageTotal> held = Usage(UsageGroup::kQueue, kT0 + absl::Seconds(110));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].key, "team-a");
  EXPECT_DOUBLE_EQ(held[0].gpu_seconds, 2 * 100.0);
  EXPECT_DOUBLE_EQ(held[0].cpu_slot_seconds, 0);

  // The restart ends generation 1 at its event's time; generation 2 is
  // placed as the job starts again, and ends with the job.
  ASSERT_TRUE(Move(job, v1::JOB_STATE_RESTARTING, kT0 + absl::Seconds(310)).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_STARTING, kT0 + absl::Seconds(400), 2).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_RUNNING, kT0 + absl::Seconds(401)).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_SUCCEEDED, kT0 + absl::Seconds(500)).ok());
  for (absl::Time now : {kT0 + absl::Seconds(500), kT0 + absl::Hours(5)}) {
    std::vector<UsageTotal> by_job = Usage(UsageGroup::kJob, now);
    ASSERT_EQ(by_job.size(), 1u);
    EXPECT_EQ(by_job[0].key, job.job.id());
    EXPECT_DOUBLE_EQ(by_job[0].gpu_seconds, 2 * 300.0 + 2 * 100.0);
    EXPECT_EQ(by_job[0].placements, 2);
  }
  // A window counts only its part of each placement.
  std::vector<UsageTotal> window = Usage(UsageGroup::kUser, kT0 + absl::Seconds(450), kT0 + absl::Seconds(300));
  ASSERT_EQ(window.size(), 1u);
  EXPECT_EQ(window[0].key, "alice");
  EXPECT_DOUBLE_EQ(window[0].gpu_seconds, 2 * 10.0 + 2 * 50.0);
  EXPECT_EQ(window[0].placements, 2);
  EXPECT_TRUE(Usage(UsageGroup::kUser, kT0 + absl::Hours(5), kT0 + absl::Hours(1)).empty());
}

TEST_F(StoreUsageTest, CpuSlotsAreRanksTimesCpusPerRankAndUnnamedQueuesAreDefault) {
  JobRecord job = Create("bob", "", /*gpu=*/false, /*cpus_per_rank=*/4);
  ASSERT_TRUE(Move(job, v1::JOB_STATE_PLACED, kT0, 3).ok());
  ASSERT_TRUE(Move(job, v1::JOB_STATE_CANCELLED, kT0 + absl::Seconds(60)).ok());  // straight from PLACED
  std::vector<UsageTotal> totals = Usage(UsageGroup::kQueue, kT0 + absl::Hours(1));
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals[0].key, kDefaultQueueName);
  EXPECT_DOUBLE_EQ(totals[0].cpu_slot_seconds, 3 * 4 * 60.0);
  EXPECT_DOUBLE_EQ(totals[0].gpu_seconds, 0);
}

// The end is written with the state change or not at all: a transaction
// that fails after ending the placement (a trigger refuses its event) leaves
// the placement held, and the ledger survives a reopen.
TEST_F(StoreUsageTest, EndingAGenerationEndsItsPlacementInTheSameTransaction) {
  JobRecord job = Create("alice", "team-a", /*gpu=*/true);
  ASSERT_TRUE(Move(job, v1::JOB_STATE_PLACED, kT0, 2).ok());
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path_);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("CREATE TRIGGER refuse AFTER INSERT ON job_events WHEN NEW.reason = 'refuse' "
                          "BEGIN SELECT RAISE(ABORT, 'refused'); END")
                    .ok());
  }
  absl::Status refused = Move(job, v1::JOB_STATE_FAILED, kT0 + absl::Seconds(100), 0, "refuse");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("refused"), std::string::npos) << refused;
  EXPECT_DOUBLE_EQ(Usage(UsageGroup::kJob, kT0 + absl::Seconds(1000))[0].gpu_seconds, 2 * 1000.0)
      << "the failed transaction must leave the placement held";

  ASSERT_TRUE(Move(job, v1::JOB_STATE_FAILED, kT0 + absl::Seconds(100), 0, "node lost").ok());
  store_.reset();
  absl::StatusOr<std::unique_ptr<Store>> reopened = Store::Open({path_});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  store_ = std::move(*reopened);
  EXPECT_DOUBLE_EQ(Usage(UsageGroup::kJob, kT0 + absl::Seconds(1000))[0].gpu_seconds, 2 * 100.0);
}

TEST_F(StoreUsageTest, DeletedJobsKeepTheirUsageAndUsersSeeOnlyTheirOwn) {
  JobRecord a = Create("alice", "team-a", true);
  JobRecord b = Create("bob", "team-a", true);
  ASSERT_TRUE(Move(a, v1::JOB_STATE_PLACED, kT0, 1).ok());
  ASSERT_TRUE(Move(b, v1::JOB_STATE_PLACED, kT0, 2).ok());
  ASSERT_TRUE(Move(a, v1::JOB_STATE_CANCELLED, kT0 + absl::Seconds(10)).ok());
  ASSERT_TRUE(store_->DeleteJobs({a.job.id()}).ok());
  std::vector<UsageTotal> users = Usage(UsageGroup::kUser, kT0 + absl::Seconds(20));
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[0].key, "alice");
  EXPECT_DOUBLE_EQ(users[0].gpu_seconds, 10.0);
  EXPECT_EQ(users[1].key, "bob");
  EXPECT_DOUBLE_EQ(users[1].gpu_seconds, 40.0);
  std::vector<UsageTotal> bobs = Usage(UsageGroup::kQueue, kT0 + absl::Seconds(20), absl::InfinitePast(), "bob");
  ASSERT_EQ(bobs.size(), 1u);
  EXPECT_DOUBLE_EQ(bobs[0].gpu_seconds, 40.0);
}

// Many jobs with random generations: every grouping's totals equal the sum
// of the placements' durations x slots (the issue asks within 1%).
TEST_F(StoreUsageTest, TotalsEqualThePlacementsDurations) {
  std::mt19937 rng(28);
  std::map<std::string, double> expected_gpu, expected_cpu;  // by queue
  double expected_total = 0;
  const absl::Time now = kT0 + absl::Hours(100);
  for (int j = 0; j < 60; ++j) {
    const bool gpu = j % 3 != 0;
    const std::string queue = absl::StrCat("q", j % 4);
    JobRecord job = Create(absl::StrCat("u", j % 5), queue, gpu, 1 + j % 3);
    absl::Time t = kT0 + absl::Seconds(rng() % 3600);
    const int generations = 1 + static_cast<int>(rng() % 4);
    for (int g = 0; g < generations; ++g) {
      const int ranks = 1 + static_cast<int>(rng() % 8);
      ASSERT_TRUE(Move(job, g == 0 ? v1::JOB_STATE_PLACED : v1::JOB_STATE_STARTING, t, ranks).ok());
      const absl::Duration held = absl::Seconds(1 + rng() % 7200);
      const bool last = g + 1 == generations;
      const bool still_running = last && j % 7 == 0;
      const double seconds = absl::ToDoubleSeconds(still_running ? now - t : held);
      (gpu ? expected_gpu : expected_cpu)[queue] += seconds * (gpu ? ranks : ranks * (1 + j % 3));
      expected_total += seconds;
      if (still_running) break;
      t += held;
      ASSERT_TRUE(Move(job, last ? v1::JOB_STATE_SUCCEEDED : v1::JOB_STATE_RESTARTING, t).ok());
      t += absl::Seconds(rng() % 60);  // waiting for the next generation holds nothing
    }
  }
  std::vector<UsageTotal> totals = Usage(UsageGroup::kQueue, now);
  ASSERT_EQ(totals.size(), 4u);
  for (const UsageTotal& t : totals) {
    EXPECT_NEAR(t.gpu_seconds, expected_gpu[t.key], 0.01 * expected_gpu[t.key]) << t.key;
    EXPECT_NEAR(t.cpu_slot_seconds, expected_cpu[t.key], 0.01 * expected_cpu[t.key]) << t.key;
  }
  double by_job = 0, by_user = 0;
  for (const UsageTotal& t : Usage(UsageGroup::kJob, now)) by_job += t.gpu_seconds + t.cpu_slot_seconds;
  for (const UsageTotal& t : Usage(UsageGroup::kUser, now)) by_user += t.gpu_seconds + t.cpu_slot_seconds;
  double by_queue = 0;
  for (const UsageTotal& t : totals) by_queue += t.gpu_seconds + t.cpu_slot_seconds;
  EXPECT_NEAR(by_job, by_queue, 1e-6 * by_queue);
  EXPECT_NEAR(by_user, by_queue, 1e-6 * by_queue);
}

// A schema-5 database: its placements get their user, queue, GPUs, CPU slots
// and end from what the older schema kept.
TEST(StoreUsageMigrationTest, Version6BackfillsOlderPlacements) {
  const std::string path = NewTempDir("usage") + "/rm.db";
  const int64_t t0 = absl::ToUnixMicros(kT0);
  const int64_t s = 1000000;
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    const std::vector<Migration> five(StoreMigrations().begin(), StoreMigrations().begin() + 5);
    ASSERT_TRUE(Migrate(&*raw, five).ok());
    // j-1 (alice): SUCCEEDED in generation 2; generation 1 ended by a
    // restart event, generation 2's end event folded away (the job's end).
    // j-2 (bob): RUNNING generation 1 on 3 CPU ranks. j-3 (bob): RESTARTING
    // with no event left for its generation 1 (counted as nothing).
    const std::string sql = absl::StrCat(
        "INSERT INTO jobs (id, user, spec, state, priority, generation, restarts, submit_time_us, end_time_us) VALUES "
        "('j-1', 'alice', x'', 6, 0, 2, 1, ", t0, ", ", t0 + 5000 * s, "), ",
        "('j-2', 'bob', x'', 4, 0, 1, 0, ", t0, ", NULL), ('j-3', 'bob', x'', 5, 0, 1, 0, ", t0, ", NULL);",
        "INSERT INTO placements (job_id, generation, world_size, data_parallel_size, pipeline_parallel_size, nodes, "
        "ranks_per_node, created_us) VALUES ('j-1', 1, 2, 2, 1, 1, 2, ", t0 + 100 * s, "), ('j-1', 2, 2, 2, 1, 1, 2, ",
        t0 + 1000 * s, "), ('j-2', 1, 3, 3, 1, 1, 3, ", t0 + 2000 * s, "), ('j-3', 1, 1, 1, 1, 1, 1, ", t0 + 3000 * s,
        ");",
        "INSERT INTO rank_assignments (job_id, generation, global_rank, local_rank, node_rank, node_id, hostname, "
        "data_rank, pipeline_rank, gpu_uuid) VALUES "
        "('j-1', 1, 0, 0, 0, 'n-1', 'h', 0, 0, 'GPU-0'), ('j-1', 1, 1, 1, 0, 'n-1', 'h', 1, 0, 'GPU-1'), "
        "('j-1', 2, 0, 0, 0, 'n-1', 'h', 0, 0, 'GPU-0'), ('j-1', 2, 1, 1, 0, 'n-1', 'h', 1, 0, 'GPU-1'), "
        "('j-2', 1, 0, 0, 0, 'n-1', 'h', 0, 0, ''), ('j-2', 1, 1, 1, 0, 'n-1', 'h', 1, 0, ''), "
        "('j-2', 1, 2, 2, 0, 'n-1', 'h', 2, 0, ''), ('j-3', 1, 0, 0, 0, 'n-1', 'h', 0, 0, '');",
        "INSERT INTO job_events (job_id, sequence, time_us, from_state, to_state, kind, reason, generation, rank, "
        "node_id) VALUES ('j-1', 1, ", t0 + 900 * s, ", 4, 5, 3, 'rank 1 exited', 1, -1, ''), ",
        "('j-1', 2, ", t0 + 950 * s, ", 5, 3, 2, '', 2, -1, '');");
    ASSERT_TRUE(raw->Exec(sql).ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open({path});
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  EXPECT_EQ(store.schema_version(), static_cast<int>(StoreMigrations().size()));

  const absl::Time now = kT0 + absl::Seconds(10000);
  absl::StatusOr<std::vector<UsageTotal>> by_job = store.LoadUsage({UsageGroup::kJob, absl::InfinitePast(), now, ""});
  ASSERT_TRUE(by_job.ok()) << by_job.status();
  ASSERT_EQ(by_job->size(), 3u);
  EXPECT_DOUBLE_EQ((*by_job)[0].gpu_seconds, 2 * 800.0 + 2 * 4000.0);  // ended at 900 s; at 5000 s
  EXPECT_EQ((*by_job)[0].placements, 2);
  EXPECT_DOUBLE_EQ((*by_job)[1].cpu_slot_seconds, 3 * 8000.0);  // still held
  EXPECT_DOUBLE_EQ((*by_job)[2].cpu_slot_seconds, 0);
  EXPECT_EQ((*by_job)[2].placements, 1);
  absl::StatusOr<std::vector<UsageTotal>> by_user = store.LoadUsage({UsageGroup::kUser, absl::InfinitePast(), now, ""});
  ASSERT_EQ(by_user->size(), 2u);
  EXPECT_EQ((*by_user)[0].key, "alice");
  EXPECT_EQ((*by_user)[1].key, "bob");
  absl::StatusOr<std::vector<UsageTotal>> by_queue = store.LoadUsage({UsageGroup::kQueue, absl::InfinitePast(), now, ""});
  ASSERT_EQ(by_queue->size(), 1u);
  EXPECT_EQ((*by_queue)[0].key, kDefaultQueueName);
}

// One query over 100,000 placements (rows written straight to the table:
// the store has no bulk insert) stays fast.
TEST(StoreUsageScaleTest, OneHundredThousandPlacementsInOneQuery) {
  const std::string path = NewTempDir("usage") + "/rm.db";
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open({path});
  ASSERT_TRUE(opened.ok()) << opened.status();
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("BEGIN").ok());
    absl::StatusOr<SqliteStatement> insert = raw->Prepare(
        "INSERT INTO placements (job_id, generation, world_size, data_parallel_size, pipeline_parallel_size, "
        "nodes, ranks_per_node, created_us, user, queue, gpus, cpu_slots, ended_us) "
        "VALUES (?, 1, 8, 8, 1, 1, 8, ?, ?, ?, 8, 0, ?)");
    ASSERT_TRUE(insert.ok());
    const int64_t t0 = absl::ToUnixMicros(kT0);
    for (int i = 0; i < 100000; ++i) {
      insert->Reset();
      insert->Bind(1, absl::StrCat("j-", i)).Bind(2, t0 + int64_t{i} * 1000000);
      insert->Bind(3, absl::StrCat("u", i % 50)).Bind(4, absl::StrCat("q", i % 20));
      insert->Bind(5, t0 + int64_t{i} * 1000000 + 3600 * int64_t{1000000});
      ASSERT_TRUE(insert->Run().ok());
    }
    ASSERT_TRUE(raw->Exec("COMMIT").ok());
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<UsageTotal>> totals =
      (*opened)->LoadUsage({UsageGroup::kQueue, absl::InfinitePast(), kT0 + absl::Hours(1000), ""});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 20u);
  double gpu_seconds = 0;
  for (const UsageTotal& t : *totals) gpu_seconds += t.gpu_seconds;
  EXPECT_DOUBLE_EQ(gpu_seconds, 100000.0 * 8 * 3600);
  std::printf("LoadUsage over 100,000 placements: %.1f ms\n", ms);
  EXPECT_LT(ms, 2000) << "one query over the placements table";
}

}  // namespace
}  // namespace ringmaster::coordinator
