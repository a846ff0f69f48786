#include "engine/dist/nccl_process_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/dist/nccl_args.h"
#include "engine/dist/nccl_unique_id.h"

namespace ringmaster::engine::dist {
namespace {

constexpr absl::string_view kSendRecv = "send/recv";

// Makes `device` current, with FAILED_PRECONDITION for every way the machine
// cannot provide it (no driver, no device, too few devices).
absl::Status SelectDevice(int device) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    absl::Status status = CudaStatus(error, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device: ", status.message()));
  }
  if (count == 0) return absl::FailedPreconditionError("no usable CUDA device: no CUDA device is visible");
  if (device >= count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "CUDA device %d was asked for but %d %s visible (check CUDA_VISIBLE_DEVICES)", device, count,
        count == 1 ? "is" : "are"));
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return absl::OkStatus();
}

absl::Status CheckOptions(const UniqueIdExchange* ids, const NcclGroupOptions& options) {
  if (ids == nullptr) return absl::InvalidArgumentError("nothing to exchange the NCCL unique id through");
  if (options.communicator.empty()) return absl::InvalidArgumentError("communicator: a name is required");
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d is not a rank of a group of %d", options.rank, options.size));
  }
  if (options.device < 0) return absl::InvalidArgumentError(absl::StrFormat("device %d", options.device));
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive, not ", absl::FormatDuration(options.timeout)));
  }
  return absl::OkStatus();
}

}  // namespace

NcclProcessGroup::NcclProcessGroup(int rank, int size, int device, absl::Duration timeout, std::string name,
                                   Clock* clock)
    : ProcessGroup(timeout), rank_(rank), size_(size), device_(device), name_(std::move(name)), clock_(clock) {}

absl::StatusOr<std::unique_ptr<NcclProcessGroup>> NcclProcessGroup::Create(UniqueIdExchange* ids,
                                                                          const NcclGroupOptions& options) {
  const std::string context = absl::StrFormat("joining NCCL group %s as rank %d on CUDA device %d",
                                              GroupName(options.name, options.size), options.rank,
                                              options.device);
  RETURN_IF_ERROR(Annotate(CheckOptions(ids, options), context));
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  const absl::Time deadline = clock->Now() + options.timeout;

  // The device first: a rank that cannot take part publishes no id.
  RETURN_IF_ERROR(Annotate(SelectDevice(options.device), context));
  absl::StatusOr<ncclUniqueId> id =
      ExchangeNcclUniqueId(*ids, options.communicator, options.rank, deadline - clock->Now());
  if (!id.ok()) return Annotate(id.status(), context);

  std::unique_ptr<NcclProcessGroup> group(
      new NcclProcessGroup(options.rank, options.size, options.device, options.timeout, options.name, clock));
  RETURN_IF_ERROR(Annotate(group->InitDeviceObjects(), context));
  absl::StatusOr<NcclComm> comm = NcclComm::InitRank(*id, options.size, options.rank, group->name(), *clock,
                                                     deadline, options.timeout);
  if (!comm.ok()) return Annotate(comm.status(), context);
  group->comm_ = std::move(comm).value();
  return group;
}

absl::Status NcclProcessGroup::InitDeviceObjects() {
  ASSIGN_OR_RETURN(stream_, CudaStream::Create());
  ASSIGN_OR_RETURN(compute_ready_, CudaEvent::Create());
  ASSIGN_OR_RETURN(barrier_buffer_, DeviceBuffer::Allocate(sizeof(float)));
  CUDA_RETURN_IF_ERROR(cudaMemset(barrier_buffer_.data(), 0, barrier_buffer_.bytes()));
  return absl::OkStatus();
}

NcclProcessGroup::~NcclProcessGroup() {
  // Release everything while this group's device is current.
  absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Enter(device_);
  if (broken()) comm_.Abort();
  comm_ = NcclComm();  // finalize + destroy when healthy (bounded by timeout())
  barrier_buffer_ = DeviceBuffer();
  compute_ready_ = CudaEvent();
  stream_ = CudaStream();
}

