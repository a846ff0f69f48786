// The NCCL group's type mapping; no device needed. (Its argument checks are
// ProcessGroup's: process_group_test.)
#include "engine/dist/nccl_args.h"

#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

TEST(NcclArgsTest, ReductionsTakeFloatsAndMovesTakeIntsToo) {
  EXPECT_EQ(*NcclDataType(DType::kF32, true), ncclFloat32);
  EXPECT_EQ(*NcclDataType(DType::kF16, true), ncclFloat16);
  EXPECT_EQ(*NcclDataType(DType::kBF16, true), ncclBfloat16);
  EXPECT_EQ(*NcclDataType(DType::kI32, false), ncclInt32);
  absl::StatusOr<ncclDataType_t> i32 = NcclDataType(DType::kI32, true);
  EXPECT_EQ(i32.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(i32.status().message(), "cannot reduce a i32 tensor: reductions take f32, f16 or bf16");
}

TEST(NcclArgsTest, AverageIsNcclsOwn) {
  EXPECT_EQ(NcclRedOp(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(NcclRedOp(ReduceOp::kAvg), ncclAvg);
}

}  // namespace
}  // namespace ringmaster::engine::dist
