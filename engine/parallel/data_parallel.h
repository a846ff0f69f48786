#ifndef RINGMASTER_ENGINE_PARALLEL_DATA_PARALLEL_H_
#define RINGMASTER_ENGINE_PARALLEL_DATA_PARALLEL_H_

// DataParallel: one rank's replica of a model (or of the block range a
// pipeline stage holds) in a data-parallel group. It broadcasts the initial
// state from a root, and averages the gradients over the group in buckets
// (bucket.h) while the backward pass is still running, like PyTorch DDP:
//
//   ASSIGN_OR_RETURN(auto dp, DataParallel::Create(model, dp_group, options));
//   RETURN_IF_ERROR(dp->BroadcastParameters());           // once, at the start
//   for each step:
//     for micro-step k of m:                              // gradient accumulation
//       forward, loss (grad_scale folded in: loss scale / m) ...
//       RETURN_IF_ERROR(dp->Backward(dlogits, /*sync=*/k == m - 1).status());
//     RETURN_IF_ERROR(dp->FinishGradients());             // grads = average over ranks
//     optimizer step, ZeroGrad ...
//
// Backward(dy, sync = true) runs the model's backward block by block from the
// last block; after each block, every bucket whose gradients are now final
// (BucketPlan::ready_block) is flattened (and compressed) and handed to the
// BucketReducer, which allreduces it on its communication thread (overlap) or
// at once (no overlap), in bucket order. FinishGradients waits for every
// bucket and copies the averages back over the parameters' grads. The result
// is the same, bit for bit, with or without overlap and for any timing.
// Backward(dy, sync = false) only accumulates into the local grads.
//
// Between a synchronising Backward and FinishGradients the communication
// thread owns the process group: the caller must not use the group (nor
// change the parameters' grads) until FinishGradients returns.
//
// Errors: a failing collective (dead peer, timeout: the group's deadline)
// comes back from FinishGradients / ReduceGradients as its Status; the grads
// are then undefined and the group broken (the trainer exits). A failing
// block backward is returned by Backward after the buckets already handed over
// have settled.
//
// Not thread-safe: one training thread calls it. It owns the communication
// thread (see BucketReducer for the handoff).

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "engine/dist/process_group.h"
#include "engine/nn/model.h"
#include "engine/parallel/bucket.h"
#include "engine/parallel/bucket_reducer.h"

namespace ringmaster::engine::parallel {

struct DataParallelOptions {
  // Bucket cap in bytes of fp32 gradient (25 MiB, PyTorch's default); at least
  // kMinBucketBytes.
  int64_t bucket_bytes = 25 * 1024 * 1024;
  GradCompression compression = GradCompression::kNone;
  // Reduce buckets on a communication thread while backward goes on (true),
  // or inline, between blocks (false).
  bool overlap = true;
  // The blocks this replica holds: [begin_block, end_block) of the model
  // (end_block = -1: to the last block). A pipeline stage passes its range.
  int begin_block = 0;
  int end_block = -1;
  // Times the communication; not owned. Clock::Real() when null.
  Clock* clock = nullptr;
};

// Communication of the last synchronised step (FinishGradients / ReduceGradients).
struct CommStats {
  int buckets = 0;
  int64_t bytes = 0;          // payload this rank allreduced (wire dtype)
  double comm_seconds = 0.0;  // sum over buckets of the allreduce time
  // Time FinishGradients blocked on communication: the exposed part with
  // overlap (without, the reductions ran inline in Backward: comm_seconds).
  double wait_seconds = 0.0;
  // Share of comm_seconds that ran while the backward pass was still running
  // (0 without overlap: inline reductions stop the backward).
  double overlap_fraction = 0.0;
};

// Broadcasts the model's parameters and buffers of blocks [begin, end) from
// `root` to every rank of `group`, coalesced into f32 messages of about
// bucket_bytes (tensors of other dtypes go one by one). Collective.
absl::Status BroadcastModelState(nn::Model& model, dist::ProcessGroup& group, int root, int begin = 0, int end = -1,
                                 int64_t bucket_bytes = 25 * 1024 * 1024);

class DataParallel {
 public:
  // model and group are not owned and must outlive the DataParallel; every
  // rank must pass the same model architecture and options. INVALID_ARGUMENT
  // for a bad block range or bucket_bytes.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(nn::Model& model, dist::ProcessGroup& group,
                                                              DataParallelOptions options);
  ~DataParallel();  // waits for buckets still in flight
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Parameters and buffers of the replica's blocks <- root's. Collective; call
  // before training (and after loading a checkpoint on root only).
  absl::Status BroadcastParameters(int root = 0);

  // Backward of blocks end-1 .. begin on dy (micro_batch: the forward's
  // cache slot); returns dL/d(input of the first block). sync: this is the
  // last micro-step of the optimizer step, so buckets are reduced as they
  // become ready; FinishGradients must follow. FAILED_PRECONDITION for a
  // second synchronising Backward before FinishGradients.
  absl::StatusOr<Tensor> Backward(const Tensor& dy, bool sync = true, int micro_batch = 0);
  // Waits for every bucket and writes the averaged gradients into the grads.
  // FAILED_PRECONDITION without a synchronising Backward before it.
  absl::Status FinishGradients();
  // For callers that ran the backward themselves (a pipeline schedule): hands
  // over every bucket not yet handed over, then FinishGradients.
  absl::Status ReduceGradients();

  const std::vector<BucketPlan>& bucket_plans() const { return plans_; }
  const CommStats& last_stats() const { return stats_; }
  const DataParallelOptions& options() const { return options_; }
  dist::ProcessGroup& group() { return group_; }

 private:
  DataParallel(nn::Model& model, dist::ProcessGroup& group, DataParallelOptions options, Clock& clock,
               std::vector<BucketPlan> plans);

  // Hands over buckets next_bucket_.. while their ready block is >= `block`.
  void LaunchReady(int block);
  void ComputeStats(const std::vector<BucketReducer::Timing>& timings, absl::Duration wait);

  nn::Model& model_;
  dist::ProcessGroup& group_;
  const DataParallelOptions options_;  // end_block resolved
  Clock& clock_;
  const std::vector<BucketPlan> plans_;
  std::vector<std::unique_ptr<GradBucket>> buckets_;
  BucketReducer reducer_;

  bool in_flight_ = false;  // between a synchronising Backward and FinishGradients
  size_t next_bucket_ = 0;  // first bucket not handed over yet
  absl::Time backward_end_;
  CommStats stats_;
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_DATA_PARALLEL_H_