std::string NcclProcessGroup::name() const { return GroupName(name_, size_); }

void NcclProcessGroup::OnBroken() { comm_.Abort(); }

absl::Status NcclProcessGroup::CheckPlacement(const Tensor& tensor, absl::string_view what) const {
  if (tensor.device() != Device::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " tensor is a ", DeviceName(tensor.device()), " tensor; this group serves CUDA tensors"));
  }
  if (tensor.numel() == 0) return absl::OkStatus();
  cudaPointerAttributes attributes;
  CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, tensor.raw()));
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " tensor is marked CUDA but its memory is not device memory"));
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device_) {
    return absl::InvalidArgumentError(absl::StrCat(what, " tensor is on CUDA device ", attributes.device,
                                                   "; this group uses device ", device_));
  }
  return absl::OkStatus();
}

absl::StatusOr<NcclWork> NcclProcessGroup::Enqueue(absl::string_view op,
                                                   const std::function<absl::Status()>& issue) {
  RETURN_IF_ERROR(Usable(op));
  absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Enter(device_);
  if (!scoped.ok()) return Fail(op, scoped.status());
  auto event = std::make_shared<CudaEvent>();
  absl::Status status = [&]() -> absl::Status {
    RETURN_IF_ERROR(comm_.AsyncError());
    // Inputs are ready once the compute stream's work so far is done.
    RETURN_IF_ERROR(compute_ready_.Record(compute_stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_.get(), compute_ready_.get(), 0));
    RETURN_IF_ERROR(issue());
    // A non-blocking communicator may still be enqueuing (ncclInProgress).
    RETURN_IF_ERROR(comm_.WaitReady(clock_->Now() + timeout()));
    ASSIGN_OR_RETURN(*event, CudaEvent::Create());
    return event->Record(stream_.get());
  }();
  if (!status.ok()) return Fail(op, status);
  return NcclWork(std::move(event), std::string(op), this);
}

absl::Status NcclProcessGroup::Wait(const NcclWork& work) {
  const std::string op = work.valid() ? work.op() : "wait";
  if (!work.valid() || work.group_ != this) {
    return Fail(op, absl::InvalidArgumentError("the work is not of this group"));
  }
  RETURN_IF_ERROR(Usable(op));
  absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Enter(device_);
  if (!scoped.ok()) return Fail(op, scoped.status());
  absl::Status status = PollUntil(*clock_, clock_->Now() + timeout(), [&]() -> absl::StatusOr<bool> {
    ASSIGN_OR_RETURN(bool done, work.event_->Done());
    if (done) return true;
    RETURN_IF_ERROR(comm_.AsyncError());
    return false;
  });
  if (absl::IsDeadlineExceeded(status)) {
    status = Annotate(status, "not every rank of the group took part in time");
  }
  if (!status.ok()) return Fail(op, status);
  return absl::OkStatus();
}

absl::Status NcclProcessGroup::WaitOnStream(const NcclWork& work, cudaStream_t stream) {
  if (!work.valid() || work.group_ != this) {
    return Fail("wait on stream", absl::InvalidArgumentError("the work is not of this group"));
  }
  absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Enter(device_);
  if (!scoped.ok()) return Fail(work.op(), scoped.status());
  absl::Status status = CUDA_STATUS(cudaStreamWaitEvent(stream, work.event_->get(), 0));
  if (!status.ok()) return Fail(work.op(), status);
  return absl::OkStatus();
}

absl::Status NcclProcessGroup::EnqueueAndWait(absl::string_view op, const std::function<absl::Status()>& issue) {
  ASSIGN_OR_RETURN(NcclWork work, Enqueue(op, issue));
  return Wait(work);
}

// ------------------------------------------------------------------ collectives
// Each Start* issues an operation whose arguments ProcessGroup has checked;
// the public Enqueue* check them first (Admit*), the Do* wait for the work.

