#include "engine/nn/model.h"

#include <algorithm>

#include "common/status_macros.h"

namespace ringmaster::engine::nn {

absl::Status Model::ResolveRange(int* begin, int* end) const {
  if (*end < 0) *end = num_blocks();
  if (*begin < 0 || *begin > *end || *end > num_blocks())
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": block range [", *begin, ", ", *end, ") outside [0, ", num_blocks(), ")"));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Model::Forward(const Tensor& x, bool training, int begin, int end, int micro_batch) {
  RETURN_IF_ERROR(ResolveRange(&begin, &end));
  Tensor h = x;
  for (int i = begin; i < end; ++i) {
    ASSIGN_OR_RETURN(h, blocks_[i]->Forward(h, training, micro_batch));
  }
  return h;
}

absl::StatusOr<Tensor> Model::Backward(const Tensor& dy, int begin, int end, int micro_batch) {
  RETURN_IF_ERROR(ResolveRange(&begin, &end));
  Tensor g = dy;
  for (int i = end - 1; i >= begin; --i) {
    ASSIGN_OR_RETURN(g, blocks_[i]->Backward(g, micro_batch));
  }
  return g;
}

ParameterList Model::Parameters(int begin, int end) {
  if (!ResolveRange(&begin, &end).ok()) return {};
  ParameterList out;
  for (int i = begin; i < end; ++i)
    for (Parameter* p : blocks_[i]->Parameters())
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

BufferList Model::Buffers(int begin, int end) {
  if (!ResolveRange(&begin, &end).ok()) return {};
  BufferList out;
  for (int i = begin; i < end; ++i)
    for (Buffer* b : blocks_[i]->Buffers()) out.push_back(b);
  return out;
}

void Model::ZeroGrad(int begin, int end) {
  for (Parameter* p : Parameters(begin, end)) backend_.Fill(p->grad, 0.0f);
}

void Model::SetRngKey(uint64_t key) {
  for (auto& b : blocks_) b->SetRngKey(key);
}

int64_t Model::NumParameters() {
  int64_t n = 0;
  for (Parameter* p : Parameters()) {
    const int64_t rows = p->value.rank() > 0 ? p->value.dim(0) : 1;
    n += p->real_rows >= 0 ? p->value.numel() / std::max<int64_t>(rows, 1) * p->real_rows : p->value.numel();
  }
  return n;
}

}  // namespace ringmaster::engine::nn
