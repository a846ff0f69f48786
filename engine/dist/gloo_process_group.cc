#include "engine/dist/gloo_process_group.h"

#include <signal.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/dist/collective_util.h"
#include "engine/dist/gloo_store_adapter.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace ringmaster::engine::dist {
namespace {

// Slot prefixes of our own unbound-buffer protocols; Gloo's collectives use
// 0x01..0x08 (gloo/types.h).
constexpr uint8_t kReduceScatterSlotPrefix = 0x21;
constexpr uint8_t kSendHeaderSlotPrefix = 0x22;
constexpr uint8_t kSendDataSlotPrefix = 0x23;
// More outstanding sends than this and Send first completes the oldest.
constexpr size_t kMaxPendingSends = 16;
constexpr uint32_t kHeaderMagic = 0x52534e44;  // "RSND"

// What Send puts before the data so that Recv can check it.
struct WireHeader {
  uint32_t magic = kHeaderMagic;
  uint32_t dtype = 0;
  int64_t numel = 0;
};
static_assert(sizeof(WireHeader) == 16, "the header is part of the wire format");

void SumF32(void* out, const void* a, const void* b, size_t n) {
  AddF32(static_cast<float*>(out), static_cast<const float*>(a), static_cast<const float*>(b), n);
}

// Gloo reports a timeout and a broken connection with the same exception type.
absl::Status FromIoException(const char* what) {
  std::string message = absl::StrCat("gloo: ", what);
  const std::string lower = absl::AsciiStrToLower(what);
  if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

// Gloo's TCP transport writes with writev(2), without MSG_NOSIGNAL: writing
// to a connection the peer has reset raises SIGPIPE, whose default action
// kills the process. A lost peer must be an error (UNAVAILABLE), so SIGPIPE is
// ignored — unless the program has installed its own disposition.
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler == SIG_DFL) {
      ::signal(SIGPIPE, SIG_IGN);
    }
  });
}

std::string Describe(DType dtype, int64_t numel) {
  return absl::StrCat(DTypeName(dtype), "[", numel, "]");
}

// What CheckCall exchanges.
struct CallSignature {
  uint32_t op = 0;  // index into kCallNames
  uint32_t dtype = 0;
  int64_t numel = 0;
  int64_t extra = 0;  // root, or ReduceOp
  bool operator!=(const CallSignature& o) const {
    return op != o.op || dtype != o.dtype || numel != o.numel || extra != o.extra;
  }
};
static_assert(sizeof(CallSignature) == 24, "part of the wire format");
constexpr const char* kCallNames[] = {"?", "allreduce", "reduce_scatter", "allgather",
                                      "broadcast", "barrier"};

std::string Describe(const CallSignature& call) {
  const char* name = call.op < 6 ? kCallNames[call.op] : "?";
  if (call.op == 5) return name;
  std::string text = absl::StrCat(name, " ", Describe(static_cast<DType>(call.dtype), call.numel));
  if (call.op == 1 || call.op == 2) {
    absl::StrAppend(&text, " ", ReduceOpName(static_cast<ReduceOp>(call.extra)));
  } else if (call.op == 4) {
    absl::StrAppend(&text, " from root ", call.extra);
  }
  return text;
}

}  // namespace

struct GlooProcessGroup::PendingSend {
  WireHeader header;
  std::vector<char> data;
  // Declared after what they point into, so destroyed first.
  std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer;
  std::unique_ptr<gloo::transport::UnboundBuffer> data_buffer;  // null for an empty tensor
};

absl::StatusOr<std::unique_ptr<GlooProcessGroup>> GlooProcessGroup::Create(
    Store& store, const GlooOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo group ", options.name, ": rank ",
                                                   options.rank, " of size ", options.size,
                                                   " is not a rank"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("gloo group ", options.name,
                                                   ": timeout must be positive"));
  }
  IgnoreSigpipeOnce();
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    if (options.interface.empty()) {
      attr.hostname = options.hostname;
    } else {
      attr.iface = options.interface;
    }
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo group ", options.name, ": no TCP device for ",
        options.interface.empty() ? "hostname '" + options.hostname + "'"
                                  : "interface '" + options.interface + "'",
        ": ", e.what()));
  }
  return Connect(store, options, std::move(device));
}

