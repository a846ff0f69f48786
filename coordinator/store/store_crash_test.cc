// A child process commits in a loop and is killed with SIGKILL mid-write;
// the database must then open and hold only complete transactions, and every
// transaction the child saw committed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "coordinator/store/sqlite_db.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

constexpr int kRanks = 64;  // a placement big enough to span several pages

v1::JobEvent Event(v1::JobEventKind kind, v1::JobState from, v1::JobState to, int64_t gen) {
  v1::JobEvent e;
  e.set_kind(kind);
  e.set_from_state(from);
  e.set_to_state(to);
  e.set_generation(gen);
  *e.mutable_time() = ToProtoTime(absl::FromUnixSeconds(1795000000));
  e.set_rank(-1);
  return e;
}

// One iteration = three transactions on a new job: submit (1 event), place
// + start (placement of kRanks ranks, 2 events), checkpoint (1 event).
absl::Status Iteration(Store* store, int i) {
  JobRecord r;
  *r.job.mutable_spec() = testing::MakeSpec(kRanks / 8, 8);
  r.job.set_state(v1::JOB_STATE_QUEUED);
  *r.job.mutable_submit_time() = ToProtoTime(absl::FromUnixSeconds(1795000000 + i));
  bool created;
  absl::StatusOr<JobRecord> job =
      store->CreateJob(r, Event(v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, 0),
                       &created);
  if (!job.ok()) return job.status();
  job->job.set_state(v1::JOB_STATE_STARTING);
  job->job.set_generation(1);
  v1::Placement p;
  p.set_generation(1);
  p.set_world_size(kRanks);
  for (int k = 0; k < kRanks; ++k) {
    v1::RankAssignment* a = p.add_ranks();
    a->set_global_rank(k);
    a->set_node_id(absl::StrCat("n-", k / 8));
    a->set_hostname(std::string(200, 'h'));
  }
  absl::StatusOr<std::vector<v1::JobEvent>> placed = store->UpdateJob(
      *job,
      {Event(v1::JOB_EVENT_KIND_PLACED, v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED, 1),
       Event(v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_PLACED, v1::JOB_STATE_STARTING, 1)},
      &p);
  if (!placed.ok()) return placed.status();
  CheckpointWrite w;
  w.info.set_job_id(job->job.id());
  w.info.set_generation(1);
  w.info.set_step(i);
  w.info.set_path(absl::StrCat("/ckpt/", job->job.id()));
  w.info.set_pipeline_stages(1);
  w.info.set_complete(true);
  w.shard.add_files()->set_path("model.safetensors");
  w.event = Event(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, v1::JOB_STATE_STARTING, v1::JOB_STATE_STARTING, 1);
  return store->CommitCheckpoint(w).status();
}

[[noreturn]] void ChildLoop(const std::string& path, int ack_fd) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path});
  if (!store.ok()) _exit(3);
  for (int32_t i = 0; i < 1000000; ++i) {
    if (!Iteration(store->get(), i).ok()) _exit(4);
    if (write(ack_fd, &i, sizeof(i)) != sizeof(i)) _exit(5);
  }
  _exit(0);
}

// Runs the child until it has acknowledged `acks` iterations (plus a few
// microseconds, varying the point the kill lands on), kills it, returns the
// highest acknowledged iteration.
int RunAndKill(const std::string& path, int acks, int extra_us) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ChildLoop(path, fds[1]);
  }
  close(fds[1]);
  int32_t last = -1;
  for (int n = 0; n < acks; ++n) {
    int32_t i;
    if (read(fds[0], &i, sizeof(i)) != sizeof(i)) break;
    last = i;
  }
  if (extra_us > 0) usleep(extra_us);  // real time here only moves the kill point
  kill(pid, SIGKILL);
  // Acks already in the pipe were committed before the kill.
  int32_t i;
  while (read(fds[0], &i, sizeof(i)) == sizeof(i)) last = i;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exited early: " << status;
  return last;
}

// Every job is one of: submitted only; submitted + placed; all three
// transactions; never anything in between.
void CheckOnlyCompleteTransactions(Store* store, int min_complete_jobs) {
  absl::StatusOr<std::vector<JobRecord>> jobs = store->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  absl::StatusOr<std::vector<StoredCheckpoint>> checkpoints = store->LoadCheckpoints();
  ASSERT_TRUE(checkpoints.ok());
  std::map<std::string, int> checkpoints_per_job;
  for (const StoredCheckpoint& c : *checkpoints) {
    ++checkpoints_per_job[c.info.job_id()];
    EXPECT_EQ(c.info.shards_size(), 1) << c.info.job_id();
  }
  int complete = 0;
  for (const JobRecord& r : *jobs) {
    const std::string& id = r.job.id();
    ASSERT_EQ(id, absl::StrCat("j-", r.submit_seq));
    absl::StatusOr<std::vector<v1::JobEvent>> events = store->LoadEvents(id, 0);
    ASSERT_TRUE(events.ok());
    const int n = static_cast<int>(events->size());
    for (int k = 0; k < n; ++k) EXPECT_EQ((*events)[k].sequence(), k + 1) << id;
    if (r.job.state() == v1::JOB_STATE_QUEUED) {
      EXPECT_EQ(n, 1) << id;
      EXPECT_EQ(r.job.generation(), 0) << id;
      EXPECT_EQ(checkpoints_per_job.count(id), 0u) << id;
      continue;
    }
    ASSERT_EQ(r.job.state(), v1::JOB_STATE_STARTING) << id;
    EXPECT_EQ(r.job.placement().ranks_size(), kRanks) << id;
    if (checkpoints_per_job.count(id) != 0) {
      EXPECT_EQ(n, 4) << id;
      EXPECT_EQ((*events)[3].kind(), v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED) << id;
      ++complete;
    } else {
      EXPECT_EQ(n, 3) << id;
    }
  }
  EXPECT_GE(complete, min_complete_jobs);
}

TEST(StoreCrashTest, SigkillMidWriteLeavesOnlyCompleteTransactions) {
  const std::string path = testing::NewTempDir("crash") + "/rm.db";
  int total_acked = 0;
  // Several kills at different points; the database keeps growing across them.
  const int kAcks[] = {5, 1, 12, 3, 8};
  const int kExtraUs[] = {0, 150, 700, 2500, 40};
  for (int round = 0; round < 5; ++round) {
    int last = RunAndKill(path, kAcks[round], kExtraUs[round]);
    ASSERT_GE(last, 0) << "round " << round;
    total_acked += last + 1;

    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path);
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(*raw->QueryText("PRAGMA integrity_check"), "ok") << "round " << round;

    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path});
    ASSERT_TRUE(store.ok()) << store.status();
    CheckOnlyCompleteTransactions(store->get(), total_acked);
    // Every job of the interrupted iteration is settled; the next round's
    // child starts with fresh jobs.
  }
}

}  // namespace
}  // namespace ringmaster::coordinator
