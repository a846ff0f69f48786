#include "common/env_policy.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

EnvPolicy Policy(const std::vector<std::string>& entries) {
  absl::StatusOr<EnvPolicy> policy = EnvPolicy::Create(entries);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *policy;
}

TEST(EnvPolicyTest, TheBuiltInListIsNamesThatNeitherLoadCodeNorNamePaths) {
  std::set<std::string> seen;
  for (const KnownEnvVariable& known : DefaultAllowedEnv()) {
    EXPECT_EQ(CodeOrPathReason(known.name), "") << known.name;
    EXPECT_FALSE(IsWorkerOwnedEnv(known.name)) << known.name;
    EXPECT_TRUE(seen.insert(known.name).second) << known.name << " twice";
    EXPECT_NE(std::string(known.why), "") << known.name;
  }
  for (const char* name : {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "NCCL_ALGO", "NCCL_PROTO",
                           "NCCL_MIN_NCHANNELS", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_LAUNCH_BLOCKING"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
}

TEST(EnvPolicyTest, NamesThatLoadCodeOrOpenAPathAreRecognised) {
  for (const char* name : {"CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
                           "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN", "NCCL_IBVERBS_LIB", "LD_PRELOAD",
                           "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME"}) {
    EXPECT_NE(CodeOrPathReason(name).find("loads code"), std::string::npos) << name << ": " << CodeOrPathReason(name);
  }
  for (const char* name : {"NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_CONF_FILE", "NCCL_GRAPH_DUMP_FILE",
                           "CUDA_CACHE_PATH", "CUDA_LOG_FILE", "CUDA_COREDUMP_FILE", "CUDA_COREDUMP_PIPE",
                           "CUDA_MPS_PIPE_DIRECTORY", "SOME_CACHE_DIR"}) {
    EXPECT_NE(CodeOrPathReason(name).find("names a file or directory"), std::string::npos)
        << name << ": " << CodeOrPathReason(name);
  }
  EXPECT_EQ(CodeOrPathReason("NCCL_PLUGIN_MODE"), "");  // a suffix, not a substring
  EXPECT_EQ(CodeOrPathReason("NCCL_P2P_DIRECT_DISABLE"), "");
}

TEST(EnvPolicyTest, TheDefaultAdmitsTheListOnly) {
  const EnvPolicy policy = Policy({kDefaultAllowedEnvEntry});
  EXPECT_TRUE(policy.Check("NCCL_DEBUG").ok());
  EXPECT_TRUE(policy.Check("CUDA_DEVICE_MAX_CONNECTIONS").ok());
  absl::Status refused = policy.Check("NCCL_RAS_ADDR");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "env.NCCL_RAS_ADDR: not a variable this coordinator lets jobs set (allowed: the built-in NCCL/CUDA "
            "tuning variables (docs/security.md)); ask the operator to allow it (ringmaster-coordinator "
            "--allowed-env)");
}

TEST(EnvPolicyTest, APrefixNeverAdmitsCodeOrPathsButAnExactNameDoes) {
  const EnvPolicy patterns = Policy({"NCCL_*", "CUDA_*", "LD_*"});
  EXPECT_TRUE(patterns.Check("NCCL_ALGO").ok());
  EXPECT_TRUE(patterns.Check("NCCL_SOME_FUTURE_KNOB").ok());
  for (const char* name : {"CUDA_INJECTION64_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_DEBUG_FILE",
                           "LD_PRELOAD"}) {
    absl::Status refused = patterns.Check(name);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(refused.message().rfind(std::string("env.") + name + ": ", 0), 0u) << refused.message();
  }
  EXPECT_EQ(patterns.Check("NCCL_NET_PLUGIN").message(),
            "env.NCCL_NET_PLUGIN: loads code (matches *_PLUGIN); no pattern admits such a variable, only the "
            "operator naming it exactly (ringmaster-coordinator --allowed-env NCCL_NET_PLUGIN) after deciding that "
            "every job may do that");
  EXPECT_EQ(patterns.Check("NCCL_DEBUG_FILE").message().rfind(
                "env.NCCL_DEBUG_FILE: names a file or directory (matches *_FILE)", 0),
            0u);
  // Named exactly, each is the operator's decision.
  const EnvPolicy exact = Policy({"NCCL_*", "NCCL_NET_PLUGIN", "LD_PRELOAD"});
  EXPECT_TRUE(exact.Check("NCCL_NET_PLUGIN").ok());
  EXPECT_TRUE(exact.Check("LD_PRELOAD").ok());
  EXPECT_FALSE(exact.Check("NCCL_TUNER_PLUGIN").ok());
  // Even "*" admits none of them.
  const EnvPolicy everything = Policy({"*"});
  EXPECT_TRUE(everything.Check("OMP_NUM_THREADS").ok());
  EXPECT_FALSE(everything.Check("PYTHONPATH").ok());
}

TEST(EnvPolicyTest, WhatTheWorkerSetsIsNeverAJobs) {
  const EnvPolicy policy = Policy({"*", "TMPDIR", "CUDA_VISIBLE_DEVICES"});
  for (const char* name : {"TMPDIR", "HOME", "USER", "LOGNAME", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                           "RINGMASTER_RANK"}) {
    absl::Status refused = policy.Check(name);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(refused.message(), std::string("env.") + name + ": set by the worker for each rank; a job cannot override it");
  }
}

// The worker checks again with its own --allowed-env; its messages name it.
TEST(EnvPolicyTest, TheWorkersPolicyNamesTheWorkersFlag) {
  absl::StatusOr<EnvPolicy> worker = EnvPolicy::Create({"*"}, "worker");
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(worker->Check("NCCL_SOME_FUTURE_KNOB").ok());
  EXPECT_EQ(worker->Check("NCCL_TUNER_PLUGIN").message(),
            "env.NCCL_TUNER_PLUGIN: loads code (matches *_PLUGIN); no pattern admits such a variable, only the "
            "operator naming it exactly (ringmaster-worker --allowed-env NCCL_TUNER_PLUGIN) after deciding that "
            "every job may do that");
  EXPECT_EQ(EnvPolicy::Create({""}, "worker")->Check("NCCL_DEBUG").message(),
            "env.NCCL_DEBUG: not a variable this worker lets jobs set (allowed: none); ask the operator to allow "
            "it (ringmaster-worker --allowed-env)");
}

TEST(EnvPolicyTest, EntriesAreNamesPrefixesOrTheDefault) {
  const EnvPolicy none = Policy({""});
  EXPECT_EQ(none.Describe(), "none");
  EXPECT_EQ(none.Check("NCCL_DEBUG").message(),
            "env.NCCL_DEBUG: not a variable this coordinator lets jobs set (allowed: none); ask the operator to "
            "allow it (ringmaster-coordinator --allowed-env)");
  EXPECT_EQ(Policy({"NCCL_*", "CUDA_*"}).Describe(), "NCCL_*, CUDA_*");
  for (const char* bad : {"NCCL DEBUG", "1X", "NC*CL", "a=b", "**", "default"}) {
    absl::StatusOr<EnvPolicy> policy = EnvPolicy::Create({bad});
    if (std::string(bad) == "default") {
      EXPECT_TRUE(policy.ok());  // a (strange) variable name
      continue;
    }
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(policy.status().message().find(std::string("\"") + bad + "\""), std::string::npos);
  }
}

}  // namespace
}  // namespace ringmaster
