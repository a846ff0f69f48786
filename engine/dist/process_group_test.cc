// ProcessGroup's half of the contract, the same for every transport: a
// transport sees only usable groups and valid arguments; errors name the
// operation, group and rank, and break the group once.
#include "engine/dist/process_group.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A CUDA-labelled tensor over host memory nothing reads.
Tensor CudaLabelled() {
  static float storage[2];
  return Tensor::Wrap(storage, {2}, DType::kF32, Device::kCuda);
}

// A transport that records what reaches it and answers `next_error`.
class RecordingGroup : public ProcessGroup {
 public:
  RecordingGroup(int rank, int size) : ProcessGroup(absl::Seconds(1)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "recording"; }
  std::string name() const override { return GroupName("dp", size_); }

  std::vector<std::string> calls;
  int broken_calls = 0;
  absl::Status next_error;
  bool host_memory = true;  // false: accepts only CUDA-labelled tensors

 protected:
  absl::Status DoAllReduce(const Tensor&, ReduceOp) override { return Record("allreduce"); }
  absl::Status DoReduceScatter(const Tensor&, const Tensor&, ReduceOp) override { return Record("reduce_scatter"); }
  absl::Status DoAllGather(const Tensor&, const Tensor&) override { return Record("allgather"); }
  absl::Status DoBroadcast(const Tensor&, int root) override { return Record("broadcast " + std::to_string(root)); }
  absl::Status DoSend(const Tensor&, int dst, int) override { return Record("send " + std::to_string(dst)); }
  absl::Status DoRecv(const Tensor&, int src, int) override { return Record("recv " + std::to_string(src)); }
  absl::Status DoBarrier() override { return Record("barrier"); }
  absl::StatusOr<std::unique_ptr<ProcessGroup>> DoNewGroup(const std::vector<int>&, int sub_rank,
                                                           const std::string& name) override {
    absl::Status recorded = Record("new_group " + name + " as " + std::to_string(sub_rank));
    if (!recorded.ok()) return recorded;
    if (sub_rank < 0) return std::unique_ptr<ProcessGroup>();
    return std::unique_ptr<ProcessGroup>(new RecordingGroup(sub_rank, 1));
  }
  absl::Status CheckPlacement(const Tensor& tensor, absl::string_view what) const override {
    const Device wanted = host_memory ? Device::kCpu : Device::kCuda;
    if (tensor.device() == wanted) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(what, " tensor is in the wrong place"));
  }
  void OnBroken() override { ++broken_calls; }

 private:
  absl::Status Record(std::string call) {
    calls.push_back(std::move(call));
    return std::exchange(next_error, absl::OkStatus());
  }

  int rank_;
  int size_;
};

TEST(ProcessGroupTest, ValidCallsReachTheTransport) {
  RecordingGroup group(1, 4);
  Tensor whole = Tensor::Zeros({8});
  Tensor chunk = Tensor::Zeros({2});
  EXPECT_TRUE(group.AllReduce(whole, ReduceOp::kSum).ok());
  EXPECT_TRUE(group.ReduceScatter(whole, chunk, ReduceOp::kAvg).ok());
  EXPECT_TRUE(group.AllGather(chunk, whole).ok());
  EXPECT_TRUE(group.Broadcast(Tensor::Zeros({3}, DType::kI32), 1).ok()) << "any dtype moves; the root may be me";
  EXPECT_TRUE(group.Send(chunk, 3, 0).ok());
  EXPECT_TRUE(group.Recv(chunk, 0, 0).ok());
  EXPECT_TRUE(group.Barrier().ok());
  EXPECT_THAT(group.calls, ElementsAre("allreduce", "reduce_scatter", "allgather", "broadcast 1", "send 3",
                                       "recv 0", "barrier"));
  EXPECT_FALSE(group.broken());
}

