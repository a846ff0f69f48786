// RankLauncher: the trainer contract (argv, env, directories, spec file) and
// the StartRanks/StopRanks answers.
#include "worker/rank_launcher.h"

#include <signal.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "worker/fake_process_control.h"
#include "worker/paths.h"
#include "worker/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

std::map<std::string, std::string> EnvOf(const SpawnRequest& request) {
  std::map<std::string, std::string> env;
  for (const std::string& kv : request.env) {
    size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Four ranks on two nodes; this node runs ranks 2 and 3 (node rank 1).
v1::StartRanks Order() {
  v1::StartRanks order;
  order.set_job_id("j-42");
  order.set_generation(3);
  v1::Placement* placement = order.mutable_placement();
  placement->set_generation(3);
  placement->set_world_size(4);
  placement->set_data_parallel_size(2);
  placement->set_pipeline_parallel_size(2);
  for (int r = 0; r < 4; ++r) {
    v1::RankAssignment* a = placement->add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r % 2);
    a->set_node_rank(r / 2);
    a->set_data_rank(r / 2);
    a->set_pipeline_rank(r % 2);
    a->set_gpu_uuid(r == 2 ? "GPU-aaaa" : "");
  }
  order.add_global_ranks(2);
  order.add_global_ranks(3);
  order.set_checkpoint_dir("/shared/ckpt/j-42");
  order.mutable_rendezvous_deadline()->set_seconds(1800000000);
  order.mutable_resume_from()->set_path("/shared/ckpt/j-42/step-100");
  order.mutable_resume_from()->set_step(100);
  (*order.mutable_env())["USER_VAR"] = "x";
  (*order.mutable_env())["RINGMASTER_RANK"] = "99";  // the worker's value wins
  (*order.mutable_env())["RINGMASTER_RENDEZVOUS_SECRET"] = "from-the-spec";  // so does the order's secret
  order.set_rendezvous_secret("0123abcd");
  order.mutable_spec()->set_name("tiny");
  return order;
}

class RankLauncherTest : public ::testing::Test {
 protected:
  RankLauncherTest()
      : supervisor_(&control_, Clock::Real(), [](const RankExit&) {}), launcher_(&supervisor_, nullptr, Options()) {}

  RankLauncherOptions Options() {
    RankLauncherOptions options;
    options.state_dir = dir_.path();
    options.trainer_path = "/opt/ringmaster/bin/ringmaster-trainer";
    options.agent_socket = dir_.Join("agent.sock");
    options.advertise_host = "node-7.example";
    options.base_env = {"PATH=/usr/bin:/bin", "HOME=/home/rm", "USER_VAR=base"};
    options.default_grace = absl::Seconds(7);
    return options;
  }

  TempDir dir_;
  FakeProcessControl control_;
  ProcessSupervisor supervisor_;
  RankLauncher launcher_;
};

TEST_F(RankLauncherTest, PrepareFollowsTheTrainerContract) {
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(Order());
  ASSERT_TRUE(launches.ok()) << launches.status();
  ASSERT_EQ(launches->size(), 2u);
  const RankLaunch& r2 = (*launches)[0];
  EXPECT_EQ(r2.job_id, "j-42");
  EXPECT_EQ(r2.generation, 3);
  EXPECT_EQ(r2.global_rank, 2);
  const std::string work = dir_.Join("jobs/j-42/gen-3/rank-2");
  EXPECT_EQ(r2.process.path, "/opt/ringmaster/bin/ringmaster-trainer");
  EXPECT_THAT(r2.process.argv, ElementsAre("/opt/ringmaster/bin/ringmaster-trainer", "--spec", work + "/spec.json",
                                           "--checkpoint-dir", "/shared/ckpt/j-42"));
  EXPECT_EQ(r2.process.cwd, work);
  EXPECT_EQ(r2.process.log_path, dir_.Join("jobs/j-42/gen-3/rank-2.log"));
  EXPECT_TRUE(testing::FileExists(work + "/spec.json"));

  std::map<std::string, std::string> env = EnvOf(r2.process);
  EXPECT_EQ(env["PATH"], "/usr/bin:/bin");
  EXPECT_EQ(env["HOME"], "/home/rm");
  EXPECT_EQ(env["USER_VAR"], "x");
  EXPECT_EQ(env["RINGMASTER_RANK"], "2");
  EXPECT_EQ(env["RINGMASTER_WORLD_SIZE"], "4");
  EXPECT_EQ(env["RINGMASTER_LOCAL_RANK"], "0");
  EXPECT_EQ(env["RINGMASTER_NODE_RANK"], "1");
  EXPECT_EQ(env["RINGMASTER_DATA_RANK"], "1");
  EXPECT_EQ(env["RINGMASTER_PIPELINE_RANK"], "0");
  EXPECT_EQ(env["RINGMASTER_JOB_ID"], "j-42");
  EXPECT_EQ(env["RINGMASTER_GENERATION"], "3");
  EXPECT_EQ(env["RINGMASTER_RENDEZVOUS"], "grpc:unix:" + dir_.Join("agent.sock"));
  EXPECT_EQ(env["RINGMASTER_RENDEZVOUS_PREFIX"], "j-42/3");
  EXPECT_EQ(env["RINGMASTER_AGENT"], "unix:" + dir_.Join("agent.sock"));
  EXPECT_EQ(env["RINGMASTER_RENDEZVOUS_SECRET"], "0123abcd");
  EXPECT_EQ(env["RINGMASTER_HOST"], "node-7.example");
  EXPECT_EQ(env["RINGMASTER_RENDEZVOUS_DEADLINE"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(env["RINGMASTER_RESUME_FROM"], "/shared/ckpt/j-42/step-100");
  EXPECT_EQ(env["RINGMASTER_RESUME_STEP"], "100");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-aaaa");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");

  std::map<std::string, std::string> env3 = EnvOf((*launches)[1].process);
  EXPECT_EQ(env3["RINGMASTER_RANK"], "3");
  EXPECT_EQ(env3["RINGMASTER_LOCAL_RANK"], "1");
  EXPECT_EQ(env3.count("CUDA_VISIBLE_DEVICES"), 0u);  // a CPU rank
}

TEST_F(RankLauncherTest, TheSpecFileLoadsBackAsTheSameSpec) {
  const std::string example = "examples/fashion_mnist_cnn.yaml";
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(example);
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::StartRanks order = Order();
  *order.mutable_spec() = *spec;
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  absl::StatusOr<v1::JobSpec> loaded = LoadJobSpecFile((*launches)[0].process.argv[2]);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, *loaded)) << spec->DebugString() << "\nvs\n"
                                                                                  << loaded->DebugString();
}

