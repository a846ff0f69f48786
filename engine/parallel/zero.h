#ifndef RINGMASTER_ENGINE_PARALLEL_ZERO_H_
#define RINGMASTER_ENGINE_PARALLEL_ZERO_H_

// ZeroOptimizer: ZeRO stage 1 — the optimizer state sharded over a
// data-parallel group, instead of replicated.
//
// Layout: the parameters (in list order) are concatenated element by element
// into one flat vector of T elements, padded with zeros to N * S, S =
// ceil(T / N). Rank r owns the contiguous shard [r S, min((r + 1) S, T)): a
// shard may start and end inside a parameter. Its Optimizer is created with a
// ShardSpec covering exactly those elements, so the state (momentum, Adam
// moments) takes ~1/N of the memory of an unsharded one.
//
// A step, after each rank's backward has accumulated its local grads (no
// DataParallel reduction; broadcast the initial weights with
// BroadcastModelState):
//
//   RETURN_IF_ERROR(zero->ReduceScatterGradients());   // my shard of grads = average
//   ASSIGN_OR_RETURN(double sumsq, zero->GradSumSquares());  // global, for clipping
//   const double norm = grad_scale * std::sqrt(sumsq);       // inf/NaN: overflow, skip
//   if (!scaler.Update(!std::isfinite(norm)))
//     RETURN_IF_ERROR(zero->Step(lr, grad_scale * ClipCoefficient(norm, max_norm)));
//   zero->ZeroGrad();
//
// ReduceScatterGradients flattens every grad and reduce-scatters it (kAvg),
// then writes the averaged shard over the same elements of the grads — the
// grads OUTSIDE the shard keep the local values and must not be read. Step
// updates the shard of the parameters and all-gathers the parameters, so every
// rank ends with the full, identical weights. LARS/LAMB norms: the optimizer's
// per-parameter partial sums are all-gathered (as raw fp64) and summed in rank
// order, the same on every rank.
//
// Parameters and grads are f32 tensors of `backend`'s device (host, or CUDA
// with an NCCL group: every copy goes through the backend, every transfer
// through the group, nothing reads device memory from the host except
// GradSumSquares, which copies this rank's shard back). On CUDA the trainer
// takes the norm and the overflow flag on the device instead (shard_grad(),
// device_loss_scaler.h); the CUDA optimizer has no sharded LARS/LAMB. Errors of
// the group come back as its Status (the group is then broken). Not
// thread-safe: the training thread calls it, and it uses the group from that
// thread only.

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "engine/core/backend.h"
#include "engine/dist/process_group.h"
#include "engine/optim/optimizer.h"

namespace ringmaster::engine::parallel {

class ZeroOptimizer {
 public:
  // params, group, backend (and clock) are not owned and must outlive it;
  // every rank passes the same parameter list (names, shapes, order) and
  // config. Errors of Optimizer::Create are returned as they are.
  static absl::StatusOr<std::unique_ptr<ZeroOptimizer>> Create(const optim::OptimizerConfig& config,
                                                               const ParameterList& params, dist::ProcessGroup& group,
                                                               Backend& backend, Clock* clock = nullptr);

  ZeroOptimizer(const ZeroOptimizer&) = delete;  // the optimizer's norm reducer points at it
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // The grads' elements of this rank's shard <- their average over the group.
  absl::Status ReduceScatterGradients();
  // Sum over ALL elements of the averaged grads of grad^2, as stored (fp64;
  // the shards' sums all-gathered and added in rank order, so every rank gets
  // the same value). Inf or NaN when any grad is. After ReduceScatterGradients.
  absl::StatusOr<double> GradSumSquares();
  // Optimizer step of this rank's shard, then the parameters all-gathered.
  // FAILED_PRECONDITION unless ReduceScatterGradients ran since the last
  // ZeroGrad; the Optimizer's and the group's errors as they are.
  absl::Status Step(float lr, float grad_scale);
  // Zeroes every grad (whole tensors).
  void ZeroGrad();

  // Optimizer state bytes held by this rank (~1/N of an unsharded optimizer's).
  size_t StateBytes() const { return optimizer_->StateBytes(); }
  optim::Optimizer& optimizer() { return *optimizer_; }
  // The shard: flat elements [shard_begin, shard_end) of total_elements; and
  // per parameter, the range of its elements this rank owns.
  int64_t total_elements() const { return total_; }
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_end() const { return shard_end_; }
  const std::vector<optim::ParamRange>& ranges() const { return ranges_; }
  // This rank's averaged grads, contiguous (shard_end - shard_begin elements
  // of backend's device): valid from ReduceScatterGradients until Step, which
  // reuses the buffer for the values. The same storage for the object's life.
  Tensor shard_grad() const { return shard_.Slice1D(0, shard_end_ - shard_begin_); }
  // Seconds in collectives during the last ReduceScatterGradients .. Step.
  double last_comm_seconds() const { return comm_seconds_; }

 private:
  ZeroOptimizer(const ParameterList& params, dist::ProcessGroup& group, Backend& backend, Clock& clock);

  // Copies shard-relative elements between the params (value or grad) and shard_.
  void CopyShard(bool to_params, bool grads);
  // Sums `partial` over the group (all-gather of fp64, summed in rank order).
  absl::Status SumOverRanks(std::vector<double>& partial);
  // Runs `op` and adds its duration to comm_seconds_.
  template <typename Op>
  absl::Status Timed(Op op);

  const ParameterList params_;
  dist::ProcessGroup& group_;
  Backend& backend_;
  Clock& clock_;
  std::vector<int64_t> offsets_;  // each parameter's first element in the flat vector
  int64_t total_ = 0, shard_size_ = 0, shard_begin_ = 0, shard_end_ = 0;
  std::vector<optim::ParamRange> ranges_;
  Tensor flat_;   // [N * S]: the flattened grads, then the gathered values
  Tensor shard_;  // [S]: this rank's averaged grads, then its updated values
  std::unique_ptr<optim::Optimizer> optimizer_;
  bool reduced_ = false;
  double comm_seconds_ = 0.0;
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_ZERO_H_