TEST(ProcessGroupTest, BadArgumentsNeverReachTheTransportAndBreakTheGroup) {
  struct Case {
    std::string what;
    std::function<absl::Status(ProcessGroup&)> call;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"undefined", [](ProcessGroup& g) { return g.AllReduce(Tensor(), ReduceOp::kSum); },
       "allreduce on dp[4 ranks] rank 1: the tensor is undefined"},
      {"integers reduced", [](ProcessGroup& g) { return g.AllReduce(Tensor::Zeros({2}, DType::kI32), ReduceOp::kSum); },
       "allreduce on dp[4 ranks] rank 1: the tensor has dtype i32; reductions take f32, f16 or bf16"},
      {"chunks", [](ProcessGroup& g) { return g.ReduceScatter(Tensor::Zeros({7}), Tensor::Zeros({2}), ReduceOp::kSum); },
       "reduce_scatter on dp[4 ranks] rank 1: expected 4 x 2 = 8 elements in the 4-chunk tensor [7], got 7"},
      {"dtypes", [](ProcessGroup& g) { return g.AllGather(Tensor::Zeros({2}, DType::kF16), Tensor::Zeros({8})); },
       "allgather on dp[4 ranks] rank 1: dtypes differ: f32 vs f16"},
      {"root", [](ProcessGroup& g) { return g.Broadcast(Tensor::Zeros({2}), 4); },
       "broadcast on dp[4 ranks] rank 1: root 4 is not a rank of the group (0..3)"},
      {"self", [](ProcessGroup& g) { return g.Send(Tensor::Zeros({2}), 1, 0); },
       "send on dp[4 ranks] rank 1: destination 1 is this rank itself"},
      {"negative source", [](ProcessGroup& g) { return g.Recv(Tensor::Zeros({2}), -1, 0); },
       "recv on dp[4 ranks] rank 1: source -1 is not a rank of the group (0..3)"},
      {"placement", [](ProcessGroup& g) { return g.Send(CudaLabelled(), 2, 0); },
       "send on dp[4 ranks] rank 1: the tensor is in the wrong place"},
      {"sub-group order", [](ProcessGroup& g) { return g.NewGroup({2, 1}, "pp").status(); },
       "new_group on dp[4 ranks] rank 1: ranks [2, 1] must be strictly increasing ranks of the group"},
      {"empty sub-group", [](ProcessGroup& g) { return g.NewGroup({}, "pp").status(); },
       "new_group on dp[4 ranks] rank 1: empty rank list"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RecordingGroup group(1, 4);
    absl::Status status = c.call(group);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), c.message);
    EXPECT_THAT(group.calls, IsEmpty());
    EXPECT_TRUE(group.broken());
    EXPECT_EQ(group.broken_calls, 1);
    absl::Status after = group.Barrier();
    EXPECT_EQ(after.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(after.message(), "barrier on dp[4 ranks] rank 1: the group is broken by an earlier error: " + c.message);
    EXPECT_THAT(group.calls, IsEmpty()) << "a broken group calls no transport";
    EXPECT_EQ(group.broken_calls, 1) << "OnBroken runs once";
  }
}

TEST(ProcessGroupTest, TransportErrorsAreNamedAndBreakTheGroupOnce) {
  RecordingGroup group(0, 2);
  group.next_error = absl::UnavailableError("peer 1 reset the connection");
  absl::Status status = group.AllReduce(Tensor::Zeros({2}), ReduceOp::kSum);
  EXPECT_EQ(status, absl::UnavailableError("allreduce on dp[2 ranks] rank 0: peer 1 reset the connection"));
  EXPECT_EQ(group.broken_calls, 1);
  EXPECT_EQ(group.Send(Tensor::Zeros({2}), 1, 0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(group.NewGroup({0}, "pp").status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(group.calls, ElementsAre("allreduce"));
  EXPECT_EQ(group.broken_calls, 1);
}

TEST(ProcessGroupTest, NewGroupTellsTheTransportThisRanksPlaceOrNone) {
  RecordingGroup group(2, 4);
  absl::StatusOr<std::unique_ptr<ProcessGroup>> member = group.NewGroup({0, 2, 3}, "pp");
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_NE(*member, nullptr);
  absl::StatusOr<std::unique_ptr<ProcessGroup>> outsider = group.NewGroup({0, 1}, "tp");
  ASSERT_TRUE(outsider.ok()) << outsider.status();
  EXPECT_EQ(*outsider, nullptr);
  EXPECT_THAT(group.calls, ElementsAre("new_group pp as 1", "new_group tp as -1"));
}

TEST(ProcessGroupTest, ADeviceTransportRejectsHostTensorsThroughTheSameChecks) {
  RecordingGroup group(0, 1);
  group.host_memory = false;
  absl::Status status = group.AllReduce(Tensor::Zeros({2}), ReduceOp::kSum);
  EXPECT_EQ(status, absl::InvalidArgumentError("allreduce on dp[1 rank] rank 0: the tensor is in the wrong place"));
}

}  // namespace
}  // namespace ringmaster::engine::dist
