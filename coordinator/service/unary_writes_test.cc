// The unary handlers that write the store (Submit, CancelJob, CordonNode,
// DrainNode, ReportRankExit, Commit) run their SQLite transactions on the
// coordinator's executor, never on gRPC's callback threads
// (finish_on_executor.h): a commit hook installed in every SQLite connection
// records the name of the thread each transaction commits on.
#include <pthread.h>
#include <sqlite3.h>

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

std::mutex commits_mu;
std::vector<std::string> commit_threads;  // under commits_mu

int RecordCommit(void*) {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  std::lock_guard<std::mutex> lock(commits_mu);
  commit_threads.emplace_back(name);
  return 0;  // let it commit
}

int InstallCommitHook(sqlite3* db, const char**, const sqlite3_api_routines*) {
  sqlite3_commit_hook(db, RecordCommit, nullptr);
  return SQLITE_OK;
}

// The threads transactions committed on since the last call.
std::vector<std::string> TakeCommitThreads() {
  std::lock_guard<std::mutex> lock(commits_mu);
  return std::exchange(commit_threads, {});
}

class UnaryWritesTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    // Every connection the server opens from now on gets the hook.
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(InstallCommitHook));
    CoordinatorFixture::SetUp();
  }
  void TearDown() override {
    CoordinatorFixture::TearDown();
    sqlite3_cancel_auto_extension(reinterpret_cast<void (*)()>(InstallCommitHook));
  }

  // The call wrote the store, on the executor's threads only.
  static void ExpectCommittedOnExecutor(const std::string& call) {
    const std::vector<std::string> threads = TakeCommitThreads();
    EXPECT_FALSE(threads.empty()) << call << " wrote nothing";
    for (const std::string& name : threads) EXPECT_EQ(name, "rm-streams") << call << " committed on " << name;
  }
};

TEST_F(UnaryWritesTest, StoreWritesRunOnTheExecutor) {
  auto worker = NewWorker("node-a", 4);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open());
  ASSERT_TRUE(worker->Sync().has_value());
  TakeCommitThreads();

  const std::string job = Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU));
  ExpectCommittedOnExecutor("Submit");
  server_->Tick();  // places it (the test's own thread)
  std::optional<v1::CoordinatorMessage> order = worker->NextOrder();
  ASSERT_TRUE(order.has_value() && order->has_start());
  ASSERT_TRUE(worker->Sync().has_value());
  TakeCommitThreads();

  v1::CommitCheckpointRequest commit;
  commit.set_job_id(job);
  commit.set_generation(1);
  commit.set_step(10);
  commit.set_path(absl::StrFormat("%s/checkpoints/%s/gen-1/step-%09d", config_.state_dir, job, 10));
  commit.set_pipeline_stages(1);
  v1::CheckpointFile* file = commit.add_files();
  file->set_path("model.safetensors");
  file->set_size_bytes(1024);
  file->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  file->mutable_checksum()->set_hex("0badf00d");
  v1::CommitCheckpointResponse committed;
  grpc::Status status = checkpoints_->Commit(worker->NodeContext().get(), commit, &committed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectCommittedOnExecutor("Commit");

  ASSERT_TRUE(worker->ReportExit(job, 1, 0, 1).ok());
  ExpectCommittedOnExecutor("ReportRankExit");

  v1::CancelJobRequest cancel;
  cancel.set_job_id(Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU)));
  TakeCommitThreads();
  v1::CancelJobResponse cancelled;
  status = jobs_->CancelJob(Context().get(), cancel, &cancelled);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectCommittedOnExecutor("CancelJob");

  v1::CordonNodeRequest cordon;
  cordon.set_node("node-a");
  v1::CordonNodeResponse cordoned;
  status = jobs_->CordonNode(Context().get(), cordon, &cordoned);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectCommittedOnExecutor("CordonNode");

  v1::DrainNodeRequest drain;
  drain.set_node("node-a");
  v1::DrainNodeResponse drained;
  status = jobs_->DrainNode(Context().get(), drain, &drained);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectCommittedOnExecutor("DrainNode");
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
