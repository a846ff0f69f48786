#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

absl::Status CheckInput(absl::string_view layer, const Tensor& x, int rank, int dim, int64_t size) {
  if (!x.defined()) return absl::InvalidArgumentError(absl::StrCat(layer, ": undefined input"));
  if (rank >= 0 && x.rank() != rank)
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": expected a rank-", rank, " input, got ", ShapeString(x.shape())));
  if (x.rank() == 0 || (dim < 0 ? -dim : dim + 1) > x.rank())
    return absl::InvalidArgumentError(absl::StrCat(layer, ": input ", ShapeString(x.shape()), " has no dimension ", dim));
  if (size >= 0 && x.dim(dim) != size)
    return absl::InvalidArgumentError(absl::StrCat(layer, ": input ", ShapeString(x.shape()), " needs size ", size,
                                                   " in dimension ", dim));
  if (x.dtype() == DType::kI32)
    return absl::InvalidArgumentError(absl::StrCat(layer, ": input must be a float tensor, got i32"));
  return absl::OkStatus();
}

Tensor AsActivation(Backend& backend, const Tensor& x) {
  if (!x.defined() || x.dtype() == DType::kI32) return x;
  const bool round = backend.activation_dtype() == DType::kF32 && backend.compute_dtype() != DType::kF32;
  if (x.dtype() == backend.activation_dtype() && !round) return x;
  Tensor stored = backend.EmptyActivation(x.shape());
  backend.Convert(x, stored);
  if (round) backend.RoundInPlace(stored, backend.compute_dtype());
  return stored;
}

void RefreshOperands(Backend& backend, const ParameterList& params) {
  for (Parameter* p : params) {
    if (p->operand_copy.defined()) backend.Convert(p->value, p->operand_copy);
  }
}

}  // namespace ringmaster::engine::nn
