// What a submission must pass before it is stored (job_admission.h): the
// request's bounds, checkpoint roots, the env policy, and defaults applied
// before validation. Each refusal is INVALID_ARGUMENT naming the field.
#include "coordinator/core/job_admission.h"

#include <string>
#include <vector>

#include "common/spec.h"
#include "coordinator/testing/test_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::MakeSpec;

TEST(JobAdmissionTest, SubmitOptionsAreBounded) {
  SubmitOptions options;
  options.request_id = std::string(128, 'r');
  options.overrides.assign(256, std::string(4096, 'x'));
  EXPECT_TRUE(CheckSubmitOptions(options).ok());

  SubmitOptions long_id;
  long_id.request_id = std::string(129, 'r');
  EXPECT_EQ(CheckSubmitOptions(long_id).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSubmitOptions(long_id).message(), "request_id: must be at most 128 characters, got 129");
  SubmitOptions many;
  many.overrides.assign(257, "optimizer.lr=1");
  EXPECT_EQ(CheckSubmitOptions(many).message(), "overrides: at most 256 --set assignments, got 257");
  SubmitOptions long_override;
  long_override.overrides = {"name=a", std::string(4097, 'x')};
  EXPECT_EQ(CheckSubmitOptions(long_override).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSubmitOptions(long_override).message(), "overrides[1]: must be at most 4096 bytes, got 4097");
}

TEST(JobAdmissionTest, CheckpointRootsAreTheAllowedOnesThenTheCoordinatorsOwn) {
  JobControllerOptions options;
  options.checkpoint_root = "/ckpt";
  options.allowed_checkpoint_roots = {"/shared/a", "/shared/b"};
  EXPECT_EQ(CheckpointRoots(options), (std::vector<std::string>{"/shared/a", "/shared/b", "/ckpt"}));
}

TEST(JobAdmissionTest, ACheckpointDirectoryLiesWithinAnAllowedRoot) {
  const std::vector<std::string> roots = {"/shared", "/ckpt"};
  EXPECT_TRUE(CheckCheckpointRoot("", roots).ok());  // the coordinator's own
  EXPECT_TRUE(CheckCheckpointRoot("/ckpt/team-a/", roots).ok());
  EXPECT_TRUE(CheckCheckpointRoot("/shared", roots).ok());
  absl::Status outside = CheckCheckpointRoot("/home/alice/other-job", roots);
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outside.message(),
            "checkpoint.directory: /home/alice/other-job is not within a checkpoint root this coordinator allows "
            "(/shared, /ckpt); leave it out to use the coordinator's own, or ask the operator to allow it "
            "(ringmaster-coordinator --checkpoint-allowed-roots)");
  EXPECT_EQ(CheckCheckpointRoot("/ckpt/../etc", roots).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckCheckpointRoot("/ckpt-other", roots).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobAdmissionTest, EnvNamesMustBeOnesThePolicyAllows) {
  v1::JobSpec spec = MakeSpec(1, 1);
  (*spec.mutable_env())["NCCL_DEBUG"] = "INFO";
  EXPECT_TRUE(CheckEnvAllowed(spec, {"@default"}).ok());
  EXPECT_EQ(CheckEnvAllowed(spec, {"CUDA_LAUNCH_BLOCKING"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEnvAllowed(spec, {"NCCL_*"}).ok());
  // Several refused: the first in sorted order, every time.
  (*spec.mutable_env())["ZZ_LATE"] = "1";
  (*spec.mutable_env())["AA_EARLY"] = "1";
  absl::Status refused = CheckEnvAllowed(spec, {"@default"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message().substr(0, 13), "env.AA_EARLY:") << refused;
}

TEST(JobAdmissionTest, AdmitAppliesDefaultsThenChecksEverything) {
  JobControllerOptions options;
  options.checkpoint_root = "/ckpt";
  v1::JobSpec spec = MakeSpec(1, 1);
  v1::JobSpec defaulted = spec;
  ApplyDefaults(&defaulted);
  ASSERT_TRUE(AdmitJobSpec(&spec, options).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(spec, defaulted));

  v1::JobSpec no_nodes = MakeSpec(0, 1);
  absl::Status invalid = AdmitJobSpec(&no_nodes, options);
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid.message(), "resources.nodes: must be >= 1, got 0");
  v1::JobSpec outside = MakeSpec(1, 1);
  outside.mutable_checkpoint()->set_directory("/tmp/x");
  EXPECT_EQ(AdmitJobSpec(&outside, options).message().substr(0, 29), "checkpoint.directory: /tmp/x ");
  v1::JobSpec preload = MakeSpec(1, 1);
  (*preload.mutable_env())["LD_PRELOAD"] = "/tmp/evil.so";
  EXPECT_EQ(AdmitJobSpec(&preload, options).message().substr(0, 15), "env.LD_PRELOAD:");
}

}  // namespace
}  // namespace ringmaster::coordinator
