#include "engine/parallel/zero.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::engine::parallel {

absl::StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(const optim::OptimizerConfig& config,
                                                                     const ParameterList& params,
                                                                     dist::ProcessGroup& group, Backend& backend,
                                                                     Clock* clock) {
  for (const Parameter* p : params) {
    if (p == nullptr || !p->value.defined() || !p->grad.defined()) {
      return absl::InvalidArgumentError("zero: every parameter needs a value and a grad tensor");
    }
  }
  std::unique_ptr<ZeroOptimizer> zero(
      new ZeroOptimizer(params, group, backend, clock != nullptr ? *clock : *Clock::Real()));
  optim::ShardSpec shard;
  shard.ranges = zero->ranges_;
  ZeroOptimizer* self = zero.get();
  shard.reduce_norms = [self](std::vector<double>& partial) { return self->SumOverRanks(partial); };
  optim::DeviceZerosFn zeros;  // CUDA: the state from the backend's caching allocator
  if (backend.device() == Device::kCuda) zeros = [&backend](const Shape& shape) { return backend.Zeros(shape); };
  ASSIGN_OR_RETURN(zero->optimizer_, optim::Optimizer::Create(config, params, std::move(shard), std::move(zeros)));
  return zero;
}

ZeroOptimizer::ZeroOptimizer(const ParameterList& params, dist::ProcessGroup& group, Backend& backend, Clock& clock)
    : params_(params), group_(group), backend_(backend), clock_(clock) {
  for (const Parameter* p : params_) {
    offsets_.push_back(total_);
    total_ += p->value.numel();
  }
  const int n = group_.size();
  shard_size_ = (total_ + n - 1) / n;
  shard_begin_ = std::min(total_, group_.rank() * shard_size_);
  shard_end_ = std::min(total_, shard_begin_ + shard_size_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t begin = std::clamp(shard_begin_ - offsets_[i], int64_t{0}, params_[i]->value.numel());
    const int64_t end = std::clamp(shard_end_ - offsets_[i], int64_t{0}, params_[i]->value.numel());
    ranges_.push_back({begin, end - begin});
  }
  flat_ = backend_.Zeros({shard_size_ * n});
  shard_ = backend_.Zeros({shard_size_});
}

template <typename Op>
absl::Status ZeroOptimizer::Timed(Op op) {
  const absl::Time start = clock_.Now();
  absl::Status status = op();
  comm_seconds_ += absl::ToDoubleSeconds(clock_.Now() - start);
  return status;
}

void ZeroOptimizer::CopyShard(bool to_params, bool grads) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const optim::ParamRange& r = ranges_[i];
    if (r.count == 0) continue;
    const Tensor& t = grads ? params_[i]->grad : params_[i]->value;
    const Tensor in_param = t.Slice1D(r.offset, r.count);
    const Tensor in_shard = shard_.Slice1D(offsets_[i] + r.offset - shard_begin_, r.count);
    if (to_params) {
      backend_.Copy(in_shard, in_param);
    } else {
      backend_.Copy(in_param, in_shard);
    }
  }
}

absl::Status ZeroOptimizer::ReduceScatterGradients() {
  comm_seconds_ = 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    backend_.Copy(params_[i]->grad, flat_.Slice1D(offsets_[i], params_[i]->grad.numel()));
  }
  // The padding [T, N S) is reduced too; zero it (the last all-gather wrote there).
  if (total_ < flat_.numel()) backend_.Fill(flat_.Slice1D(total_, flat_.numel() - total_), 0.0f);
  RETURN_IF_ERROR(Timed([&] { return group_.ReduceScatter(flat_, shard_, dist::ReduceOp::kAvg); }));
  CopyShard(/*to_params=*/true, /*grads=*/true);
  reduced_ = true;
  return absl::OkStatus();
}

absl::Status ZeroOptimizer::SumOverRanks(std::vector<double>& partial) {
  const int n = group_.size();
  const int64_t words = static_cast<int64_t>(partial.size()) * 2;  // an fp64 travels as two i32
  if (words == 0) return absl::OkStatus();
  Tensor mine = Tensor::Empty({words}, DType::kI32);
  std::memcpy(mine.raw(), partial.data(), partial.size() * sizeof(double));  // host memory
  Tensor all;
  if (backend_.device() == Device::kCpu) {
    all = Tensor::Empty({words * n}, DType::kI32);
    RETURN_IF_ERROR(Timed([&] { return group_.AllGather(mine, all); }));
  } else {  // the group moves device memory
    Tensor device_all = backend_.Empty({words * n}, DType::kI32);
    const Tensor device_mine = backend_.ToDevice(mine);
    RETURN_IF_ERROR(Timed([&] { return group_.AllGather(device_mine, device_all); }));
    all = backend_.ToHost(device_all);
  }
  std::vector<double> sum(partial.size(), 0.0), rank_values(partial.size());
  for (int r = 0; r < n; ++r) {
    std::memcpy(rank_values.data(), static_cast<const char*>(all.raw()) + r * partial.size() * sizeof(double),
                partial.size() * sizeof(double));
    for (size_t i = 0; i < partial.size(); ++i) sum[i] += rank_values[i];
  }
  partial = std::move(sum);
  return absl::OkStatus();
}

absl::StatusOr<double> ZeroOptimizer::GradSumSquares() {
  if (!reduced_) return absl::FailedPreconditionError("zero: GradSumSquares before ReduceScatterGradients");
  std::vector<double> sum = {0.0};
  const Tensor shard = backend_.device() == Device::kCpu ? shard_ : backend_.ToHost(shard_);
  const float* g = shard.f32();
  for (int64_t i = 0; i < shard_end_ - shard_begin_; ++i) sum[0] += static_cast<double>(g[i]) * g[i];
  RETURN_IF_ERROR(SumOverRanks(sum));
  return sum[0];
}

absl::Status ZeroOptimizer::Step(float lr, float grad_scale) {
  if (!reduced_) return absl::FailedPreconditionError("zero: Step before ReduceScatterGradients");
  RETURN_IF_ERROR(optimizer_->Step(lr, grad_scale));
  CopyShard(/*to_params=*/false, /*grads=*/false);
  RETURN_IF_ERROR(Timed([&] { return group_.AllGather(shard_, flat_); }));
  for (size_t i = 0; i < params_.size(); ++i) {
    backend_.Copy(flat_.Slice1D(offsets_[i], params_[i]->value.numel()), params_[i]->value);
  }
  reduced_ = false;
  return absl::OkStatus();
}

void ZeroOptimizer::ZeroGrad() {
  optimizer_->ZeroGrad();
  reduced_ = false;
}

}  // namespace ringmaster::engine::parallel
