#ifndef RINGMASTER_ENGINE_DIST_NCCL_PROCESS_GROUP_H_
#define RINGMASTER_ENGINE_DIST_NCCL_PROCESS_GROUP_H_

// NcclProcessGroup: the ProcessGroup of CUDA tensors, one rank per GPU, over a
// non-blocking NCCL communicator.
//
// Timing. Every ProcessGroup call returns when this rank's part is complete on
// the device (the output is ready), like the other implementations: it
// enqueues the NCCL operation on the group's communication stream, then polls
// the stream's progress (cudaEventQuery) and the communicator's asynchronous
// error (ncclCommGetAsyncError) until the operation is done, fails, or
// timeout() passes. On failure or timeout the communicator is aborted
// (ncclCommAbort), so a dead or hung peer becomes DEADLINE_EXCEEDED (hung) or
// UNAVAILABLE (ncclRemoteError/ncclSystemError) instead of a hang, and the
// group is broken: later calls return ABORTED. Messages name the operation,
// the group and the rank: "allreduce on dp[4 ranks] rank 1: ...". Any error,
// also INVALID_ARGUMENT, breaks the group, as the ProcessGroup contract says
// (the peers are now waiting for a call this rank did not make).
//
// Overlap. The Enqueue* variants return as soon as the operation is on the
// communication stream, with an NcclWork: Wait(work) blocks the host like the
// ProcessGroup calls (deadline, abort); WaitOnStream(work, stream) makes a
// stream wait for it on the device without blocking the host. The tensors must
// stay alive and untouched until the work is complete. Every operation, both
// kinds, first makes the communication stream wait for the work already
// enqueued on the compute stream (SetComputeStream; the legacy default stream
// until set), so it reads inputs that are ready.
//
// Numerics. f32/f16/bf16 are reduced by NCCL natively in their own format
// (f16/bf16 sums are rounded per step, not accumulated in f32 as the CPU
// groups do); kAvg is ncclAvg. Broadcast, all-gather, send and recv also move
// i32.
//
// Point to point. NCCL has no tags: a Send and the Recv it matches pair by
// order between the two ranks; `tag` is not checked. A Send completes only
// when its Recv is posted (NCCL does not buffer), so two ranks that each Send
// to the other before their Recv deadlock (then DEADLINE_EXCEEDED): exchange
// with SendRecv, which issues a batch in one ncclGroupStart/End.
//
// Sub-groups (NewGroup) are made with ncclCommSplit (collective over this
// group; color NCCL_SPLIT_NOCOLOR for ranks outside the sub-group), each with
// its own communicator and stream on the same device.
//
// Thread-safety: one thread calls a group at a time (ProcessGroup contract);
// different groups may be used from different threads. Any thread may call:
// the group sets its device for the duration of each call.

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "engine/core/cuda_status.h"
#include "engine/core/tensor.h"
#include "engine/dist/nccl_comm.h"
#include "engine/dist/process_group.h"
#include "engine/dist/unique_id_exchange.h"

namespace ringmaster::engine::dist {

struct NcclGroupOptions {
  int rank = 0;
  int size = 1;
  // The CUDA ordinal (of the devices visible to this process) this rank uses;
  // usually the local rank. Create makes it the calling thread's device.
  int device = 0;
  // Bounds the whole Create (id exchange and communicator init), each call,
  // each Wait, and the finalize at destruction.
  absl::Duration timeout = absl::Minutes(5);
  // The communicator's name in the id exchange, unique within the job's
  // generation ("world"; sub-groups are split from it and need no id).
  std::string communicator = "world";
  // The group in messages: "<name>[<size> ranks]".
  std::string name = "world";
  // Deadlines and poll sleeps; Clock::Real() when null.
  Clock* clock = nullptr;
};

// A point on a group's communication stream: the operation it names, and all
// enqueued before it, are complete once it is. Copyable and cheap (it shares
// one CUDA event); waited for through the group that made it, so the group's
// one-thread-at-a-time rule covers it.
class NcclWork {
 public:
  NcclWork() = default;
  bool valid() const { return event_ != nullptr; }
  const std::string& op() const { return op_; }

 private:
  friend class NcclProcessGroup;
  NcclWork(std::shared_ptr<CudaEvent> event, std::string op, const void* group)
      : event_(std::move(event)), op_(std::move(op)), group_(group) {}
  std::shared_ptr<CudaEvent> event_;
  std::string op_;
  const void* group_ = nullptr;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // One point-to-point transfer of a SendRecv batch.
  struct P2P {
    enum Kind { kSend, kRecv };
    Kind kind;
    Tensor tensor;
    int peer;
  };

