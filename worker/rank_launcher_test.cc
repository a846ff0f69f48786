// RankLauncher: the trainer contract (argv, env, directories, rank context)
// and the StartRanks/StopRanks answers.
#include "worker/rank_launcher.h"

#include <signal.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/rank_context.pb.h"
#include "worker/testing/fake_process_control.h"
#include "worker/paths.h"
#include "worker/run_as.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FileExists;
using testing::TempDir;

std::map<std::string, std::string> EnvOf(const SpawnRequest& request) { return testing::EnvMap(request.env); }

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
  order.add_checkpoint_roots("/shared/ckpt");
  order.mutable_rendezvous_deadline()->set_seconds(1800000000);
  order.mutable_resume_from()->set_path("/shared/ckpt/j-42/gen-2/step-100");
  order.mutable_resume_from()->set_step(100);
  order.mutable_resume_from()->set_generation(2);
  (*order.mutable_env())["USER_VAR"] = "x";
  (*order.mutable_spec()->mutable_env())["NCCL_DEBUG"] = "INFO";
  (*order.mutable_spec()->mutable_env())["USER_VAR"] = "from the spec";  // the order's own wins
  (*order.mutable_spec()->mutable_env())["TMPDIR"] = "/tmp";  // the worker's own wins
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
    options.node_env = {"LANG=C.UTF-8", "USER_VAR=node", "NODE_VAR=node"};
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
  const std::string work = dir_.Join("ranks/j-42/gen-3/rank-2");
  EXPECT_EQ(r2.process.path, "/opt/ringmaster/bin/ringmaster-trainer");
  EXPECT_THAT(r2.process.argv,
              ElementsAre("/opt/ringmaster/bin/ringmaster-trainer", "--rank-context", work + "/rank.json"));
  EXPECT_EQ(r2.process.cwd, work);
  EXPECT_EQ(r2.process.log_path, dir_.Join("jobs/j-42/gen-3/rank-2.log"));

  // The environment is the minimal one, the node's, the spec's, the order's,
  // then the worker's own (HOME, USER, TMPDIR, the CUDA runtime's device
  // pinning); nothing of the worker's environment, nothing of the contract.
  const RunAccount self = WorkerAccount();
  std::map<std::string, std::string> env = EnvOf(r2.process);
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"PATH", kRankPath},
                     {"LANG", "C.UTF-8"},
                     {"NODE_VAR", "node"},
                     {"USER_VAR", "x"},
                     {"NCCL_DEBUG", "INFO"},
                     {"HOME", self.home.empty() ? dir_.Join("ranks/j-42") : self.home},
                     {"USER", self.name},
                     {"LOGNAME", self.name},
                     {"TMPDIR", dir_.Join("ranks/j-42/tmp")},
                     {"CUDA_VISIBLE_DEVICES", "GPU-aaaa"},
                     {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                 }));
  EXPECT_EQ(EnvOf((*launches)[1].process).count("CUDA_VISIBLE_DEVICES"), 0u);
  // As the worker (--run-as self): no account to switch to.
  EXPECT_FALSE(r2.process.credentials.has_value());
  // The job's private directory, its TMPDIR.
  struct stat job_dir;
  ASSERT_EQ(stat(dir_.Join("ranks/j-42").c_str(), &job_dir), 0);
  EXPECT_EQ(job_dir.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(dir_.Join("ranks/j-42/tmp").c_str(), &job_dir), 0);
  EXPECT_EQ(job_dir.st_mode & 0777, 0700u);

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
  ASSERT_EQ(c.checkpoint_roots_size(), 1);
  EXPECT_EQ(c.checkpoint_roots(0), "/shared/ckpt");
  EXPECT_EQ(c.data_root(), "/usr/share/datasets");
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

