// Timelines in the store: bounded per kind (the first event and the newest
// kEventsKeptPerKind, the rest folded into a counter), read in pages bounded
// by count and bytes, and an older database's unbounded history compacted by
// its migration.
#include <map>
#include <memory>
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

v1::JobEvent Event(v1::JobEventKind kind, const std::string& reason = "") {
  v1::JobEvent e;
  e.set_kind(kind);
  e.set_from_state(v1::JOB_STATE_RUNNING);
  e.set_to_state(v1::JOB_STATE_RUNNING);
  *e.mutable_time() = ToProtoTime(kT0);
  e.set_reason(reason);
  e.set_rank(-1);
  return e;
}

class StoreEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({":memory:"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    record_.job.set_state(v1::JOB_STATE_RUNNING);
    *record_.job.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
    *record_.job.mutable_submit_time() = ToProtoTime(kT0);
    v1::JobEvent submitted = Event(v1::JOB_EVENT_KIND_SUBMITTED);
    bool created = false;
    absl::StatusOr<JobRecord> job = store_->CreateJob(record_, submitted, &created);
    ASSERT_TRUE(job.ok()) << job.status();
    record_ = *job;
  }

  void Append(std::vector<v1::JobEvent> events) {
    ASSERT_TRUE(store_->UpdateJob(record_, std::move(events), nullptr).ok());
  }
  void Commits(int n) {
    for (int i = 1; i <= n; ++i) Append({Event(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, absl::StrCat("step ", i))});
  }
  int64_t Rows() {
    // Through the public API: every event, all pages.
    return static_cast<int64_t>(store_->LoadEvents(record_.job.id(), 0)->size());
  }

  std::unique_ptr<Store> store_;
  JobRecord record_;
};

TEST_F(StoreEventsTest, TenThousandCommitsKeepTheFirstAndTheNewest32) {
  Commits(10000);
  std::vector<v1::JobEvent> events = *store_->LoadEvents(record_.job.id(), 0);
  ASSERT_EQ(events.size(), 1u + 1u + kEventsKeptPerKind);  // SUBMITTED, first commit, newest 32
  EXPECT_EQ(events[0].kind(), v1::JOB_EVENT_KIND_SUBMITTED);
  EXPECT_EQ(events[0].folded(), 0);
  EXPECT_EQ(events[1].reason(), "step 1");
  EXPECT_EQ(events[1].folded(), 0);
  EXPECT_EQ(events[2].reason(), "step 9969");  // 10000 - 32 + 1
  EXPECT_EQ(events[2].folded(), 10000 - 1 - 32);
  EXPECT_EQ(events.back().reason(), "step 10000");
  EXPECT_EQ(events.back().sequence(), 10001);  // numbers are never reused
  int64_t accounted = 0;
  for (const v1::JobEvent& e : events) {
    if (e.kind() == v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED) accounted += 1 + e.folded();
  }
  EXPECT_EQ(accounted, 10000);
  for (size_t i = 3; i < events.size(); ++i) EXPECT_EQ(events[i].folded(), 0);
}

TEST_F(StoreEventsTest, KindsAreBoundedApartAndTheNextSequenceFollowsTheLast) {
  for (int i = 0; i < 50; ++i) {
    Append({Event(v1::JOB_EVENT_KIND_RANK_EXITED, "exit"), Event(v1::JOB_EVENT_KIND_RESTARTING, "restart"),
            Event(v1::JOB_EVENT_KIND_RUNNING, "running")});
  }
  std::vector<v1::JobEvent> events = *store_->LoadEvents(record_.job.id(), 0);
  std::map<v1::JobEventKind, int64_t> kept, total;
  for (const v1::JobEvent& e : events) {
    ++kept[e.kind()];
    total[e.kind()] += 1 + e.folded();
  }
  for (v1::JobEventKind kind :
       {v1::JOB_EVENT_KIND_RANK_EXITED, v1::JOB_EVENT_KIND_RESTARTING, v1::JOB_EVENT_KIND_RUNNING}) {
    EXPECT_EQ(kept[kind], 1 + kEventsKeptPerKind) << kind;
    EXPECT_EQ(total[kind], 50) << kind;
  }
  EXPECT_EQ(events.back().sequence(), 1 + 150);
  Append({Event(v1::JOB_EVENT_KIND_SUCCEEDED)});
  EXPECT_EQ(store_->LoadEvents(record_.job.id(), 0)->back().sequence(), 152);
}

