#include "engine/dist/nccl_args.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringmaster::engine::dist {

absl::StatusOr<ncclDataType_t> NcclDataType(DType dtype, bool reduction) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32:
      if (!reduction) return ncclInt32;
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("cannot reduce a %s tensor: reductions take f32, f16 or bf16", DTypeName(dtype)));
}

ncclRedOp_t NcclRedOp(ReduceOp op) { return op == ReduceOp::kAvg ? ncclAvg : ncclSum; }

absl::Status CheckCudaTensor(const Tensor& tensor, const char* what) {
  if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrFormat("%s is undefined", what));
  if (tensor.device() != Device::kCuda) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is a %s tensor; the NCCL group takes CUDA tensors", what, DeviceName(tensor.device())));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceScatter(const Tensor& input, const Tensor& output, int size) {
  if (input.dtype() != output.dtype()) {
    return absl::InvalidArgumentError(absl::StrFormat("input is %s but output is %s",
                                                      DTypeName(input.dtype()), DTypeName(output.dtype())));
  }
  if (input.numel() != output.numel() * size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "input %s has %d elements; it must hold %d chunks of the output's %s (%d elements)",
        ShapeString(input.shape()), input.numel(), size, ShapeString(output.shape()), output.numel() * size));
  }
  return absl::OkStatus();
}

absl::Status CheckAllGather(const Tensor& input, const Tensor& output, int size) {
  if (input.dtype() != output.dtype()) {
    return absl::InvalidArgumentError(absl::StrFormat("input is %s but output is %s",
                                                      DTypeName(input.dtype()), DTypeName(output.dtype())));
  }
  if (output.numel() != input.numel() * size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "output %s has %d elements; it must hold %d chunks of the input's %s (%d elements)",
        ShapeString(output.shape()), output.numel(), size, ShapeString(input.shape()), input.numel() * size));
  }
  return absl::OkStatus();
}

absl::Status CheckPeer(int peer, int size, const char* what) {
  if (peer < 0 || peer >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d is not a rank of a group of %d", what, peer, size));
  }
  return absl::OkStatus();
}

absl::Status CheckSubGroupRanks(const std::vector<int>& ranks, int size) {
  if (ranks.empty()) return absl::InvalidArgumentError("a sub-group needs at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sub-group ranks [%s] must be increasing ranks of a group of %d",
                          absl::StrJoin(ranks, ", "), size));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::dist
