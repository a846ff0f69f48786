#include "engine/dist/nccl_args.h"

#include "absl/strings/str_format.h"

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

}  // namespace ringmaster::engine::dist
