#ifndef RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_
#define RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_

// The checks NcclProcessGroup runs on its arguments before it enqueues
// anything, and the mapping of our dtypes and ops onto NCCL's. Pure functions
// (no CUDA calls), so they are tested without a device. Every error is
// INVALID_ARGUMENT and names the offending argument.

#include <nccl.h>

#include <vector>

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

// `tensor` is defined and lives on a CUDA device; `what` names it in errors.
absl::Status CheckCudaTensor(const Tensor& tensor, const char* what);
// input: size chunks of output.numel() elements, same dtype.
absl::Status CheckReduceScatter(const Tensor& input, const Tensor& output, int size);
// output: size chunks of input.numel() elements, same dtype.
absl::Status CheckAllGather(const Tensor& input, const Tensor& output, int size);
// 0 <= peer < size; `what` names the role ("root", "send destination").
absl::Status CheckPeer(int peer, int size, const char* what);
// Strictly increasing ranks of a group of `size`, non-empty.
absl::Status CheckSubGroupRanks(const std::vector<int>& ranks, int size);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_ARGS_H_
