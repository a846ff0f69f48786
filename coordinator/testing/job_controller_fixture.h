#ifndef RINGMASTER_COORDINATOR_JOB_CONTROLLER_FIXTURE_H_
#define RINGMASTER_COORDINATOR_JOB_CONTROLLER_FIXTURE_H_

// A whole coordinator core on a fake clock and a temporary database, for the
// JobController's tests: Store, NodeRegistry, CheckpointRegistry, Rendezvous,
// JobController and a FakeJobListener, wired as the composition root will.
// Test-only.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/testing/fake_job_listener.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {

class JobControllerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Builds everything on the database at path_ (Recover()ing it).
  void Start();
  // Tears the core down and builds it again on the same database: a
  // coordinator restart. Node sessions are lost: workers register again.
  void Restart();

  // Registers a node through the controller; returns its id.
  std::string AddNode(const std::string& hostname, int gpus, int cpu_slots = 0,
                      std::vector<std::pair<std::string, std::string>> labels = {},
                      const std::vector<RunningRank>& running = {});
  // Advances the clock by `d`, heartbeating every node except `silent` ones
  // every 5 s along the way.
  void AdvanceWithHeartbeats(absl::Duration d, const std::set<std::string>& silent = {});

  std::string MustSubmit(const v1::JobSpec& spec, const std::string& request_id = "");
  v1::Job MustGet(const std::string& job_id);
  v1::JobState State(const std::string& job_id) { return MustGet(job_id).state(); }
  std::vector<v1::JobEvent> Events(const std::string& job_id);
  // "SUBMITTED:QUEUED PLACED:PLACED ..." (kind:to_state, kinds without prefix).
  std::string Timeline(const std::string& job_id);

  // The start orders of every current generation placed on the node (what
  // a worker's session receives when it opens).
  std::vector<StartOrder> Assignments(const std::string& node_id);

  // Every rank of the job's current generation joins its rendezvous.
  void JoinAll(const std::string& job_id);
  // Every rank of the current generation reports an exit on its node.
  void ExitAll(const std::string& job_id, int exit_code, bool stopped_by_worker = false);
  void Exit(const std::string& job_id, int32_t rank, int exit_code, const std::string& stderr_tail = "",
            bool stopped_by_worker = false, int64_t generation = -1);
  // QUEUED -> ... -> RUNNING on whatever nodes exist.
  void RunToRunning(const std::string& job_id);
  // A whole-model checkpoint commit of the job at `step` (generation -1:
  // its current one), with one file.
  ShardCommit CheckpointCommit(const std::string& job_id, int64_t step, int64_t generation = -1);

  FakeClock clock_;
  std::string path_;
  JobControllerOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<NodeRegistry> nodes_;
  std::unique_ptr<CheckpointRegistry> checkpoints_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<JobController> controller_;
  FakeJobListener listener_;
  std::map<std::string, int64_t> sessions_;  // node id -> session
};

}  // namespace ringmaster::coordinator::testing

#endif  // RINGMASTER_COORDINATOR_JOB_CONTROLLER_FIXTURE_H_
