#include "engine/parallel/bucket.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::parallel {
namespace {

// dst <- src, converting between f32, f16 and bf16.
void CopyOrConvert(Backend& backend, const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    backend.Copy(src, dst);
  } else {
    backend.Convert(src, dst);
  }
}

}  // namespace

const char* GradCompressionName(GradCompression c) {
  switch (c) {
    case GradCompression::kNone:
      return "none";
    case GradCompression::kFp16:
      return "fp16";
    case GradCompression::kBf16:
      return "bf16";
  }
  return "unknown";
}

absl::StatusOr<GradCompression> ParseGradCompression(absl::string_view name) {
  for (GradCompression c : {GradCompression::kNone, GradCompression::kFp16, GradCompression::kBf16}) {
    if (name == GradCompressionName(c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown gradient compression \"", name, "\"; expected none, fp16 or bf16"));
}

DType WireDType(GradCompression c) {
  switch (c) {
    case GradCompression::kFp16:
      return DType::kF16;
    case GradCompression::kBf16:
      return DType::kBF16;
    case GradCompression::kNone:
      break;
  }
  return DType::kF32;
}

std::vector<std::vector<int>> GroupBySize(const std::vector<int64_t>& numels, int64_t cap_bytes) {
  std::vector<std::vector<int>> groups;
  std::vector<int> current;
  int64_t bytes = 0;
  for (int i = 0; i < static_cast<int>(numels.size()); ++i) {
    current.push_back(i);
    bytes += numels[i] * static_cast<int64_t>(sizeof(float));
    if (bytes >= cap_bytes) {
      groups.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
  }
  if (!current.empty()) groups.push_back(std::move(current));
  return groups;
}

absl::StatusOr<std::vector<BucketPlan>> PlanBuckets(const ParameterList& params, const std::vector<int>& first_block,
                                                    int64_t bucket_bytes) {
  if (bucket_bytes < kMinBucketBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_bytes must be at least ", kMinBucketBytes, ", got ", bucket_bytes));
  }
  if (first_block.size() != params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(first_block.size(), " block indices for ", params.size(), " parameters"));
  }
  const int n = static_cast<int>(params.size());
  std::vector<int64_t> numels;  // reverse list order
  for (int i = n - 1; i >= 0; --i) numels.push_back(params[i]->grad.numel());
  std::vector<BucketPlan> plans;
  for (const std::vector<int>& group : GroupBySize(numels, bucket_bytes)) {
    BucketPlan plan;
    plan.ready_block = first_block[n - 1 - group.front()];
    for (int j : group) {
      const int i = n - 1 - j;
      plan.entries.push_back({params[i], plan.numel});
      plan.numel += params[i]->grad.numel();
      plan.ready_block = std::min(plan.ready_block, first_block[i]);
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

GradBucket::GradBucket(Backend& backend, BucketPlan plan, GradCompression compression)
    : backend_(backend), plan_(std::move(plan)) {
  flat_ = backend_.Zeros({plan_.numel}, WireDType(compression));
}

void GradBucket::Flatten() {
  for (const BucketEntry& e : plan_.entries) {
    CopyOrConvert(backend_, e.param->grad, flat_.Slice1D(e.offset, e.param->grad.numel()));
  }
}

void GradBucket::Unflatten() {
  for (const BucketEntry& e : plan_.entries) {
    CopyOrConvert(backend_, flat_.Slice1D(e.offset, e.param->grad.numel()), e.param->grad);
  }
}

}  // namespace ringmaster::engine::parallel
