#ifndef RINGMASTER_ENGINE_DIST_COLLECTIVE_UTIL_H_
#define RINGMASTER_ENGINE_DIST_COLLECTIVE_UTIL_H_

// Helpers shared by the host process groups (in-process and Gloo): their
// placement check and the f32 staging of f16/bf16 reductions (reduce in f32,
// round back once at the end). The other argument checks are ProcessGroup's.
// Stateless; all functions are thread-safe.

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::dist {

// What the host groups' ProcessGroup::CheckPlacement answers: OK for host
// memory, INVALID_ARGUMENT naming `what` otherwise.
absl::Status CheckHostPlacement(const Tensor& tensor, absl::string_view what);

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