absl::StatusOr<NcclWork> NcclProcessGroup::StartAllReduce(const Tensor& tensor, ReduceOp op) {
  return Enqueue("allreduce", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ncclDataType_t type, NcclDataType(tensor.dtype(), /*reduction=*/true));
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(ncclAllReduce(tensor.raw(), tensor.raw(), tensor.numel(), type,
                                                      NcclRedOp(op), comm_.get(), stream_.get()));
    return absl::OkStatus();
  });
}

absl::StatusOr<NcclWork> NcclProcessGroup::StartReduceScatter(const Tensor& input, const Tensor& output,
                                                              ReduceOp op) {
  return Enqueue("reduce_scatter", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ncclDataType_t type, NcclDataType(input.dtype(), /*reduction=*/true));
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(ncclReduceScatter(input.raw(), output.raw(), output.numel(), type,
                                                          NcclRedOp(op), comm_.get(), stream_.get()));
    return absl::OkStatus();
  });
}

absl::StatusOr<NcclWork> NcclProcessGroup::StartAllGather(const Tensor& input, const Tensor& output) {
  return Enqueue("allgather", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ncclDataType_t type, NcclDataType(input.dtype(), /*reduction=*/false));
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(
        ncclAllGather(input.raw(), output.raw(), input.numel(), type, comm_.get(), stream_.get()));
    return absl::OkStatus();
  });
}

absl::StatusOr<NcclWork> NcclProcessGroup::StartBroadcast(const Tensor& tensor, int root) {
  return Enqueue("broadcast", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ncclDataType_t type, NcclDataType(tensor.dtype(), /*reduction=*/false));
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(
        ncclBroadcast(tensor.raw(), tensor.raw(), tensor.numel(), type, root, comm_.get(), stream_.get()));
    return absl::OkStatus();
  });
}

absl::StatusOr<NcclWork> NcclProcessGroup::StartSendRecv(const std::vector<P2P>& ops) {
  return Enqueue(kSendRecv, [&]() -> absl::Status {
    NCCL_RETURN_IF_ERROR(ncclGroupStart());
    for (const P2P& p : ops) {
      ncclDataType_t type = *NcclDataType(p.tensor.dtype(), /*reduction=*/false);
      ncclResult_t result =
          p.kind == P2P::kSend
              ? ncclSend(p.tensor.raw(), p.tensor.numel(), type, p.peer, comm_.get(), stream_.get())
              : ncclRecv(p.tensor.raw(), p.tensor.numel(), type, p.peer, comm_.get(), stream_.get());
      if (result != ncclSuccess && result != ncclInProgress) {
        ncclGroupEnd();  // closes the group; the first failure is what we report
        return NcclStatus(result, p.kind == P2P::kSend ? "ncclSend" : "ncclRecv", __FILE__, __LINE__);
      }
    }
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(ncclGroupEnd());
    return absl::OkStatus();
  });
}

absl::Status NcclProcessGroup::AdmitSendRecv(const std::vector<P2P>& ops) {
  for (const P2P& p : ops) {
    const bool send = p.kind == P2P::kSend;
    RETURN_IF_ERROR(CheckPeer(kSendRecv, p.peer, send ? "send destination" : "receive source",
                              /*self_allowed=*/true));
    absl::Status valid = CheckTensor(p.tensor, send ? "sent" : "received", /*reduced=*/false);
    if (!valid.ok()) return Fail(kSendRecv, valid);
  }
  return Usable(kSendRecv);
}

absl::StatusOr<NcclWork> NcclProcessGroup::EnqueueAllReduce(const Tensor& tensor, ReduceOp op) {
  RETURN_IF_ERROR(AdmitAllReduce("allreduce", tensor));
  return StartAllReduce(tensor, op);
}

absl::StatusOr<NcclWork> NcclProcessGroup::EnqueueReduceScatter(const Tensor& input, const Tensor& output,
                                                                ReduceOp op) {
  RETURN_IF_ERROR(AdmitReduceScatter("reduce_scatter", input, output));
  return StartReduceScatter(input, output, op);
}

