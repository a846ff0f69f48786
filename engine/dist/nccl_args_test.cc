// Argument checks and type mapping of the NCCL group; no device needed: CUDA
// tensors are wrapped around a pointer nothing dereferences.
#include "engine/dist/nccl_args.h"

#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

// A CUDA-labelled tensor over memory nobody touches in these tests.
Tensor FakeCuda(const Shape& shape, DType dtype = DType::kF32) {
  static char storage[1];
  return Tensor::Wrap(storage, shape, dtype, Device::kCuda);
}

TEST(NcclArgsTest, ReductionsTakeFloatsAndMovesTakeIntsToo) {
  EXPECT_EQ(*NcclDataType(DType::kF32, true), ncclFloat32);
  EXPECT_EQ(*NcclDataType(DType::kF16, true), ncclFloat16);
  EXPECT_EQ(*NcclDataType(DType::kBF16, true), ncclBfloat16);
  EXPECT_EQ(*NcclDataType(DType::kI32, false), ncclInt32);
  absl::StatusOr<ncclDataType_t> i32 = NcclDataType(DType::kI32, true);
  EXPECT_EQ(i32.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(i32.status().message(), "cannot reduce a i32 tensor: reductions take f32, f16 or bf16");
  EXPECT_EQ(NcclRedOp(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(NcclRedOp(ReduceOp::kAvg), ncclAvg);
}

TEST(NcclArgsTest, TensorsMustBeDefinedAndOnCuda) {
  EXPECT_TRUE(CheckCudaTensor(FakeCuda({4}), "tensor").ok());
  absl::Status undefined = CheckCudaTensor(Tensor(), "input");
  EXPECT_EQ(undefined.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(undefined.message(), "input is undefined");
  absl::Status host = CheckCudaTensor(Tensor::Zeros({4}), "tensor");
  EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host.message(), "tensor is a cpu tensor; the NCCL group takes CUDA tensors");
}

TEST(NcclArgsTest, ReduceScatterInputHoldsOneChunkPerRank) {
  EXPECT_TRUE(CheckReduceScatter(FakeCuda({4, 3}), FakeCuda({3}), 4).ok());
  absl::Status wrong = CheckReduceScatter(FakeCuda({10}), FakeCuda({3}), 4);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(),
            "input [10] has 10 elements; it must hold 4 chunks of the output's [3] (12 elements)");
  absl::Status dtype = CheckReduceScatter(FakeCuda({12}, DType::kF16), FakeCuda({3}), 4);
  EXPECT_EQ(dtype.message(), "input is f16 but output is f32");
}

TEST(NcclArgsTest, AllGatherOutputHoldsOneChunkPerRank) {
  EXPECT_TRUE(CheckAllGather(FakeCuda({3}), FakeCuda({2, 3}), 2).ok());
  absl::Status wrong = CheckAllGather(FakeCuda({3}), FakeCuda({5}), 2);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(), "output [5] has 5 elements; it must hold 2 chunks of the input's [3] (6 elements)");
}

TEST(NcclArgsTest, PeersAreRanksOfTheGroup) {
  EXPECT_TRUE(CheckPeer(0, 2, "root").ok());
  EXPECT_TRUE(CheckPeer(1, 2, "root").ok());
  absl::Status bad = CheckPeer(2, 2, "send destination");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "send destination 2 is not a rank of a group of 2");
  EXPECT_EQ(CheckPeer(-1, 2, "root").code(), absl::StatusCode::kInvalidArgument);
}

TEST(NcclArgsTest, SubGroupRanksAreIncreasingAndInRange) {
  EXPECT_TRUE(CheckSubGroupRanks({0, 2, 3}, 4).ok());
  EXPECT_TRUE(CheckSubGroupRanks({1}, 4).ok());
  EXPECT_EQ(CheckSubGroupRanks({}, 4).message(), "a sub-group needs at least one rank");
  absl::Status unordered = CheckSubGroupRanks({2, 1}, 4);
  EXPECT_EQ(unordered.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unordered.message(), "sub-group ranks [2, 1] must be increasing ranks of a group of 4");
  EXPECT_EQ(CheckSubGroupRanks({0, 0}, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSubGroupRanks({0, 4}, 4).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::dist