absl::StatusOr<std::unique_ptr<GlooProcessGroup>> GlooProcessGroup::Connect(
    Store& store, const GlooOptions& options, std::shared_ptr<gloo::transport::Device> device) {
  auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
  context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout)));
  GlooStoreAdapter adapter(store, options.key_prefix, options.timeout);
  absl::Status status;
  try {
    context->connectFullMesh(adapter, device);
  } catch (const gloo::IoException& e) {
    status = adapter.error().ok() ? FromIoException(e.what()) : adapter.error();
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("gloo: ", e.what()));
  }
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("rendezvous of ", GroupName(options.name, options.size),
                                     " rank ", options.rank, " under '", options.key_prefix,
                                     "': ", status.message()));
  }
  return std::unique_ptr<GlooProcessGroup>(
      new GlooProcessGroup(&store, options, std::move(device), std::move(context)));
}

GlooProcessGroup::GlooProcessGroup(Store* store, GlooOptions options,
                                   std::shared_ptr<gloo::transport::Device> device,
                                   std::shared_ptr<gloo::Context> context)
    : ProcessGroup(options.timeout),
      store_(store),
      options_(std::move(options)),
      name_(GroupName(options_.name, options_.size)),
      device_(std::move(device)),
      context_(std::move(context)) {}

GlooProcessGroup::~GlooProcessGroup() {
  pending_.clear();  // unbound buffers first: they refer to the context
  context_.reset();
  device_.reset();
}

absl::Status GlooProcessGroup::CheckCall(absl::string_view op, DType dtype, int64_t numel,
                                         int64_t extra) {
  if (!options_.check_calls || size() == 1) return absl::OkStatus();
  CallSignature mine;
  for (uint32_t i = 1; i < 6; ++i) {
    if (op == kCallNames[i]) mine.op = i;
  }
  mine.dtype = static_cast<uint32_t>(dtype);
  mine.numel = numel;
  mine.extra = extra;
  std::vector<CallSignature> all(size());
  gloo::AllgatherOptions options(context_);
  options.setInput(reinterpret_cast<char*>(&mine), sizeof mine);
  options.setOutput(reinterpret_cast<char*>(all.data()), sizeof(CallSignature) * all.size());
  options.setTimeout(std::chrono::milliseconds(TimeoutMs()));
  gloo::allgather(options);
  for (int r = 0; r < size(); ++r) {
    if (all[r] != mine) {
      return absl::InvalidArgumentError(absl::StrCat("ranks disagree: rank ", rank(), " called ",
                                                     Describe(mine), ", rank ", r, " called ",
                                                     Describe(all[r])));
    }
  }
  return absl::OkStatus();
}

int64_t GlooProcessGroup::TimeoutMs() const {
  return std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout()));
}

absl::Status GlooProcessGroup::CheckPlacement(const Tensor& tensor, absl::string_view what) const {
  return CheckHostPlacement(tensor, what);
}

void GlooProcessGroup::OnBroken() {
  pending_.clear();
  try {
    context_->closeConnections();  // peers blocked on us fail now, not at their timeout
  } catch (const std::exception&) {
    // Closing is best effort; the group is unusable either way.
  }
}