absl::StatusOr<NcclWork> NcclProcessGroup::EnqueueAllGather(const Tensor& input, const Tensor& output) {
  RETURN_IF_ERROR(AdmitAllGather("allgather", input, output));
  return StartAllGather(input, output);
}

absl::StatusOr<NcclWork> NcclProcessGroup::EnqueueBroadcast(const Tensor& tensor, int root) {
  RETURN_IF_ERROR(AdmitBroadcast("broadcast", tensor, root));
  return StartBroadcast(tensor, root);
}

absl::StatusOr<NcclWork> NcclProcessGroup::EnqueueSendRecv(const std::vector<P2P>& ops) {
  RETURN_IF_ERROR(AdmitSendRecv(ops));
  return StartSendRecv(ops);
}

absl::Status NcclProcessGroup::SendRecv(const std::vector<P2P>& ops) {
  ASSIGN_OR_RETURN(NcclWork work, EnqueueSendRecv(ops));
  return Wait(work);
}

// ------------------------------------------------------- the blocking interface

absl::Status NcclProcessGroup::DoAllReduce(const Tensor& tensor, ReduceOp op) {
  ASSIGN_OR_RETURN(NcclWork work, StartAllReduce(tensor, op));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  ASSIGN_OR_RETURN(NcclWork work, StartReduceScatter(input, output, op));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoAllGather(const Tensor& input, const Tensor& output) {
  ASSIGN_OR_RETURN(NcclWork work, StartAllGather(input, output));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoBroadcast(const Tensor& tensor, int root) {
  ASSIGN_OR_RETURN(NcclWork work, StartBroadcast(tensor, root));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoSend(const Tensor& tensor, int dst, int /*tag*/) {
  ASSIGN_OR_RETURN(NcclWork work, StartSendRecv({P2P{P2P::kSend, tensor, dst}}));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoRecv(const Tensor& tensor, int src, int /*tag*/) {
  ASSIGN_OR_RETURN(NcclWork work, StartSendRecv({P2P{P2P::kRecv, tensor, src}}));
  return Wait(work);
}

absl::Status NcclProcessGroup::DoBarrier() {
  return EnqueueAndWait("barrier", [&]() -> absl::Status {
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(ncclAllReduce(barrier_buffer_.data(), barrier_buffer_.data(), 1,
                                                      ncclFloat32, ncclSum, comm_.get(), stream_.get()));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> NcclProcessGroup::DoNewGroup(const std::vector<int>& ranks,
                                                                           int sub_rank, const std::string& name) {
  const bool member = sub_rank >= 0;
  const int sub_size = static_cast<int>(ranks.size());

  ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
  // Order sub-ranks as in `ranks` (which is increasing): key = rank here.
  absl::StatusOr<NcclComm> comm = comm_.Split(member ? 0 : NCCL_SPLIT_NOCOLOR, rank_,
                                              GroupName(name, sub_size), clock_->Now() + timeout());
  if (!comm.ok()) return comm.status();
  if (!member) return std::unique_ptr<ProcessGroup>();

  std::unique_ptr<NcclProcessGroup> group(
      new NcclProcessGroup(sub_rank, sub_size, device_, timeout(), name, clock_));
  absl::Status status = group->InitDeviceObjects();
  int nccl_rank = -1;
  if (status.ok()) status = NCCL_STATUS(ncclCommUserRank(comm->get(), &nccl_rank));
  if (status.ok() && nccl_rank != sub_rank) {
    status = absl::InternalError(absl::StrFormat("NCCL made this rank %d of the sub-group, not %d",
                                                 nccl_rank, sub_rank));
  }
  if (!status.ok()) return status;
  group->comm_ = std::move(comm).value();
  group->compute_stream_ = compute_stream_;
  return std::unique_ptr<ProcessGroup>(std::move(group));
}

}  // namespace ringmaster::engine::dist
