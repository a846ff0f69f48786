#ifndef RINGMASTER_ENGINE_DIST_COLLECTIVE_UTIL_H_
#define RINGMASTER_ENGINE_DIST_COLLECTIVE_UTIL_H_

// Helpers shared by the host process groups (in-process and Gloo): argument
// checks that produce the contract's INVALID_ARGUMENT messages, the error
// prefix "allreduce on dp[4 ranks] rank 1: ", and the f32 staging of f16/bf16
// reductions (reduce in f32, round back once at the end). Stateless; all
// functions are thread-safe.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::dist {

// "dp[4 ranks]" (the name a ProcessGroup reports) from a base name and a size.
std::string GroupName(absl::string_view base, int size);

// "allreduce on dp[4 ranks] rank 1: " + detail.
std::string OpContext(absl::string_view op, const ProcessGroup& group);
absl::Status OpError(absl::StatusCode code, absl::string_view op, const ProcessGroup& group,
                     absl::string_view detail);

// INVALID_ARGUMENT unless `tensor` is defined and lives on the host.
absl::Status CheckHostTensor(absl::string_view op, const ProcessGroup& group, const Tensor& tensor,
                             absl::string_view what);
// CheckHostTensor and a reducible dtype (f32, f16, bf16).
absl::Status CheckReducible(absl::string_view op, const ProcessGroup& group, const Tensor& tensor,
                            absl::string_view what);
// The shapes ReduceScatter and AllGather need: `whole` has size() chunks of
// `chunk`'s element count, both the same dtype.
absl::Status CheckChunked(absl::string_view op, const ProcessGroup& group, const Tensor& whole,
                          const Tensor& chunk);
// INVALID_ARGUMENT unless 0 <= rank < group.size(); `what` names the role ("root").
absl::Status CheckPeer(absl::string_view op, const ProcessGroup& group, int rank,
                       absl::string_view what);
// CheckPeer, and INVALID_ARGUMENT if `rank` is the caller's own (point to
// point needs another rank).
absl::Status CheckOtherRank(absl::string_view op, const ProcessGroup& group, int rank,
                            absl::string_view what);
// INVALID_ARGUMENT unless `ranks` is non-empty, strictly increasing and within
// the group (the caller need not be in it: then it is a non-member).
absl::Status CheckSubgroupRanks(const ProcessGroup& group, const std::vector<int>& ranks);

// Host f32 staging of a reducible tensor: `out` gets tensor's values as f32.
void CopyToF32(const Tensor& tensor, float* out);
// Writes f32 `values` into `tensor`, rounding once to its dtype.
void CopyFromF32(const float* values, const Tensor& tensor);
// out[i] = a[i] + b[i] for n floats.
void AddF32(float* out, const float* a, const float* b, size_t n);
// Divides n floats by `divisor` (ReduceOp::kAvg).
void DivideF32(float* values, size_t n, float divisor);

const char* ReduceOpName(ReduceOp op);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_COLLECTIVE_UTIL_H_