absl::Status GlooProcessGroup::Run(const std::function<absl::Status()>& body) {
  try {
    return body();
  } catch (const gloo::IoException& e) {
    return FromIoException(e.what());
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(absl::StrCat("gloo assertion: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("gloo: ", e.what()));
  }
}

absl::Status GlooProcessGroup::DoAllReduce(const Tensor& tensor, ReduceOp op) {
  constexpr absl::string_view kOp = "allreduce";
  const size_t n = tensor.numel();
  if (size() == 1) return absl::OkStatus();
  return Run([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckCall(kOp, tensor.dtype(), n, static_cast<int64_t>(op)));
    if (n == 0) return absl::OkStatus();
    std::vector<float> staged;
    float* values = tensor.dtype() == DType::kF32 ? tensor.f32() : nullptr;
    if (values == nullptr) {
      staged.resize(n);
      CopyToF32(tensor, staged.data());
      values = staged.data();
    }
    gloo::AllreduceOptions options(context_);
    options.setOutput(values, n);
    options.setReduceFunction(&SumF32);
    options.setTimeout(std::chrono::milliseconds(TimeoutMs()));
    gloo::allreduce(options);
    if (op == ReduceOp::kAvg) DivideF32(values, n, static_cast<float>(size()));
    if (!staged.empty()) CopyFromF32(staged.data(), tensor);
    return absl::OkStatus();
  });
}

absl::Status GlooProcessGroup::RingReduceScatter(std::vector<float>& values, size_t chunk) {
  const int n = size(), r = rank();
  if (n == 1 || chunk == 0) return absl::OkStatus();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t chunk_bytes = chunk * sizeof(float);
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, 0);
  const std::chrono::milliseconds timeout(TimeoutMs());
  std::vector<float> incoming(chunk);
  auto outgoing = context_->createUnboundBuffer(values.data(), values.size() * sizeof(float));
  auto receiving = context_->createUnboundBuffer(incoming.data(), chunk_bytes);
  // Step s: send chunk (r - s - 1) to the right, add chunk (r - s - 2) from
  // the left. After n - 1 steps chunk r holds every rank's contribution.
  for (int step = 0; step < n - 1; ++step) {
    const size_t send_chunk = (r - step - 1 + 2 * n) % n;
    const size_t recv_chunk = (r - step - 2 + 2 * n) % n;
    outgoing->send(right, slot, send_chunk * chunk_bytes, chunk_bytes);
    receiving->recv(left, slot, 0, chunk_bytes);
    if (!receiving->waitRecv(timeout) || !outgoing->waitSend(timeout)) {
      return absl::InternalError("gloo: reduce-scatter wait was aborted");
    }
    float* into = values.data() + recv_chunk * chunk;
    AddF32(into, into, incoming.data(), chunk);
  }
  return absl::OkStatus();
}

absl::Status GlooProcessGroup::DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  constexpr absl::string_view kOp = "reduce_scatter";
  return Run([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckCall(kOp, input.dtype(), input.numel(), static_cast<int64_t>(op)));
    const size_t chunk = output.numel();
    std::vector<float> values(input.numel());
    CopyToF32(input, values.data());
    RETURN_IF_ERROR(RingReduceScatter(values, chunk));
    float* mine = values.data() + rank() * chunk;
    if (op == ReduceOp::kAvg) DivideF32(mine, chunk, static_cast<float>(size()));
    CopyFromF32(mine, output);
    return absl::OkStatus();
  });
}

absl::Status GlooProcessGroup::DoAllGather(const Tensor& input, const Tensor& output) {
  constexpr absl::string_view kOp = "allgather";
  if (size() == 1) {
    std::memmove(output.raw(), input.raw(), input.bytes());
    return absl::OkStatus();
  }
  return Run([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckCall(kOp, input.dtype(), input.numel(), 0));
    if (input.bytes() == 0) return absl::OkStatus();
    gloo::AllgatherOptions options(context_);
    options.setInput(static_cast<char*>(input.raw()), input.bytes());
    options.setOutput(static_cast<char*>(output.raw()), output.bytes());
    options.setTimeout(std::chrono::milliseconds(TimeoutMs()));
    gloo::allgather(options);
    return absl::OkStatus();
  });
}

absl::Status GlooProcessGroup::DoBroadcast(const Tensor& tensor, int root) {
  constexpr absl::string_view kOp = "broadcast";
  if (size() == 1) return absl::OkStatus();
  return Run([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckCall(kOp, tensor.dtype(), tensor.numel(), root));
    if (tensor.bytes() == 0) return absl::OkStatus();
    gloo::BroadcastOptions options(context_);
    options.setOutput(static_cast<char*>(tensor.raw()), tensor.bytes());
    options.setRoot(root);
    options.setTimeout(std::chrono::milliseconds(TimeoutMs()));
    gloo::broadcast(options);
    return absl::OkStatus();
  });
}

