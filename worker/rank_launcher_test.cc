// RankLauncher: the trainer contract (argv, env, directories, rank context)
// and the StartRanks/StopRanks answers.
#include "worker/rank_launcher.h"

#include <signal.h>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/rank_context.pb.h"
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

// Four ranks on two nodes; this node runs ranks 2 and 3 (node rank 1), and
// receives only its slice of the placement.
v1::StartRanks Order() {
  v1::StartRanks order;
  order.set_job_id("j-42");
  order.set_generation(3);
  v1::Placement* placement = order.mutable_placement();
  placement->set_generation(3);
  placement->set_world_size(4);
  placement->set_data_parallel_size(2);
  placement->set_pipeline_parallel_size(2);
  placement->set_nodes(2);
  placement->set_ranks_per_node(2);
  for (int r = 2; r < 4; ++r) {
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
  order.set_checkpoint_dir("/shared/ckpt/j-42/gen-3");
  order.mutable_rendezvous_deadline()->set_seconds(1800000000);
  order.mutable_resume_from()->set_path("/shared/ckpt/j-42/gen-2/step-100");
  order.mutable_resume_from()->set_step(100);
  order.mutable_resume_from()->set_generation(2);
  (*order.mutable_env())["USER_VAR"] = "x";
  (*order.mutable_spec()->mutable_env())["NCCL_DEBUG"] = "INFO";
  (*order.mutable_spec()->mutable_env())["USER_VAR"] = "from the spec";  // the order's own wins
  order.set_rendezvous_secret("0123abcd");
  order.mutable_spec()->set_name("tiny");
  order.mutable_spec()->mutable_parallelism()->set_data(2);
  order.mutable_spec()->mutable_parallelism()->set_pipeline(2);
  order.mutable_spec()->mutable_resources()->set_device(v1::ResourceSpec::CUDA);
  order.mutable_spec()->mutable_data()->set_path("/usr/share/datasets/fashion-mnist");
  return order;
}

v1::RankContext ReadContext(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::RankContext context;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &context).ok()) << text.str();
  return context;
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
    options.data_roots = {"/usr/share/datasets"};
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
  EXPECT_THAT(r2.process.argv,
              ElementsAre("/opt/ringmaster/bin/ringmaster-trainer", "--rank-context", work + "/rank.json"));
  EXPECT_EQ(r2.process.cwd, work);
  EXPECT_EQ(r2.process.log_path, dir_.Join("jobs/j-42/gen-3/rank-2.log"));

  // The environment is the worker's, the order's, and the CUDA runtime's
  // device pinning; nothing of the contract travels in it.
  std::map<std::string, std::string> env = EnvOf(r2.process);
  EXPECT_EQ(env["PATH"], "/usr/bin:/bin");
  EXPECT_EQ(env["HOME"], "/home/rm");
  EXPECT_EQ(env["USER_VAR"], "x");
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-aaaa");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  for (const auto& [key, value] : env) EXPECT_NE(key.rfind("RINGMASTER_", 0), 0u) << key;
  EXPECT_EQ(EnvOf((*launches)[1].process).count("CUDA_VISIBLE_DEVICES"), 0u);

  // The rank context: the whole contract, readable by its owner only.
  struct stat st;
  ASSERT_EQ(stat((work + "/rank.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const v1::RankContext c = ReadContext(work + "/rank.json");
  EXPECT_EQ(c.job_id(), "j-42");
  EXPECT_EQ(c.generation(), 3);
  EXPECT_EQ(c.spec().name(), "tiny");
  EXPECT_EQ(c.rank().global_rank(), 2);
  EXPECT_EQ(c.rank().local_rank(), 0);
  EXPECT_EQ(c.rank().node_rank(), 1);
  EXPECT_EQ(c.rank().data_rank(), 1);
  EXPECT_EQ(c.rank().pipeline_rank(), 0);
  EXPECT_EQ(c.world().world_size(), 4);
  EXPECT_EQ(c.world().data(), 2);
  EXPECT_EQ(c.world().pipeline(), 2);
  EXPECT_EQ(c.world().nodes(), 2);
  EXPECT_EQ(c.world().ranks_per_node(), 2);
  EXPECT_EQ(c.rendezvous().address(), "grpc:unix:" + dir_.Join("agent.sock"));
  EXPECT_EQ(c.rendezvous().secret(), "0123abcd");
  EXPECT_EQ(c.rendezvous().deadline().seconds(), 1800000000);
  EXPECT_EQ(c.agent(), "unix:" + dir_.Join("agent.sock"));
  EXPECT_EQ(c.resume_from().path(), "/shared/ckpt/j-42/gen-2/step-100");
  EXPECT_EQ(c.resume_from().generation(), 2);
  EXPECT_EQ(c.checkpoint_dir(), "/shared/ckpt/j-42/gen-3");
  EXPECT_EQ(c.device().kind(), v1::RankDevice::CUDA);
  EXPECT_EQ(c.device().gpu_uuid(), "GPU-aaaa");
  EXPECT_EQ(c.advertise_host(), "node-7.example");
  EXPECT_EQ(ReadContext((*launches)[1].process.argv[2]).rank().pipeline_rank(), 1);
}

TEST_F(RankLauncherTest, TheContextsSpecIsTheOrdersSpec) {
  const std::string example = "examples/fashion_mnist_cnn.yaml";
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(example);
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::StartRanks order = Order();
  *order.mutable_spec() = *spec;
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  const v1::RankContext c = ReadContext((*launches)[0].process.argv[2]);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, c.spec())) << spec->DebugString() << "\nvs\n"
                                                                                   << c.spec().DebugString();
}

TEST_F(RankLauncherTest, ADataPathOutsideTheDataRootsIsRefusedForGood) {
  for (const std::string path : {"/etc/ringmaster/worker.key", "/usr/share/datasets/../../etc/passwd",
                                 "/usr/share/datasets2/x"}) {
    v1::StartRanks order = Order();
    order.mutable_spec()->mutable_data()->set_path(path);
    absl::Status status = launcher_.Prepare(order).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_EQ(status.message(),
              absl::StrCat("data.path: ", path,
                           " is outside this node's data roots (/usr/share/datasets); put the dataset under one of "
                           "them, or ask the operator to add a root (ringmaster-worker --data-roots)"));
    v1::StartRanksResult result = launcher_.Start(order);
    EXPECT_TRUE(result.unrecoverable()) << path;
    EXPECT_THAT(result.started_ranks(), ElementsAre());
  }
  EXPECT_TRUE(control_.spawned().empty());
  v1::StartRanks synthetic = Order();
  synthetic.mutable_spec()->mutable_data()->clear_path();
  EXPECT_TRUE(launcher_.Prepare(synthetic).ok()) << "synthetic data reads no file";
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
