// DataParallel's contract beyond the numbers: the bucket plan, the broadcast
// of parameters and buffers, the step protocol, the timing report, and errors
// of the group (a dead or absent peer) returned instead of a hang.

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/testing/dp_harness.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using testing::RunRanks;

std::shared_ptr<dist::InProcessWorld> MakeWorld(int size, absl::Duration timeout = absl::Seconds(30)) {
  dist::InProcessOptions options;
  options.name = "dp";
  options.timeout = timeout;
  return dist::InProcessWorld::Create(size, options);
}

// One rank's model, loss and a forward pass ready for Backward.
struct Replica {
  CpuBackend backend{CpuBackendConfig{1, DType::kF32}};
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss;

  absl::Status Build(const nn::ModelConfig& config) {
    ASSIGN_OR_RETURN(model, nn::BuildModel(config, backend));
    loss = std::make_unique<nn::SoftmaxCrossEntropy>(backend);
    return absl::OkStatus();
  }
  // Forward and loss on 4 constant images; returns dlogits.
  absl::StatusOr<Tensor> ForwardLoss() {
    Tensor x = backend.Zeros({4, 1, 8, 8});
    backend.Fill(x, 0.5f);
    ASSIGN_OR_RETURN(Tensor logits, model->Forward(x, true));
    RETURN_IF_ERROR(loss->Forward(logits, Tensor::FromInts({4}, {1, 2, 3, 4}), true).status());
    return loss->Backward();
  }
};

TEST(DataParallelApiTest, BucketsHoldTheParametersInReverseOrderAndReadyWhenFinal) {
  Replica replica;
  ASSERT_TRUE(replica.Build(testing::SmallMlp()).ok());
  auto world = MakeWorld(1);
  std::unique_ptr<dist::InProcessGroup> group = world->Group(0);
  DataParallelOptions options;
  options.bucket_bytes = 1024;
  absl::StatusOr<std::unique_ptr<DataParallel>> dp = DataParallel::Create(*replica.model, *group, options);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ParameterList params = replica.model->Parameters();
  std::vector<Parameter*> order;
  int previous_ready = replica.model->num_blocks();
  for (size_t b = 0; b < (*dp)->bucket_plans().size(); ++b) {
    const BucketPlan& plan = (*dp)->bucket_plans()[b];
    int64_t numel = 0;
    for (const BucketEntry& e : plan.entries) {
      EXPECT_EQ(e.offset, numel);
      numel += e.param->value.numel();
      order.push_back(e.param);
    }
    EXPECT_EQ(plan.numel, numel);
    // Closed as soon as it reaches the cap: all but the last reach it, and
    // without its last parameter none would.
    if (b + 1 < (*dp)->bucket_plans().size()) {
      EXPECT_GE(numel * 4, 1024) << "bucket " << b;
      EXPECT_LT((numel - plan.entries.back().param->value.numel()) * 4, 1024) << "bucket " << b;
    }
    EXPECT_LE(plan.ready_block, previous_ready);
    previous_ready = plan.ready_block;
  }
  std::reverse(order.begin(), order.end());
  EXPECT_EQ(order, params);
  // The MLP's blocks: [Linear 64->128], [Linear 128->64], [Linear 64->10]; the
  // first bucket holds the output layer, final after the last block.
  EXPECT_EQ((*dp)->bucket_plans().front().ready_block, 2);
  EXPECT_EQ((*dp)->bucket_plans().back().ready_block, 0);

  // A pipeline stage's replica covers its blocks only.
  options.begin_block = 1;
  dp = DataParallel::Create(*replica.model, *group, options);
  ASSERT_TRUE(dp.ok());
  int64_t covered = 0;
  for (const BucketPlan& plan : (*dp)->bucket_plans()) covered += plan.numel;
  int64_t expected = 0;
  for (Parameter* p : replica.model->Parameters(1)) expected += p->value.numel();
  EXPECT_EQ(covered, expected);
}

TEST(DataParallelApiTest, CreateRejectsBadOptions) {
  Replica replica;
  ASSERT_TRUE(replica.Build(testing::SmallMlp()).ok());
  auto world = MakeWorld(1);
  std::unique_ptr<dist::InProcessGroup> group = world->Group(0);
  DataParallelOptions options;
  options.bucket_bytes = 1000;
  absl::StatusOr<std::unique_ptr<DataParallel>> dp = DataParallel::Create(*replica.model, *group, options);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(dp.status().message(), "bucket_bytes")) << dp.status();
  options.bucket_bytes = 1024;
  options.end_block = 9;
  dp = DataParallel::Create(*replica.model, *group, options);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(dp.status().message(), "block range")) << dp.status();
}

TEST(DataParallelApiTest, BroadcastCopiesParametersAndBuffersFromRoot) {
  auto world = MakeWorld(3);
  std::vector<std::vector<std::vector<float>>> state(3);
  std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    Replica replica;
    nn::ModelConfig config = testing::SmallCnn(0);
    config.seed += group.rank();  // different weights on every rank
    RETURN_IF_ERROR(replica.Build(config));
    for (Buffer* b : replica.model->Buffers()) replica.backend.Fill(b->value, 10.0f * group.rank() + 1);
    DataParallelOptions options;
    options.bucket_bytes = 1024;  // several messages
    ASSIGN_OR_RETURN(auto dp, DataParallel::Create(*replica.model, group, options));
    RETURN_IF_ERROR(dp->BroadcastParameters(/*root=*/1));
    for (Parameter* p : replica.model->Parameters()) state[group.rank()].push_back(p->value.ToVector());
    for (Buffer* b : replica.model->Buffers()) state[group.rank()].push_back(b->value.ToVector());
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(state[0], state[1]);
  EXPECT_EQ(state[2], state[1]);
  EXPECT_EQ(state[0].back(), std::vector<float>{11.0f});  // num_batches_tracked of rank 1
}

