#include "engine/parallel/data_parallel.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::engine::parallel {
namespace {

absl::Status ResolveBlocks(nn::Model& model, int* begin, int* end) {
  if (*end < 0) *end = model.num_blocks();
  if (*begin < 0 || *begin > *end || *end > model.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("data parallel: block range [", *begin, ", ", *end, ") outside the ",
                                                   model.num_blocks(), " blocks of ", model.name()));
  }
  return absl::OkStatus();
}

// For each parameter of blocks [begin, end), the lowest block that uses it:
// its gradient is final once that block's backward has run.
std::vector<int> FirstBlocks(nn::Model& model, const ParameterList& params, int begin, int end) {
  absl::flat_hash_map<const Parameter*, int> first;
  for (int b = begin; b < end; ++b) {
    for (Parameter* p : model.block(b).Parameters()) first.try_emplace(p, b);
  }
  std::vector<int> blocks;
  for (const Parameter* p : params) blocks.push_back(first.at(p));
  return blocks;
}

}  // namespace

absl::Status BroadcastModelState(nn::Model& model, dist::ProcessGroup& group, int root, int begin, int end,
                                 int64_t bucket_bytes) {
  RETURN_IF_ERROR(ResolveBlocks(model, &begin, &end));
  std::vector<Tensor> f32_tensors, other_tensors;
  for (Parameter* p : model.Parameters(begin, end)) {
    (p->value.dtype() == DType::kF32 ? f32_tensors : other_tensors).push_back(p->value);
  }
  for (Buffer* b : model.Buffers(begin, end)) {
    (b->value.dtype() == DType::kF32 ? f32_tensors : other_tensors).push_back(b->value);
  }
  std::vector<int64_t> numels;
  for (const Tensor& t : f32_tensors) numels.push_back(t.numel());
  Backend& backend = model.backend();
  for (const std::vector<int>& group_indices : GroupBySize(numels, std::max<int64_t>(bucket_bytes, 1))) {
    int64_t total = 0;
    for (int i : group_indices) total += numels[i];
    Tensor flat = backend.Empty({total});
    int64_t offset = 0;
    for (int i : group_indices) {
      if (group.rank() == root) backend.Copy(f32_tensors[i], flat.Slice1D(offset, numels[i]));
      offset += numels[i];
    }
    RETURN_IF_ERROR(group.Broadcast(flat, root));
    offset = 0;
    for (int i : group_indices) {
      backend.Copy(flat.Slice1D(offset, numels[i]), f32_tensors[i]);
      offset += numels[i];
    }
  }
  for (const Tensor& t : other_tensors) RETURN_IF_ERROR(group.Broadcast(t, root));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(nn::Model& model, dist::ProcessGroup& group,
                                                                   DataParallelOptions options) {
  RETURN_IF_ERROR(ResolveBlocks(model, &options.begin_block, &options.end_block));
  ParameterList params = model.Parameters(options.begin_block, options.end_block);
  ASSIGN_OR_RETURN(
      std::vector<BucketPlan> plans,
      PlanBuckets(params, FirstBlocks(model, params, options.begin_block, options.end_block), options.bucket_bytes));
  Clock& clock = options.clock != nullptr ? *options.clock : *Clock::Real();
  return std::unique_ptr<DataParallel>(new DataParallel(model, group, options, clock, std::move(plans)));
}

DataParallel::DataParallel(nn::Model& model, dist::ProcessGroup& group, DataParallelOptions options, Clock& clock,
                           std::vector<BucketPlan> plans)
    : model_(model),
      group_(group),
      options_(options),
      clock_(clock),
      plans_(std::move(plans)),
      reducer_(group, clock, options.overlap) {
  for (const BucketPlan& plan : plans_) {
    buckets_.push_back(std::make_unique<GradBucket>(model.backend(), plan, options.compression));
  }
}

DataParallel::~DataParallel() = default;  // reducer_ waits for the buckets in flight

absl::Status DataParallel::BroadcastParameters(int root) {
  if (in_flight_) {
    return absl::FailedPreconditionError("data parallel: BroadcastParameters while gradients are being reduced");
  }
  return BroadcastModelState(model_, group_, root, options_.begin_block, options_.end_block, options_.bucket_bytes);
}

void DataParallel::LaunchReady(int block) {
  while (next_bucket_ < buckets_.size() && plans_[next_bucket_].ready_block >= block) {
    GradBucket& bucket = *buckets_[next_bucket_++];
    bucket.Flatten();
    reducer_.Submit(bucket.flat());
  }
}

absl::StatusOr<Tensor> DataParallel::Backward(const Tensor& dy, bool sync, int micro_batch) {
  const int begin = options_.begin_block, end = options_.end_block;
  if (!sync) return model_.Backward(dy, begin, end, micro_batch);
  if (in_flight_) {
    return absl::FailedPreconditionError(
        "data parallel: a synchronising Backward before FinishGradients of the previous one");
  }
  in_flight_ = true;
  next_bucket_ = 0;
  Tensor g = dy;
  for (int b = end - 1; b >= begin; --b) {
    absl::StatusOr<Tensor> next = model_.Backward(g, b, b + 1, micro_batch);
    if (!next.ok()) {
      reducer_.Wait(nullptr).IgnoreError();  // let the handed-over buckets settle
      in_flight_ = false;
      return next.status();
    }
    g = *std::move(next);
    if (b == begin) backward_end_ = clock_.Now();  // before the last buckets leave
    LaunchReady(b);
  }
  if (begin == end) backward_end_ = clock_.Now();
  return g;
}

absl::Status DataParallel::FinishGradients() {
  if (!in_flight_) {
    return absl::FailedPreconditionError("data parallel: FinishGradients without a synchronising Backward");
  }
  LaunchReady(options_.begin_block);  // every bucket is ready once the first block's backward ran
  const absl::Time wait_start = clock_.Now();
  std::vector<BucketReducer::Timing> timings;
  absl::Status status = reducer_.Wait(&timings);
  const absl::Time wait_end = clock_.Now();
  in_flight_ = false;
  if (!status.ok()) return status;
  for (auto& bucket : buckets_) bucket->Unflatten();
  ComputeStats(timings, wait_end - wait_start);
  return absl::OkStatus();
}

absl::Status DataParallel::ReduceGradients() {
  if (!in_flight_) {
    in_flight_ = true;
    next_bucket_ = 0;
    backward_end_ = clock_.Now();
  }
  return FinishGradients();
}

void DataParallel::ComputeStats(const std::vector<BucketReducer::Timing>& timings, absl::Duration wait) {
  stats_ = CommStats();
  stats_.buckets = static_cast<int>(buckets_.size());
  for (const auto& bucket : buckets_) stats_.bytes += static_cast<int64_t>(bucket->wire_bytes());
  stats_.wait_seconds = absl::ToDoubleSeconds(wait);
  double overlapped = 0.0;
  for (const BucketReducer::Timing& t : timings) {
    stats_.comm_seconds += absl::ToDoubleSeconds(t.end - t.start);
    overlapped += std::max(0.0, absl::ToDoubleSeconds(std::min(t.end, backward_end_) - t.start));
  }
  if (options_.overlap && stats_.comm_seconds > 0.0) stats_.overlap_fraction = overlapped / stats_.comm_seconds;
}

}  // namespace ringmaster::engine::parallel