// The worker checks the env names again (issue #27): a job stored before
// the coordinator's list changed, or a coordinator that let one through,
// still cannot hand a trainer a variable that loads code or names a path
// unless this node's operator named it exactly; nothing starts.
TEST_F(RankLauncherTest, AnEnvNameThisNodeRefusesIsRefusedForGood) {
  for (const char* name : {"NCCL_NET_PLUGIN", "CUDA_INJECTION64_PATH", "NCCL_DEBUG_FILE", "LD_PRELOAD", "PYTHONPATH"}) {
    for (bool in_spec : {true, false}) {
      v1::StartRanks order = Order();
      (*(in_spec ? order.mutable_spec()->mutable_env() : order.mutable_env()))[name] = "/tmp/x.so";
      absl::Status status = launcher_.Prepare(order).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
      EXPECT_TRUE(absl::StartsWith(status.message(), absl::StrCat("env.", name, ": "))) << status.message();
      EXPECT_TRUE(absl::EndsWith(status.message(), absl::StrCat("only the operator naming it exactly "
                                                                "(ringmaster-worker --allowed-env ",
                                                                name, ") after deciding that every job may do that")))
          << status.message();
      v1::StartRanksResult result = launcher_.Start(order);
      EXPECT_TRUE(result.unrecoverable()) << name;
      EXPECT_THAT(result.started_ranks(), ElementsAre());
    }
  }
  EXPECT_TRUE(control_.spawned().empty());

  // Named exactly on this node, it reaches the trainer.
  RankLauncherOptions options = Options();
  options.allowed_env = {"*", "NCCL_NET_PLUGIN"};
  RankLauncher exact(&supervisor_, nullptr, options);
  v1::StartRanks order = Order();
  (*order.mutable_spec()->mutable_env())["NCCL_NET_PLUGIN"] = "/opt/nccl/libnccl-net.so";
  absl::StatusOr<std::vector<RankLaunch>> launches = exact.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  EXPECT_EQ(EnvOf((*launches)[0].process)["NCCL_NET_PLUGIN"], "/opt/nccl/libnccl-net.so");

  // A stricter node: only the built-in list.
  options.allowed_env = {"@default"};
  RankLauncher strict(&supervisor_, nullptr, options);
  order = Order();  // NCCL_DEBUG (listed) and USER_VAR (not)
  EXPECT_EQ(strict.Prepare(order).status().message(),
            "env.USER_VAR: not a variable this worker lets jobs set (allowed: the built-in NCCL/CUDA tuning "
            "variables (docs/security.md)); ask the operator to allow it (ringmaster-worker --allowed-env)");
}

// A link a job planted under a data root or a checkpoint root (issue #27):
// the order is refused for good (PERMISSION_DENIED naming the link), no rank
// starts, and nothing is written through the link.
TEST_F(RankLauncherTest, ALinkPlantedUnderARootIsRefusedForGood) {
  const std::string data = dir_.Join("data"), ckpt = dir_.Join("ckpt"), secret = dir_.Join("secret");
  std::filesystem::create_directories(data);
  std::filesystem::create_directories(ckpt);
  std::filesystem::create_directories(secret);
  RankLauncherOptions options = Options();
  options.data_roots = {data};
  RankLauncher launcher(&supervisor_, nullptr, options);
  ASSERT_EQ(symlink(secret.c_str(), (data + "/ds").c_str()), 0);
  v1::StartRanks order = Order();
  order.mutable_spec()->mutable_data()->set_path(data + "/ds");
  order.set_checkpoint_dir(ckpt + "/j-42/gen-3");
  order.clear_checkpoint_roots();
  order.add_checkpoint_roots(ckpt);
  absl::Status status = launcher.Prepare(order).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("data.path: " + data + "/ds: leads out of " + data + " through a symbolic link (" + data +
                        "/ds is one)"));
  EXPECT_TRUE(launcher.Start(order).unrecoverable());

  order.mutable_spec()->mutable_data()->set_path(data);
  ASSERT_EQ(symlink(secret.c_str(), (ckpt + "/j-42").c_str()), 0);
  status = launcher.Prepare(order).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "checkpoint_dir: " + ckpt + "/j-42/gen-3: " + ckpt +
                                  "/j-42 is a symbolic link; links are not followed beneath " + ckpt);
  EXPECT_TRUE(launcher.Start(order).unrecoverable());
  // A checkpoint directory beneath none of the coordinator's roots.
  order.clear_checkpoint_roots();
  order.add_checkpoint_roots(dir_.Join("other"));
  EXPECT_EQ(launcher.Prepare(order).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(control_.spawned().empty());
  EXPECT_TRUE(std::filesystem::is_empty(secret));
  // Without the links, the same order starts.
  std::filesystem::remove(ckpt + "/j-42");
  order.clear_checkpoint_roots();
  order.add_checkpoint_roots(ckpt);
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  EXPECT_EQ(ReadContext((*launches)[0].process.argv[2]).data_root(), data);
}

TEST_F(RankLauncherTest, AJobWhoseOwnerHasNoAccountHereIsRefusedForGood) {
  std::map<std::string, std::string> map = {{"alice", "nobody"}};
  absl::StatusOr<RunAsPolicy> owner = RunAsPolicy::Owner(map, "/etc/ringmaster/accounts");
  if (!owner.ok()) GTEST_SKIP() << owner.status();  // no account "nobody", or the worker runs as it
  RankLauncherOptions options = Options();
  options.run_as = *owner;
  RankLauncher launcher(&supervisor_, nullptr, options);
  v1::StartRanks order = Order();
  order.set_owner("mallory");
  absl::Status status = launcher.Prepare(order).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(),
            "user mallory has no account on this node (not in /etc/ringmaster/accounts); ask the operator to map "
            "it (ringmaster-worker --run-as-map)");
  order.clear_owner();
  EXPECT_EQ(launcher.Prepare(order).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(launcher.Start(order).unrecoverable());
  EXPECT_TRUE(control_.spawned().empty());
}