TEST(DataParallelApiTest, StepProtocolIsEnforced) {
  Replica replica;
  ASSERT_TRUE(replica.Build(testing::SmallMlp()).ok());
  auto world = MakeWorld(1);
  std::unique_ptr<dist::InProcessGroup> group = world->Group(0);
  absl::StatusOr<std::unique_ptr<DataParallel>> dp = DataParallel::Create(*replica.model, *group, {});
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ((*dp)->FinishGradients().code(), absl::StatusCode::kFailedPrecondition);

  // A non-synchronising Backward reduces nothing and needs no FinishGradients.
  absl::StatusOr<Tensor> dl = replica.ForwardLoss();
  ASSERT_TRUE(dl.ok());
  ASSERT_TRUE((*dp)->Backward(*dl, /*sync=*/false).ok());
  EXPECT_EQ((*dp)->FinishGradients().code(), absl::StatusCode::kFailedPrecondition);

  dl = replica.ForwardLoss();
  ASSERT_TRUE(dl.ok());
  ASSERT_TRUE((*dp)->Backward(*dl).ok());
  dl = replica.ForwardLoss();
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ((*dp)->Backward(*dl).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*dp)->FinishGradients().ok());
  // A block's error comes back from Backward (no forward cache for micro-batch 5).
  EXPECT_EQ((*dp)->Backward(*dl, true, 5).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*dp)->FinishGradients().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DataParallelApiTest, ReportsCommunicationPerStep) {
  for (bool overlap : {true, false}) {
    auto world = MakeWorld(2);
    std::vector<CommStats> stats(2);
    std::vector<int64_t> expected_bytes(2);
    std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
      Replica replica;
      RETURN_IF_ERROR(replica.Build(testing::SmallMlp()));
      DataParallelOptions options;
      options.bucket_bytes = 4096;
      options.overlap = overlap;
      options.compression = GradCompression::kBf16;
      ASSIGN_OR_RETURN(auto dp, DataParallel::Create(*replica.model, group, options));
      ASSIGN_OR_RETURN(Tensor dl, replica.ForwardLoss());
      RETURN_IF_ERROR(dp->Backward(dl).status());
      RETURN_IF_ERROR(dp->FinishGradients());
      stats[group.rank()] = dp->last_stats();
      expected_bytes[group.rank()] = replica.model->NumParameters() * 2;
      return static_cast<int>(dp->bucket_plans().size()) == dp->last_stats().buckets
                 ? absl::OkStatus()
                 : absl::InternalError("bucket count");
    });
    for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < 2; ++r) {
      EXPECT_GT(stats[r].buckets, 1);
      EXPECT_EQ(stats[r].bytes, expected_bytes[r]);
      EXPECT_GT(stats[r].comm_seconds, 0.0);
      EXPECT_GE(stats[r].wait_seconds, 0.0);
      EXPECT_GE(stats[r].overlap_fraction, 0.0);
      EXPECT_LE(stats[r].overlap_fraction, 1.0);
      if (!overlap) EXPECT_EQ(stats[r].overlap_fraction, 0.0);
    }
  }
}

// Rank 1 dies after the broadcast. Rank 0's buckets fail at once
// (UNAVAILABLE, not the 30 s deadline), FinishGradients says so, and the next
// step fails too (the group is broken) instead of hanging.
TEST(DataParallelApiTest, DeadPeerMakesFinishGradientsFail) {
  auto world = MakeWorld(2, absl::Seconds(30));
  const auto start = std::chrono::steady_clock::now();
  absl::Status finish, second;
  std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    Replica replica;
    RETURN_IF_ERROR(replica.Build(testing::SmallMlp()));
    DataParallelOptions options;
    options.bucket_bytes = 1024;
    ASSIGN_OR_RETURN(auto dp, DataParallel::Create(*replica.model, group, options));
    RETURN_IF_ERROR(dp->BroadcastParameters());
    if (group.rank() == 1) {
      world->Kill(1);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Tensor dl, replica.ForwardLoss());
    RETURN_IF_ERROR(dp->Backward(dl).status());
    finish = dp->FinishGradients();
    ASSIGN_OR_RETURN(dl, replica.ForwardLoss());
    RETURN_IF_ERROR(dp->Backward(dl).status());
    second = dp->FinishGradients();
    return absl::OkStatus();
  });
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(finish.code(), absl::StatusCode::kUnavailable) << finish;
  EXPECT_TRUE(absl::StrContains(finish.message(), "allreduce")) << finish;
  EXPECT_EQ(second.code(), absl::StatusCode::kAborted) << second;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Rank 1 never joins the allreduce: rank 0 gets DEADLINE_EXCEEDED after the
// group's (short) timeout.
TEST(DataParallelApiTest, AbsentPeerTimesOut) {
  auto world = MakeWorld(2, absl::Milliseconds(300));
  absl::Status finish;
  std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    Replica replica;
    RETURN_IF_ERROR(replica.Build(testing::SmallMlp()));
    ASSIGN_OR_RETURN(auto dp, DataParallel::Create(*replica.model, group, {}));
    RETURN_IF_ERROR(dp->BroadcastParameters());
    if (group.rank() == 1) return absl::OkStatus();
    ASSIGN_OR_RETURN(Tensor dl, replica.ForwardLoss());
    RETURN_IF_ERROR(dp->Backward(dl).status());
    finish = dp->FinishGradients();
    return absl::OkStatus();
  });
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(finish.code(), absl::StatusCode::kDeadlineExceeded) << finish;
}

}  // namespace
}  // namespace ringmaster::engine::parallel
