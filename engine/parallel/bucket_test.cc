// The bucket plan's grouping, GradBucket's flatten/unflatten (with and
// without compression) and BucketReducer's ordering and error handling.

#include "engine/parallel/bucket.h"

#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/parallel/bucket_reducer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(BucketTest, GroupBySizeClosesARunOnceItReachesTheCap) {
  // 4-byte elements, cap 40 bytes = 10 elements.
  EXPECT_EQ(GroupBySize({4, 6, 1, 20, 3, 3}, 40), (Groups{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(GroupBySize({11, 0, 2}, 40), (Groups{{0}, {1, 2}}));
  EXPECT_EQ(GroupBySize({}, 40), Groups{});
}

TEST(BucketTest, CompressionNamesRoundTrip) {
  for (GradCompression c : {GradCompression::kNone, GradCompression::kFp16, GradCompression::kBf16}) {
    absl::StatusOr<GradCompression> parsed = ParseGradCompression(GradCompressionName(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(ParseGradCompression("int8").status().code(), absl::StatusCode::kInvalidArgument);
}

class GradBucketTest : public ::testing::Test {
 protected:
  Parameter MakeParam(const std::string& name, const std::vector<float>& grad) {
    Parameter p;
    p.name = name;
    p.value = Tensor::Zeros({static_cast<int64_t>(grad.size())});
    p.grad = Tensor::FromVector({static_cast<int64_t>(grad.size())}, grad);
    return p;
  }
  CpuBackend backend_{CpuBackendConfig{1, DType::kF32}};
};

TEST_F(GradBucketTest, PlanIsReverseOrderWithTheEarliestReadyBlock) {
  Parameter a = MakeParam("a", std::vector<float>(300, 1.0f));  // 1200 bytes: a bucket of its own
  Parameter b = MakeParam("b", std::vector<float>(10, 1.0f));
  Parameter c = MakeParam("c", std::vector<float>(10, 1.0f));
  absl::StatusOr<std::vector<BucketPlan>> plans = PlanBuckets({&a, &b, &c}, {0, 1, 1}, 1024);
  ASSERT_TRUE(plans.ok());
  ASSERT_EQ(plans->size(), 1u);  // c, b, a: 80 bytes, then 1280 >= 1024
  ASSERT_EQ((*plans)[0].entries.size(), 3u);
  EXPECT_EQ((*plans)[0].entries[0].param, &c);
  EXPECT_EQ((*plans)[0].entries[2].param, &a);
  EXPECT_EQ((*plans)[0].entries[2].offset, 20);
  EXPECT_EQ((*plans)[0].ready_block, 0);
  EXPECT_EQ(PlanBuckets({&a}, {0}, 1023).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanBuckets({&a}, {}, 4096).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradBucketTest, FlattenAndUnflattenRoundTrip) {
  Parameter a = MakeParam("a", {1.0f, 2.0f, 3.0f});
  Parameter b = MakeParam("b", {1.0f / 3.0f, -5.0f});
  absl::StatusOr<std::vector<BucketPlan>> plans = PlanBuckets({&a, &b}, {0, 0}, 1024);
  ASSERT_TRUE(plans.ok());
  GradBucket exact(backend_, (*plans)[0], GradCompression::kNone);
  exact.Flatten();
  EXPECT_EQ(exact.flat().ToVector(), (std::vector<float>{1.0f / 3.0f, -5.0f, 1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(exact.wire_bytes(), 20u);
  for (float* g : {a.grad.f32(), b.grad.f32()}) g[0] = 0.0f;
  exact.Unflatten();
  EXPECT_EQ(a.grad.ToVector(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(b.grad.ToVector(), (std::vector<float>{1.0f / 3.0f, -5.0f}));

  GradBucket half(backend_, (*plans)[0], GradCompression::kBf16);
  EXPECT_EQ(half.flat().dtype(), DType::kBF16);
  EXPECT_EQ(half.wire_bytes(), 10u);
  half.Flatten();
  half.Unflatten();
  EXPECT_EQ(b.grad.ToVector(), (std::vector<float>{RoundTo(DType::kBF16, 1.0f / 3.0f), -5.0f}));
  EXPECT_NE(b.grad.ToVector()[0], 1.0f / 3.0f);
}

// Two ranks each submit three tensors on the communication thread: the
// averages come back in place, in order, with one timing per bucket.
TEST(BucketReducerTest, AveragesInSubmissionOrder) {
  for (bool threaded : {true, false}) {
    auto world = dist::InProcessWorld::Create(2, {"dp", absl::Seconds(30)});
    std::vector<std::vector<std::vector<float>>> out(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
        BucketReducer reducer(*group, *Clock::Real(), threaded);
        std::vector<Tensor> tensors;
        for (int i = 0; i < 3; ++i) {
          tensors.push_back(Tensor::FromVector({i + 1}, std::vector<float>(i + 1, 10.0f * i + 2.0f * r)));
          reducer.Submit(tensors.back());
        }
        std::vector<BucketReducer::Timing> timings;
        EXPECT_TRUE(reducer.Wait(&timings).ok());
        EXPECT_EQ(timings.size(), 3u);
        for (const Tensor& t : tensors) out[r].push_back(t.ToVector());
      });
    }
    for (auto& t : threads) t.join();
    const std::vector<std::vector<float>> expected = {{1.0f}, {11.0f, 11.0f}, {21.0f, 21.0f, 21.0f}};
    EXPECT_EQ(out[0], expected);
    EXPECT_EQ(out[1], expected);
  }
}

// After the first failure the later buckets are not sent; Wait reports the
// failure, and the next round starts clean (and fails: the group is broken).
TEST(BucketReducerTest, FirstErrorStopsTheRound) {
  auto world = dist::InProcessWorld::Create(2, {"dp", absl::Seconds(30)});
  std::unique_ptr<dist::InProcessGroup> group = world->Group(0);
  world->Kill(1);
  BucketReducer reducer(*group, *Clock::Real(), /*threaded=*/true);
  for (int i = 0; i < 3; ++i) reducer.Submit(Tensor::Zeros({4}));
  std::vector<BucketReducer::Timing> timings;
  absl::Status status = reducer.Wait(&timings);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(timings.empty());
  reducer.Submit(Tensor::Zeros({4}));
  EXPECT_EQ(reducer.Wait(&timings).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace ringmaster::engine::parallel
