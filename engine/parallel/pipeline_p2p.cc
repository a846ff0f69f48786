#include "engine/parallel/pipeline_p2p.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::engine::parallel {
namespace {

constexpr int kHeaderSize = 2 + kMaxActivationRank;

bool ValidDType(int32_t code) {
  switch (static_cast<DType>(code)) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI32: return true;
  }
  return false;
}

}  // namespace

int ActivationHeaderTag(int micro_batch) { return 3 * micro_batch; }
int ActivationTag(int micro_batch) { return 3 * micro_batch + 1; }
int GradTag(int micro_batch) { return 3 * micro_batch + 2; }

absl::Status SendActivation(dist::ProcessGroup& group, Backend& backend, const Tensor& activation, int dst,
                            int micro_batch) {
  if (!activation.defined() || activation.rank() > kMaxActivationRank)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: cannot send activation ",
                                                   activation.defined() ? ShapeString(activation.shape()) : "(none)",
                                                   " of micro-batch ", micro_batch, " (rank <= ", kMaxActivationRank,
                                                   ")"));
  std::vector<int32_t> header(kHeaderSize, 0);
  header[0] = static_cast<int32_t>(activation.dtype());
  header[1] = activation.rank();
  for (int d = 0; d < activation.rank(); ++d) header[2 + d] = static_cast<int32_t>(activation.dim(d));
  Tensor host = Tensor::FromInts({kHeaderSize}, header);
  Tensor device_header = backend.device() == Device::kCpu ? host : backend.ToDevice(host);
  RETURN_IF_ERROR(group.Send(device_header, dst, ActivationHeaderTag(micro_batch)));
  return group.Send(activation, dst, ActivationTag(micro_batch));
}

absl::StatusOr<Tensor> RecvActivation(dist::ProcessGroup& group, Backend& backend, int src, int micro_batch) {
  Tensor device_header = backend.Empty({kHeaderSize}, DType::kI32);
  RETURN_IF_ERROR(group.Recv(device_header, src, ActivationHeaderTag(micro_batch)));
  Tensor host = backend.ToHost(device_header);
  const int32_t* h = host.i32();
  const int rank = h[1];
  if (!ValidDType(h[0]) || rank < 0 || rank > kMaxActivationRank)
    return absl::InternalError(absl::StrCat("pipeline: malformed activation header from rank ", src,
                                            " for micro-batch ", micro_batch));
  Shape shape;
  for (int d = 0; d < rank; ++d) {
    if (h[2 + d] <= 0)
      return absl::InternalError(absl::StrCat("pipeline: activation header from rank ", src, " has dimension ",
                                              h[2 + d]));
    shape.push_back(h[2 + d]);
  }
  Tensor activation = backend.Empty(shape, static_cast<DType>(h[0]));
  RETURN_IF_ERROR(group.Recv(activation, src, ActivationTag(micro_batch)));
  return activation;
}

absl::Status SendGrad(dist::ProcessGroup& group, const Tensor& grad, int dst, int micro_batch) {
  return group.Send(grad, dst, GradTag(micro_batch));
}

absl::Status RecvGrad(dist::ProcessGroup& group, const Tensor& grad, int src, int micro_batch) {
  return group.Recv(grad, src, GradTag(micro_batch));
}

}  // namespace ringmaster::engine::parallel
