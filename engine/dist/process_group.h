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
//
// This class enforces the contract's local part once for every transport:
// each public call first answers ABORTED if the group is broken, then checks
// its arguments (INVALID_ARGUMENT, which breaks the group: the peers now wait
// for a call this rank did not make), and only then calls the transport's
// Do* method with a usable group and valid arguments. An error the transport
// returns is prefixed with the operation, group and rank and breaks the group
// (OnBroken lets the transport release its connections).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  absl::Status AllReduce(const Tensor& tensor, ReduceOp op);
  // input: size() equal chunks of output.numel() elements; output <- op over
  // every rank's chunk number rank().
  absl::Status ReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op);
  // output: size() chunks of input.numel() elements; chunk r <- rank r's input.
  absl::Status AllGather(const Tensor& input, const Tensor& output);
  // tensor <- root's tensor.
  absl::Status Broadcast(const Tensor& tensor, int root);
  // Point to point with another rank; a Send to `dst` with `tag` matches the
  // Recv from this rank with the same tag. Send returns once the data is
  // handed to the transport (it may complete before the Recv); Recv returns
  // when the data is in place.
  absl::Status Send(const Tensor& tensor, int dst, int tag);
  absl::Status Recv(const Tensor& tensor, int src, int tag);
  absl::Status Barrier();

  // The sub-group of `ranks` (ranks of this group, increasing, including this
  // rank). Collective over this group: every rank calls NewGroup with the same
  // sequence of rank lists (including those it is not in, for which it gets
  // nullptr), in the same order. `name` is the sub-group's name in errors.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const std::vector<int>& ranks,
                                                         const std::string& name);

  absl::Duration timeout() const { return timeout_; }
  // True after an error: every later call returns ABORTED.
  bool broken() const { return !broken_.ok(); }

 protected:
  explicit ProcessGroup(absl::Duration timeout) : timeout_(timeout) {}

  // The transport. Called with a usable group and arguments that passed the
  // checks above; an error returned breaks the group (see the class comment).
  virtual absl::Status DoAllReduce(const Tensor& tensor, ReduceOp op) = 0;
  virtual absl::Status DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  virtual absl::Status DoAllGather(const Tensor& input, const Tensor& output) = 0;
  virtual absl::Status DoBroadcast(const Tensor& tensor, int root) = 0;
  virtual absl::Status DoSend(const Tensor& tensor, int dst, int tag) = 0;
  virtual absl::Status DoRecv(const Tensor& tensor, int src, int tag) = 0;
  virtual absl::Status DoBarrier() = 0;
  // `sub_rank`: this rank's index in `ranks`, -1 when it is not a member
  // (then the result is nullptr, after taking part in what is collective).
  virtual absl::StatusOr<std::unique_ptr<ProcessGroup>> DoNewGroup(const std::vector<int>& ranks,
                                                                   int sub_rank,
                                                                   const std::string& name) = 0;
  // OK if `tensor` is memory this transport reads (host memory, or the
  // group's CUDA device); the reason otherwise, naming `what` ("input").
  virtual absl::Status CheckPlacement(const Tensor& tensor, absl::string_view what) const = 0;
  // Called once, when the group breaks: close connections, abort the
  // communicator, so that peers blocked on this rank fail now.
  virtual void OnBroken() {}

  // The checks of each public call, for transports with entry points of
  // their own (NCCL's Enqueue*): ABORTED if broken, else the argument check,
  // which breaks the group when it fails. `op` names the call in messages.
  absl::Status AdmitAllReduce(absl::string_view op, const Tensor& tensor);
  absl::Status AdmitReduceScatter(absl::string_view op, const Tensor& input, const Tensor& output);
  absl::Status AdmitAllGather(absl::string_view op, const Tensor& input, const Tensor& output);
  absl::Status AdmitBroadcast(absl::string_view op, const Tensor& tensor, int root);
  // ABORTED if broken; INVALID_ARGUMENT unless 0 <= peer < size(), and,
  // unless `self_allowed`, peer != rank(). `what` names the role ("root").
  absl::Status CheckPeer(absl::string_view op, int peer, absl::string_view what, bool self_allowed);
  // ABORTED (naming `op`) if the group is broken.
  absl::Status Usable(absl::string_view op) const;
  // The error that broke the group (with its operation prefix); OK while usable.
  const absl::Status& broken_status() const { return broken_; }
  // Prefixes `status` with "<op> on <name()> rank <rank()>: " (unless it
  // starts so already: a wrapped group's error), records it as what broke the
  // group (the first error wins), calls OnBroken, returns it.
  absl::Status Fail(absl::string_view op, const absl::Status& status);

  // OK if `tensor` is defined, CheckPlacement accepts it and, when
  // `reduced`, its dtype is f32, f16 or bf16; the reason otherwise (the caller
  // decides whether it breaks the group).
  absl::Status CheckTensor(const Tensor& tensor, absl::string_view what, bool reduced) const;

 private:
  // Fail(op, status) unless the transport already broke the group itself.
  absl::Status Finish(absl::string_view op, const absl::Status& status);
  absl::Status CheckChunked(const Tensor& whole, const Tensor& chunk) const;

  absl::Duration timeout_;
  absl::Status broken_;  // the error that broke the group; OK while usable
};

// "dp[4 ranks]" (the name a ProcessGroup reports) from a base name and a size.
std::string GroupName(absl::string_view base, int size);
// "allreduce on dp[4 ranks] rank 1: "
std::string OpContext(absl::string_view op, const ProcessGroup& group);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_PROCESS_GROUP_H_