TEST_F(RankLauncherTest, PrepareRejectsBadOrders) {
  v1::StartRanks bad_job = Order();
  bad_job.set_job_id("../etc");
  EXPECT_EQ(launcher_.Prepare(bad_job).status().code(), absl::StatusCode::kInvalidArgument);

  v1::StartRanks missing_rank = Order();
  missing_rank.add_global_ranks(9);
  absl::Status status = launcher_.Prepare(missing_rank).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 9 is not in the placement"));

  v1::StartRanks no_generation = Order();
  no_generation.set_generation(0);
  EXPECT_EQ(launcher_.Prepare(no_generation).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RankLauncherTest, StartAnswersWithTheStartedRanks) {
  v1::StartRanksResult result = launcher_.Start(Order());
  EXPECT_EQ(result.job_id(), "j-42");
  EXPECT_EQ(result.generation(), 3);
  EXPECT_THAT(result.started_ranks(), ElementsAre(2, 3));
  EXPECT_EQ(result.error(), "");
  EXPECT_EQ(control_.spawned().size(), 2u);

  v1::StartRanks older = Order();
  older.set_generation(2);
  v1::StartRanksResult refused = launcher_.Start(older);
  EXPECT_THAT(refused.started_ranks(), ElementsAre());
  EXPECT_THAT(refused.error(), HasSubstr("generation 2 is over"));

  v1::StartRanks bad = Order();
  bad.set_job_id("");
  EXPECT_THAT(launcher_.Start(bad).error(), HasSubstr("job_id"));
}

TEST_F(RankLauncherTest, StopUsesTheOrdersGraceOrTheDefault) {
  control_.IgnoreSigterm(true);
  ASSERT_THAT(launcher_.Start(Order()).started_ranks(), ElementsAre(2, 3));
  v1::StopRanks stop;
  stop.set_job_id("j-42");
  stop.set_generation(3);
  stop.add_global_ranks(3);
  stop.mutable_grace_period();  // zero: SIGKILL at once
  EXPECT_EQ(launcher_.Stop(stop), 1);
  const int64_t pid3 = control_.PidOf(3, 3);
  bool killed = false;
  for (const auto& s : control_.signals()) killed |= s.pgid == pid3 && s.sig == SIGKILL;
  EXPECT_TRUE(killed);

  ASSERT_TRUE(control_.WaitFor([&] { return supervisor_.RunningCount() == 1; }, absl::Seconds(10)));

  v1::StopRanks all;
  all.set_job_id("j-42");
  all.set_generation(3);
  EXPECT_EQ(launcher_.Stop(all), 1);  // rank 2, with the default grace: SIGTERM only
  const int64_t pid2 = control_.PidOf(2, 3);
  int term = 0, kill = 0;
  for (const auto& s : control_.signals()) {
    term += s.pgid == pid2 && s.sig == SIGTERM;
    kill += s.pgid == pid2 && s.sig == SIGKILL;
  }
  EXPECT_EQ(term, 1);
  EXPECT_EQ(kill, 0);
  supervisor_.Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace ringmaster::worker