// As root, the worker gives the job's directory to the run account and makes
// everything in it (and the checkpoint directory) as that account.
TEST_F(RankLauncherTest, RanksOfAnotherAccountGetTheirOwnDirectoriesAndCredentials) {
  std::string why;
  if (!testing::CanActAsOtherAccounts(&why)) GTEST_SKIP() << why;
  absl::StatusOr<RunAsPolicy> nobody = RunAsPolicy::Account("nobody");
  if (!nobody.ok()) GTEST_SKIP() << nobody.status();
  const RunAccount account = *nobody->AccountFor("");
  const std::string ckpt_root = dir_.Join("ckpt");
  ASSERT_EQ(mkdir(ckpt_root.c_str(), 0711), 0);
  RankLauncherOptions options = Options();
  options.run_as = *nobody;
  RankLauncher launcher(&supervisor_, nullptr, options);
  v1::StartRanks order = Order();
  order.set_checkpoint_dir(ckpt_root + "/j-42/gen-3");
  order.clear_checkpoint_roots();
  order.add_checkpoint_roots(ckpt_root);
  absl::StatusOr<std::vector<RankLaunch>> launches = launcher.Prepare(order);
  ASSERT_TRUE(launches.ok()) << launches.status();
  const SpawnRequest& r2 = (*launches)[0].process;
  ASSERT_TRUE(r2.credentials.has_value());
  EXPECT_EQ(r2.credentials->uid, account.uid);
  EXPECT_EQ(r2.credentials->gid, account.gid);
  EXPECT_EQ(r2.credentials->groups, account.groups);
  EXPECT_EQ(EnvOf(r2)["USER"], "nobody");
  EXPECT_EQ(EnvOf(r2)["HOME"], account.home);
  for (const std::string& path : {dir_.Join("ranks/j-42"), dir_.Join("ranks/j-42/tmp"), dir_.Join("ranks/j-42/gen-3"),
                                  dir_.Join("ranks/j-42/gen-3/rank-2"), ckpt_root + "/j-42",
                                  ckpt_root + "/j-42/gen-3"}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, account.uid) << path;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << path;
  }
  struct stat context;
  ASSERT_EQ(stat(r2.argv[2].c_str(), &context), 0);
  EXPECT_EQ(context.st_uid, account.uid);
  EXPECT_EQ(context.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadContext(r2.argv[2]).rank().global_rank(), 2);

  // A link the job's own ranks planted where the next generation's
  // directory goes: refused, and nothing is written through it.
  const std::string elsewhere = dir_.Join("elsewhere");
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0777), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), dir_.Join("ranks/j-42/gen-4").c_str()), 0);
  order.set_generation(4);
  order.mutable_placement()->set_generation(4);
  order.set_checkpoint_dir(ckpt_root + "/j-42/gen-4");
  absl::Status planted = launcher.Prepare(order).status();
  EXPECT_EQ(planted.code(), absl::StatusCode::kPermissionDenied) << planted;
  EXPECT_THAT(std::string(planted.message()), HasSubstr(dir_.Join("ranks/j-42/gen-4")));
  EXPECT_FALSE(FileExists(elsewhere + "/rank-2"));
}

TEST(NodeRankEnvTest, SetsPassesAndPrefixes) {
  const std::vector<std::string> worker = {"LANG=en_US.UTF-8", "NCCL_SOCKET_IFNAME=ib0", "NCCL_IB_HCA=mlx5_0",
                                           "SECRET=x", "HOME=/root", "TERM=xterm"};
  absl::StatusOr<std::vector<std::string>> env = NodeRankEnv({}, worker);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(*env, ElementsAre("LANG=en_US.UTF-8"));
  env = NodeRankEnv({"NCCL_*", "TERM", "MISSING", "OMP_NUM_THREADS=8"}, worker);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(*env, ElementsAre("LANG=en_US.UTF-8", "NCCL_IB_HCA=mlx5_0", "NCCL_SOCKET_IFNAME=ib0",
                                "OMP_NUM_THREADS=8", "TERM=xterm"));
  EXPECT_EQ(NodeRankEnv({"TMPDIR=/tmp"}, worker).status().message(),
            "--rank-env TMPDIR=/tmp: the worker sets TMPDIR for each rank itself");
  EXPECT_EQ(NodeRankEnv({"A B"}, worker).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeRankEnv({"=x"}, worker).status().code(), absl::StatusCode::kInvalidArgument);
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
