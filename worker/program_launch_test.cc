// Program jobs in the worker: the command resolved on the node, torchrun's
// environment, the SDK on PYTHONPATH, the master port check, and the
// launcher's choice between the built-in trainer and the program.
#include "worker/program_launch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_process_control.h"
#include "worker/rank_launcher.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

std::map<std::string, std::string> EnvOf(const SpawnRequest& request) { return testing::EnvMap(request.env); }

// Rank 1 of two, on the second of two nodes, of a program job in its third
// generation.
v1::StartRanks ProgramOrder() {
  v1::StartRanks order;
  order.set_job_id("j-7");
  order.set_generation(3);
  v1::Placement* placement = order.mutable_placement();
  placement->set_generation(3);
  placement->set_world_size(2);
  placement->set_data_parallel_size(2);
  placement->set_pipeline_parallel_size(1);
  placement->set_nodes(2);
  placement->set_ranks_per_node(1);
  placement->set_master_addr("node-0.example");
  placement->set_master_port(29517);
  v1::RankAssignment* a = placement->add_ranks();
  a->set_global_rank(1);
  a->set_node_rank(1);
  a->set_data_rank(1);
  order.add_global_ranks(1);
  order.set_rendezvous_secret("s3cret");
  v1::JobSpec* spec = order.mutable_spec();
  spec->mutable_program()->add_command("sh");
  spec->mutable_program()->add_command("-c");
  spec->mutable_program()->add_command("exit 0");
  spec->mutable_program()->set_working_dir("/srv/code");
  (*spec->mutable_program()->mutable_env())["PYTHONPATH"] = "/srv/lib";
  (*spec->mutable_program()->mutable_env())["OMP_NUM_THREADS"] = "1";
  spec->mutable_resources()->set_device(v1::ResourceSpec::CPU);
  spec->mutable_restart()->set_max_restarts(5);
  return order;
}

TEST(ResolveProgramTest, LooksUpANameInPathAndKeepsAPath) {
  EXPECT_EQ(*ResolveProgram("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(*ResolveProgram("./train.py", "/bin"), "./train.py");
  absl::StatusOr<std::string> missing = ResolveProgram("no-such-program", "/bin:/usr/bin");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("program.command[0]: \"no-such-program\""));
}

TEST(PythonPathWithSdkTest, PutsTheSdkFirst) {
  EXPECT_EQ(PythonPathWithSdk("/opt/rm/python", ""), "/opt/rm/python");
  EXPECT_EQ(PythonPathWithSdk("/opt/rm/python", "/srv/lib"), "/opt/rm/python:/srv/lib");
  EXPECT_EQ(PythonPathWithSdk("", "/srv/lib"), "/srv/lib");
}

TEST(CheckMasterPortFreeTest, RefusesAPortAListenerHolds) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t size = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int port = ntohs(address.sin_port);
  absl::Status held = CheckMasterPortFree(port);
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(held.message(), HasSubstr(absl::StrCat("MASTER_PORT ", port, " is held")));
  close(fd);
  EXPECT_TRUE(CheckMasterPortFree(port).ok());
}

class ProgramLaunchTest : public ::testing::Test {
 protected:
  ProgramLaunchTest()
      : supervisor_(&control_, Clock::Real(), [](const RankExit&) {}), launcher_(&supervisor_, nullptr, Options()) {}

  RankLauncherOptions Options() {
    RankLauncherOptions options;
    options.state_dir = dir_.path();
    options.trainer_path = "/opt/ringmaster/bin/ringmaster-trainer";
    options.agent_socket = dir_.Join("agent.sock");
    options.python_sdk_dir = "/opt/ringmaster/python";
    options.allowed_env = {"*", "PYTHONPATH"};  // the operator lets jobs add to it
    return options;
  }

  TempDir dir_;
  FakeProcessControl control_;
  ProcessSupervisor supervisor_;
  RankLauncher launcher_;
};

TEST_F(ProgramLaunchTest, AProgramRankRunsItsCommandWithTorchrunsEnvironment) {
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(ProgramOrder());
  ASSERT_TRUE(launches.ok()) << launches.status();
  ASSERT_EQ(launches->size(), 1u);
  const SpawnRequest& process = (*launches)[0].process;
  EXPECT_THAT(process.path, AnyOf("/usr/bin/sh", "/bin/sh"));  // the first of the rank's PATH that has it
  EXPECT_THAT(process.argv, ElementsAre("sh", "-c", "exit 0"));
  EXPECT_EQ(process.cwd, "/srv/code");
  std::map<std::string, std::string> env = EnvOf(process);
  const std::string context = dir_.Join("ranks/j-7/gen-3/rank-1/rank.json");
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"RANK", "1"},
           {"WORLD_SIZE", "2"},
           {"LOCAL_RANK", "0"},
           {"LOCAL_WORLD_SIZE", "1"},
           {"GROUP_RANK", "1"},
           {"GROUP_WORLD_SIZE", "2"},
           {"ROLE_RANK", "1"},
           {"ROLE_WORLD_SIZE", "2"},
           {"MASTER_ADDR", "node-0.example"},
           {"MASTER_PORT", "29517"},
           {"TORCHELASTIC_RESTART_COUNT", "2"},
           {"TORCHELASTIC_MAX_RESTARTS", "5"},
           {"TORCHELASTIC_RUN_ID", "j-7"},
           {"RINGMASTER_RANK_CONTEXT", context},
           {"PYTHONPATH", "/opt/ringmaster/python:/srv/lib"},
           {"OMP_NUM_THREADS", "1"},
       }) {
    EXPECT_EQ(env[key], value) << key;
  }
  EXPECT_EQ(access(context.c_str(), R_OK), 0);  // the SDK's rank.json is written as for the trainer
}

TEST_F(ProgramLaunchTest, WithoutAWorkingDirTheRankRunsInItsOwnDirectory) {
  v1::StartRanks order = ProgramOrder();
  order.mutable_spec()->mutable_program()->clear_working_dir();
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  EXPECT_EQ((*launches)[0].process.cwd, dir_.Join("ranks/j-7/gen-3/rank-1"));
}

TEST_F(ProgramLaunchTest, AProgramNotOnTheNodeIsRefusedForGood) {
  v1::StartRanks order = ProgramOrder();
  order.mutable_spec()->mutable_program()->set_command(0, "no-such-program");
  const v1::StartRanksResult result = launcher_.Start(order);
  EXPECT_TRUE(result.started_ranks().empty());
  EXPECT_TRUE(result.unrecoverable());
  EXPECT_THAT(result.error(), HasSubstr("program.command[0]"));
}

TEST_F(ProgramLaunchTest, TheWorkersOwnVariablesWinOverTheProgramsEnv) {
  v1::StartRanks order = ProgramOrder();
  (*order.mutable_spec()->mutable_program()->mutable_env())["MASTER_PORT"] = "1";  // the coordinator refuses it
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  EXPECT_EQ(EnvOf((*launches)[0].process)["MASTER_PORT"], "29517");
}

TEST_F(ProgramLaunchTest, AProgramEnvNameThisNodeRefusesIsNamed) {
  v1::StartRanks order = ProgramOrder();
  (*order.mutable_spec()->mutable_program()->mutable_env())["LD_PRELOAD"] = "/tmp/x.so";
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher_.Prepare(order);
  EXPECT_EQ(launches.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(launches.status().message(), HasSubstr("program.env.LD_PRELOAD"));
}

}  // namespace
}  // namespace ringmaster::worker