void GlooProcessGroup::CompleteSends(size_t keep) {
  const std::chrono::milliseconds timeout(TimeoutMs());
  while (pending_.size() > keep) {
    PendingSend& oldest = *pending_.front();
    oldest.header_buffer->waitSend(timeout);
    if (oldest.data_buffer) oldest.data_buffer->waitSend(timeout);
    pending_.erase(pending_.begin());
  }
}

absl::Status GlooProcessGroup::DoSend(const Tensor& tensor, int dst, int tag) {
  return Run([&]() -> absl::Status {
    CompleteSends(kMaxPendingSends - 1);
    auto send = std::make_unique<PendingSend>();
    send->header.dtype = static_cast<uint32_t>(tensor.dtype());
    send->header.numel = tensor.numel();
    const char* bytes = static_cast<const char*>(tensor.raw());
    send->data.assign(bytes, bytes + tensor.bytes());
    const uint32_t wire_tag = static_cast<uint32_t>(tag);
    send->header_buffer = context_->createUnboundBuffer(&send->header, sizeof(WireHeader));
    send->header_buffer->send(dst, gloo::Slot::build(kSendHeaderSlotPrefix, wire_tag));
    if (!send->data.empty()) {
      send->data_buffer = context_->createUnboundBuffer(send->data.data(), send->data.size());
      send->data_buffer->send(dst, gloo::Slot::build(kSendDataSlotPrefix, wire_tag));
    }
    pending_.push_back(std::move(send));
    return absl::OkStatus();
  });
}

absl::Status GlooProcessGroup::DoRecv(const Tensor& tensor, int src, int tag) {
  return Run([&]() -> absl::Status {
    const std::chrono::milliseconds timeout(TimeoutMs());
    const uint32_t wire_tag = static_cast<uint32_t>(tag);
    WireHeader header;
    auto header_buffer = context_->createUnboundBuffer(&header, sizeof header);
    header_buffer->recv(src, gloo::Slot::build(kSendHeaderSlotPrefix, wire_tag));
    if (!header_buffer->waitRecv(timeout)) return absl::InternalError("gloo: recv was aborted");
    if (header.magic != kHeaderMagic || header.dtype > static_cast<uint32_t>(DType::kI32)) {
      return absl::InternalError(absl::StrCat("rank ", src, " sent a corrupt header"));
    }
    const DType dtype = static_cast<DType>(header.dtype);
    if (dtype != tensor.dtype() || header.numel != tensor.numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", src, " sent ", Describe(dtype, header.numel), " with tag ", tag,
          ", this rank expects ", Describe(tensor.dtype(), tensor.numel())));
    }
    if (tensor.bytes() == 0) return absl::OkStatus();
    auto data_buffer = context_->createUnboundBuffer(tensor.raw(), tensor.bytes());
    data_buffer->recv(src, gloo::Slot::build(kSendDataSlotPrefix, wire_tag));
    if (!data_buffer->waitRecv(timeout)) return absl::InternalError("gloo: recv was aborted");
    return absl::OkStatus();
  });
}

absl::Status GlooProcessGroup::DoBarrier() {
  constexpr absl::string_view kOp = "barrier";
  return Run([&]() -> absl::Status {
    CompleteSends(0);
    if (size() == 1) return absl::OkStatus();
    RETURN_IF_ERROR(CheckCall(kOp, DType::kF32, 0, 0));
    gloo::BarrierOptions options(context_);
    options.setTimeout(std::chrono::milliseconds(TimeoutMs()));
    gloo::barrier(options);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> GlooProcessGroup::DoNewGroup(const std::vector<int>& ranks,
                                                                           int sub_rank, const std::string& name) {
  const int index = subgroups_++;
  if (sub_rank < 0) return std::unique_ptr<ProcessGroup>();
  GlooOptions sub = options_;
  sub.rank = sub_rank;
  sub.size = static_cast<int>(ranks.size());
  sub.key_prefix = absl::StrCat(options_.key_prefix, "/sub", index);
  sub.name = name;
  ASSIGN_OR_RETURN(std::unique_ptr<GlooProcessGroup> group, Connect(*store_, sub, device_));
  return std::unique_ptr<ProcessGroup>(std::move(group));
}

}  // namespace ringmaster::engine::dist
