#ifndef RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_
#define RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_

// The mapping of our dtypes and reduce ops onto NCCL's. Pure functions (no
// CUDA calls), so they are tested without a device. (Argument checks are
// ProcessGroup's, shared by every transport.)

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::dist {

// f32/f16/bf16 -> ncclFloat32/ncclFloat16/ncclBfloat16 (reduced natively by
// NCCL); i32 -> ncclInt32 where `reduction` is false (moved, never reduced).
absl::StatusOr<ncclDataType_t> NcclDataType(DType dtype, bool reduction);
// kSum -> ncclSum, kAvg -> ncclAvg (NCCL divides by the group size).
ncclRedOp_t NcclRedOp(ReduceOp op);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_
