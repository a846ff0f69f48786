#ifndef RINGMASTER_ENGINE_DIST_PROCESS_GROUP_H_
#define RINGMASTER_ENGINE_DIST_PROCESS_GROUP_H_

// ProcessGroup: the collectives a group of ranks runs together — data
// parallelism (allreduce, reduce-scatter, all-gather, broadcast), pipeline
// parallelism (send/recv) — with a deadline on every call, so that a dead or
// hung peer becomes an error instead of a hang.
//
// Implementations: InProcessGroup (threads of one process; unit tests),
// GlooProcessGroup (TCP, host tensors), NcclProcessGroup (GPU tensors).
//
// Contract, for every implementation:
//  * Every rank of the group calls the same collectives in the same order
//    with tensors of the same shape and dtype (send/recv pair by (peer, tag)).
//  * Tensors live on the device the group serves (host for in-process and
//    Gloo); f32, f16 or bf16 for reductions (f16/bf16 are reduced in f32 and
//    rounded back); any dtype for broadcast, all-gather, send and recv.
//  * A call returns when this rank's part is complete: the output is ready.
//    (NcclProcessGroup instead enqueues on its stream; see its header.)
//  * Errors: DEADLINE_EXCEEDED when a peer does not take part within the
//    timeout, UNAVAILABLE when a peer's connection is lost, INVALID_ARGUMENT
//    for mismatched inputs detected locally. The message names the operation
//    and the group ("allreduce on dp[2 ranks] rank 1: ..."). After an error the
//    group is broken: every later call fails (ABORTED), and the trainer exits.
//  * One thread calls a group at a time. Different groups (sub-groups) may be
//    used from different threads.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine::dist {

enum class ReduceOp { kSum, kAvg };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "inprocess", "gloo" or "nccl".
  virtual const char* backend() const = 0;
  // What error messages call the group, e.g. "dp[4 ranks]".
  virtual std::string name() const = 0;
  // NCCL: the CUDA stream (a cudaStream_t) whose work every later collective
  // waits for, on the device; groups made by NewGroup afterwards inherit it.
  // Host-memory groups ignore it.
  virtual void SetComputeStream(void* /*stream*/) {}

  // tensor <- op over every rank's tensor, in place.
  virtual absl::Status AllReduce(const Tensor& tensor, ReduceOp op) = 0;
  // input: size() equal chunks of output.numel() elements; output <- op over
  // every rank's chunk number rank().
  virtual absl::Status ReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // output: size() chunks of input.numel() elements; chunk r <- rank r's input.
  virtual absl::Status AllGather(const Tensor& input, const Tensor& output) = 0;
  // tensor <- root's tensor.
  virtual absl::Status Broadcast(const Tensor& tensor, int root) = 0;
  // Point to point; a Send to `dst` with `tag` matches the Recv from this rank
  // with the same tag. Send returns once the data is handed to the transport
  // (it may complete before the Recv); Recv returns when the data is in place.
  virtual absl::Status Send(const Tensor& tensor, int dst, int tag) = 0;
  virtual absl::Status Recv(const Tensor& tensor, int src, int tag) = 0;
  virtual absl::Status Barrier() = 0;

  // The sub-group of `ranks` (ranks of this group, increasing, including this
  // rank). Collective over this group: every rank calls NewGroup with the same
  // sequence of rank lists (including those it is not in, for which it gets
  // nullptr), in the same order. `name` is the sub-group's name in errors.
  virtual absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const std::vector<int>& ranks,
                                                                 const std::string& name) = 0;

  absl::Duration timeout() const { return timeout_; }

 protected:
  explicit ProcessGroup(absl::Duration timeout) : timeout_(timeout) {}

 private:
  absl::Duration timeout_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_PROCESS_GROUP_H_
