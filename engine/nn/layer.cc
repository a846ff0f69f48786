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
  if (x.dtype() != DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat(layer, ": input must be f32, got ", DTypeName(x.dtype())));
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::nn