TEST_F(StoreEventsTest, PagesAreBoundedByCountAndBytesNewestFirst) {
  Commits(20);
  EventPageQuery query;
  query.max_events = 8;
  EventPage page = *store_->LoadEventPage(record_.job.id(), query);
  ASSERT_EQ(page.events.size(), 8u);
  EXPECT_TRUE(page.more);
  EXPECT_EQ(page.events.front().sequence(), 14);  // the newest 8 of 21, oldest first
  EXPECT_EQ(page.events.back().sequence(), 21);
  query.before_sequence = page.events.front().sequence();
  page = *store_->LoadEventPage(record_.job.id(), query);
  EXPECT_EQ(page.events.front().sequence(), 6);
  EXPECT_TRUE(page.more);
  query.before_sequence = 6;
  page = *store_->LoadEventPage(record_.job.id(), query);
  ASSERT_EQ(page.events.size(), 5u);
  EXPECT_EQ(page.events.front().sequence(), 1);
  EXPECT_FALSE(page.more);
  // after_sequence bounds the other end.
  query.before_sequence = 0;
  query.after_sequence = 18;
  page = *store_->LoadEventPage(record_.job.id(), query);
  ASSERT_EQ(page.events.size(), 3u);
  EXPECT_FALSE(page.more);

  // Bytes: events of about 2 KiB, a 5 KiB page holds two.
  Append({Event(v1::JOB_EVENT_KIND_DRAIN_REQUESTED, std::string(2000, 'r')),
          Event(v1::JOB_EVENT_KIND_DRAIN_REQUESTED, std::string(2000, 's')),
          Event(v1::JOB_EVENT_KIND_DRAIN_REQUESTED, std::string(2000, 't'))});
  EventPageQuery small;
  small.max_bytes = 5 << 10;
  page = *store_->LoadEventPage(record_.job.id(), small);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_TRUE(page.more);
  EXPECT_EQ(page.events.back().reason()[0], 't');
  // One event larger than the budget still comes, alone.
  small.max_bytes = 100;
  page = *store_->LoadEventPage(record_.job.id(), small);
  EXPECT_EQ(page.events.size(), 1u);
}

TEST_F(StoreEventsTest, AnOversizedReasonAnOlderVersionStoredIsCutOnRead) {
  Append({Event(v1::JOB_EVENT_KIND_CANCELLED, std::string(1 << 20, 'x'))});
  EventPage page = *store_->LoadEventPage(record_.job.id(), {});
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_LE(page.events.back().reason().size(), kMaxStoredEventReasonBytes);
  EXPECT_EQ(page.events.back().reason().substr(page.events.back().reason().size() - 10), " [... cut]");
}

TEST_F(StoreEventsTest, DeletingAJobDeletesItsFoldedTimeline) {
  Commits(40);
  ASSERT_TRUE(store_->DeleteJobs({record_.job.id()}).ok());
  EXPECT_EQ(Rows(), 0);
}

// A schema-4 database (before version 5) whose job has 10,000 commits and a
// second job with a short history: the migration folds the first, leaves the
// second, and appends keep the bound from there.
TEST(StoreEventsMigrationTest, Version5CompactsAnOlderUnboundedHistory) {
  const std::string path = NewTempDir("store") + "/rm.db";
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    const std::vector<Migration> four(StoreMigrations().begin(), StoreMigrations().begin() + 4);
    ASSERT_TRUE(Migrate(&*raw, four).ok());
    ASSERT_TRUE(raw->Exec("BEGIN").ok());
    for (const char* id : {"j-1", "j-2"}) {
      ASSERT_TRUE(raw->Exec(absl::StrCat("INSERT INTO jobs (id, user, spec, state, priority, generation, restarts, "
                                         "submit_time_us) VALUES ('", id, "', '', x'', 4, 0, 1, 0, 0)"))
                      .ok());
    }
    absl::StatusOr<SqliteStatement> insert =
        raw->Prepare("INSERT INTO job_events (job_id, sequence, time_us, from_state, to_state, kind, reason, "
                     "generation, rank, node_id) VALUES (?, ?, 0, 4, 4, ?, ?, 1, -1, '')");
    ASSERT_TRUE(insert.ok());
    for (int seq = 1; seq <= 10001; ++seq) {
      insert->Reset();
      insert->Bind(1, "j-1").Bind(2, seq).Bind(3, seq == 1 ? int64_t{1} : int64_t{10});
      insert->Bind(4, absl::StrCat("event ", seq));
      ASSERT_TRUE(insert->Run().ok());
    }
    for (int seq = 1; seq <= 20; ++seq) {
      insert->Reset();
      insert->Bind(1, "j-2").Bind(2, seq).Bind(3, int64_t{10}).Bind(4, absl::StrCat("event ", seq));
      ASSERT_TRUE(insert->Run().ok());
    }
    ASSERT_TRUE(raw->Exec("COMMIT").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open({path});
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  EXPECT_EQ(store.schema_version(), static_cast<int>(StoreMigrations().size()));

  std::vector<v1::JobEvent> events = *store.LoadEvents("j-1", 0);
  ASSERT_EQ(events.size(), 1u + 1u + kEventsKeptPerKind);
  EXPECT_EQ(events[0].reason(), "event 1");                 // SUBMITTED
  EXPECT_EQ(events[1].reason(), "event 2");                 // the first commit
  EXPECT_EQ(events[2].reason(), "event 9970");              // the newest 32 ...
  EXPECT_EQ(events[2].folded(), 10000 - 1 - 32);            // ... counting those between
  EXPECT_EQ(events.back().reason(), "event 10001");
  EXPECT_EQ(store.LoadEvents("j-2", 0)->size(), 20u);       // short histories are untouched

  JobRecord record = (*store.LoadJobs())[0];
  ASSERT_EQ(record.job.id(), "j-1");
  v1::JobEvent commit;
  commit.set_kind(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED);
  commit.set_reason("after the upgrade");
  std::vector<v1::JobEvent> stored = *store.UpdateJob(record, {commit}, nullptr);
  EXPECT_EQ(stored[0].sequence(), 10002);
  events = *store.LoadEvents("j-1", 0);
  ASSERT_EQ(events.size(), 1u + 1u + kEventsKeptPerKind);
  EXPECT_EQ(events[2].folded(), 10000 - 32);
  EXPECT_EQ(events.back().reason(), "after the upgrade");
}

}  // namespace
}  // namespace ringmaster::coordinator
