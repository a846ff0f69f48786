#ifndef RINGMASTER_ENGINE_PARALLEL_PIPELINE_P2P_H_
#define RINGMASTER_ENGINE_PARALLEL_PIPELINE_P2P_H_

// The point-to-point messages between neighbouring pipeline stages.
//
// Activations carry their shape: the receiving stage cannot derive it (it
// depends on the sender's blocks and the micro-batch size), so each activation
// is two messages, a header then the payload:
//   header: i32 [8] = {dtype, rank, d0, ..., d5} (unused dims 0), tag 3i;
//   payload: the activation, tag 3i + 1.
// Gradients need no header: dL/d(output of stage s) has the shape and dtype
// of the activation stage s sent for that micro-batch, which it remembers; tag
// 3i + 2. (i: the micro-batch.) The header is sent per activation, not cached
// per step: one small message more per micro-batch, in exchange for no state
// that could go stale (e.g. a shorter last batch or another sequence length).
// Tags are reused every step; messages of a step cannot overtake those of the
// previous one because a step ends only after every message was received.
//
// Header and payload are device tensors of `backend` (what the group serves).
// Stateless functions; thread-safe as the group they use (one thread per group).

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::parallel {

constexpr int kMaxActivationRank = 6;

int ActivationHeaderTag(int micro_batch);
int ActivationTag(int micro_batch);
int GradTag(int micro_batch);

// INVALID_ARGUMENT for an activation of rank > kMaxActivationRank or an
// undefined tensor; otherwise the group's errors.
absl::Status SendActivation(dist::ProcessGroup& group, Backend& backend, const Tensor& activation, int dst,
                            int micro_batch);
// INTERNAL for a malformed header (a peer speaking another protocol).
absl::StatusOr<Tensor> RecvActivation(dist::ProcessGroup& group, Backend& backend, int src, int micro_batch);

absl::Status SendGrad(dist::ProcessGroup& group, const Tensor& grad, int dst, int micro_batch);
// Receives into `grad` (allocated by the caller with the activation's shape and dtype).
absl::Status RecvGrad(dist::ProcessGroup& group, const Tensor& grad, int src, int micro_batch);

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_PIPELINE_P2P_H_