  // Joins the group: checks `options` (INVALID_ARGUMENT), sets the device
  // (FAILED_PRECONDITION when there is no usable CUDA device or not that
  // many), exchanges the unique id through `ids` (rank 0 publishes; others
  // wait), and initializes the communicator, all within options.timeout
  // (DEADLINE_EXCEEDED, communicator aborted, when a rank does not join).
  static absl::StatusOr<std::unique_ptr<NcclProcessGroup>> Create(UniqueIdExchange* ids,
                                                                  const NcclGroupOptions& options);
  // Finalizes and destroys the communicator (aborts it when broken or when
  // the finalize does not finish within timeout()).
  ~NcclProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  std::string name() const override;

  // All of `ops` as one NCCL group (ncclGroupStart/End): a batch of sends and
  // receives that completes together, so ranks may exchange in both
  // directions at once (pipeline activations and gradients). A send to and a
  // receive from this rank itself pair with each other (a lone Send or Recv
  // to this rank itself is INVALID_ARGUMENT: it could never complete).
  absl::Status SendRecv(const std::vector<P2P>& ops);

  // Stream-ordered variants (see "Overlap" above).
  absl::StatusOr<NcclWork> EnqueueAllReduce(const Tensor& tensor, ReduceOp op);
  absl::StatusOr<NcclWork> EnqueueReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op);
  absl::StatusOr<NcclWork> EnqueueAllGather(const Tensor& input, const Tensor& output);
  absl::StatusOr<NcclWork> EnqueueBroadcast(const Tensor& tensor, int root);
  absl::StatusOr<NcclWork> EnqueueSendRecv(const std::vector<P2P>& ops);
  // Blocks until `work` (of this group) is complete: its deadline is
  // timeout() from this call. Errors as for the blocking calls.
  absl::Status Wait(const NcclWork& work);
  // Makes `stream` wait on the device for `work` (cudaStreamWaitEvent).
  absl::Status WaitOnStream(const NcclWork& work, cudaStream_t stream);

  // The stream whose work every later operation waits for (see "Overlap").
  void SetComputeStream(cudaStream_t stream) { compute_stream_ = stream; }
  void SetComputeStream(void* stream) override { compute_stream_ = static_cast<cudaStream_t>(stream); }
  // The communication stream (on device()).
  cudaStream_t stream() const { return stream_.get(); }
  int device() const { return device_; }

 private:
  NcclProcessGroup(int rank, int size, int device, absl::Duration timeout, std::string name,
                   Clock* clock);
  // Makes the stream, events and barrier buffer on the current device.
  absl::Status InitDeviceObjects();

  absl::Status DoAllReduce(const Tensor& tensor, ReduceOp op) override;
  absl::Status DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  absl::Status DoAllGather(const Tensor& input, const Tensor& output) override;
  absl::Status DoBroadcast(const Tensor& tensor, int root) override;
  absl::Status DoSend(const Tensor& tensor, int dst, int tag) override;
  absl::Status DoRecv(const Tensor& tensor, int src, int tag) override;
  absl::Status DoBarrier() override;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> DoNewGroup(const std::vector<int>& ranks, int sub_rank,
                                                           const std::string& name) override;
  // A CUDA tensor in memory of this group's device.
  absl::Status CheckPlacement(const Tensor& tensor, absl::string_view what) const override;
  // Aborts the communicator.
  void OnBroken() override;

  // Enqueues one operation: device check, ABORTED when broken, compute-stream
  // dependency, `issue` (the NCCL calls), the communicator's ready wait, and
  // the completion event. Failures break the group.
  absl::StatusOr<NcclWork> Enqueue(absl::string_view op, const std::function<absl::Status()>& issue);
  absl::Status EnqueueAndWait(absl::string_view op, const std::function<absl::Status()>& issue);
  // Enqueue with arguments already checked.
  absl::StatusOr<NcclWork> StartAllReduce(const Tensor& tensor, ReduceOp op);
  absl::StatusOr<NcclWork> StartReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op);
  absl::StatusOr<NcclWork> StartAllGather(const Tensor& input, const Tensor& output);
  absl::StatusOr<NcclWork> StartBroadcast(const Tensor& tensor, int root);
  absl::StatusOr<NcclWork> StartSendRecv(const std::vector<P2P>& ops);
  // Checks a SendRecv batch (ProcessGroup's peer and tensor checks).
  absl::Status AdmitSendRecv(const std::vector<P2P>& ops);

  const int rank_;
  const int size_;
  const int device_;
  const std::string name_;
  Clock* const clock_;
  cudaStream_t compute_stream_ = cudaStreamLegacy;
  // Destroyed in reverse order: the communicator before its stream.
  CudaStream stream_;
  CudaEvent compute_ready_;
  DeviceBuffer barrier_buffer_;
  NcclComm comm_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_PROCESS_GROUP_H_
