#include "engine/dist/collective_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/check.h"

namespace ringmaster::engine::dist {

std::string GroupName(absl::string_view base, int size) {
  return absl::StrCat(base, "[", size, size == 1 ? " rank]" : " ranks]");
}

std::string OpContext(absl::string_view op, const ProcessGroup& group) {
  return absl::StrCat(op, " on ", group.name(), " rank ", group.rank(), ": ");
}

absl::Status OpError(absl::StatusCode code, absl::string_view op, const ProcessGroup& group,
                     absl::string_view detail) {
  return absl::Status(code, absl::StrCat(OpContext(op, group), detail));
}

absl::Status CheckHostTensor(absl::string_view op, const ProcessGroup& group, const Tensor& tensor,
                             absl::string_view what) {
  if (!tensor.defined()) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat(what, " tensor is undefined"));
  }
  if (tensor.device() != Device::kCpu) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat(what, " tensor is on ", DeviceName(tensor.device()),
                                "; this group serves host tensors"));
  }
  return absl::OkStatus();
}

absl::Status CheckReducible(absl::string_view op, const ProcessGroup& group, const Tensor& tensor,
                            absl::string_view what) {
  absl::Status status = CheckHostTensor(op, group, tensor, what);
  if (!status.ok()) return status;
  if (tensor.dtype() == DType::kI32) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat(what, " tensor has dtype i32; reductions take f32, f16 or bf16"));
  }
  return absl::OkStatus();
}

absl::Status CheckChunked(absl::string_view op, const ProcessGroup& group, const Tensor& whole,
                          const Tensor& chunk) {
  if (whole.dtype() != chunk.dtype()) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat("dtypes differ: ", DTypeName(whole.dtype()), " vs ",
                                DTypeName(chunk.dtype())));
  }
  if (whole.numel() != chunk.numel() * group.size()) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat("expected ", group.size(), " x ", chunk.numel(), " = ",
                                chunk.numel() * group.size(), " elements in the ", group.size(),
                                "-chunk tensor ", ShapeString(whole.shape()), ", got ",
                                whole.numel()));
  }
  return absl::OkStatus();
}

absl::Status CheckPeer(absl::string_view op, const ProcessGroup& group, int rank,
                       absl::string_view what) {
  if (rank < 0 || rank >= group.size()) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat(what, " ", rank, " is not a rank of the group (0..",
                                group.size() - 1, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckOtherRank(absl::string_view op, const ProcessGroup& group, int rank,
                            absl::string_view what) {
  absl::Status status = CheckPeer(op, group, rank, what);
  if (!status.ok()) return status;
  if (rank == group.rank()) {
    return OpError(absl::StatusCode::kInvalidArgument, op, group,
                   absl::StrCat(what, " ", rank, " is this rank itself"));
  }
  return absl::OkStatus();
}

absl::Status CheckSubgroupRanks(const ProcessGroup& group, const std::vector<int>& ranks) {
  if (ranks.empty()) {
    return OpError(absl::StatusCode::kInvalidArgument, "new_group", group, "empty rank list");
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    bool in_range = ranks[i] >= 0 && ranks[i] < group.size();
    bool increasing = i == 0 || ranks[i] > ranks[i - 1];
    if (!in_range || !increasing) {
      return OpError(absl::StatusCode::kInvalidArgument, "new_group", group,
                     absl::StrCat("ranks [", absl::StrJoin(ranks, ", "),
                                  "] must be strictly increasing ranks of the group"));
    }
  }
  return absl::OkStatus();
}

void CopyToF32(const Tensor& tensor, float* out) {
  const int64_t n = tensor.numel();
  switch (tensor.dtype()) {
    case DType::kF32: {
      const float* in = tensor.f32();
      std::copy(in, in + n, out);
      return;
    }
    case DType::kF16: {
      const uint16_t* in = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* in = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  ENGINE_CHECK(false, "CopyToF32 of a non-reducible dtype {}", DTypeName(tensor.dtype()));
}

void CopyFromF32(const float* values, const Tensor& tensor) {
  const int64_t n = tensor.numel();
  switch (tensor.dtype()) {
    case DType::kF32: {
      float* out = tensor.f32();
      if (out != values) std::copy(values, values + n, out);
      return;
    }
    case DType::kF16: {
      uint16_t* out = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(values[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* out = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(values[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  ENGINE_CHECK(false, "CopyFromF32 into a non-reducible dtype {}", DTypeName(tensor.dtype()));
}

void AddF32(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void DivideF32(float* values, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) values[i] /= divisor;
}

const char* ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "avg"; }

}  // namespace ringmaster::engine::dist
