#ifndef RINGMASTER_ENGINE_PARALLEL_BUCKET_H_
#define RINGMASTER_ENGINE_PARALLEL_BUCKET_H_

// Gradient buckets of data parallelism: which parameters are reduced together
// (the plan) and the contiguous buffer a bucket's gradients travel in.
//
// Plan (PlanBuckets): parameters are taken in REVERSE order of the model's
// parameter list — the last layer's first, the order backward finishes them —
// and appended to the current bucket, which is closed as soon as it holds at
// least bucket_bytes of fp32 gradient (PyTorch DDP's rule: a bucket may exceed
// the cap by its last parameter; a parameter larger than the cap is a bucket
// of its own). Buckets are numbered in that order and launched in that order.
//
// GradBucket: the flat buffer of one bucket, in the wire dtype (f32, or f16 /
// bf16 with compression), element e of parameter i at offset_i + e. Flatten
// copies (converts) the parameters' grads in; Unflatten copies (converts) the
// reduced values back over the grads. Both run on the training thread through
// the backend; the buffer is handed to the communication thread in between
// (see BucketReducer). Not thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/backend.h"
#include "engine/core/parameter.h"

namespace ringmaster::engine::parallel {

// Gradient compression on the wire. kFp16/kBf16 round every gradient element
// to the format before the allreduce (the group reduces in f32 and rounds the
// average back, see process_group.h); the averaged grads keep that rounding.
enum class GradCompression { kNone, kFp16, kBf16 };

const char* GradCompressionName(GradCompression c);  // "none", "fp16", "bf16"
// Parses "none" | "fp16" | "bf16"; INVALID_ARGUMENT otherwise.
absl::StatusOr<GradCompression> ParseGradCompression(absl::string_view name);
DType WireDType(GradCompression c);

// Smallest bucket_bytes accepted (a smaller cap only multiplies the calls).
inline constexpr int64_t kMinBucketBytes = 1024;

// Groups consecutive items (of numels[i] fp32 elements each, in the order
// given) into runs holding at least cap_bytes each, the last run possibly
// less. Returns the item indices of each run. Empty items join the current run.
std::vector<std::vector<int>> GroupBySize(const std::vector<int64_t>& numels, int64_t cap_bytes);

struct BucketEntry {
  Parameter* param = nullptr;
  int64_t offset = 0;  // first element of the parameter in the bucket's buffer
};

struct BucketPlan {
  std::vector<BucketEntry> entries;  // in reverse parameter-list order
  int64_t numel = 0;
  // The bucket's gradients are final once the backward of block `ready_block`
  // (and of every later block) has run: the smallest over its parameters of
  // the lowest block that uses the parameter (shared parameters: the first).
  int ready_block = 0;
};

// params: the model's parameters in list order; first_block[i]: the lowest
// block index that uses params[i]. INVALID_ARGUMENT for bucket_bytes below
// kMinBucketBytes or mismatched lengths.
absl::StatusOr<std::vector<BucketPlan>> PlanBuckets(const ParameterList& params, const std::vector<int>& first_block,
                                                    int64_t bucket_bytes);

class GradBucket {
 public:
  // Allocates the flat buffer on the backend's device.
  GradBucket(Backend& backend, BucketPlan plan, GradCompression compression);

  const BucketPlan& plan() const { return plan_; }
  // The buffer handed to the process group: [numel] in the wire dtype.
  const Tensor& flat() const { return flat_; }
  size_t wire_bytes() const { return flat_.bytes(); }

  // flat <- the parameters' grads (converted to the wire dtype).
  void Flatten();
  // Each parameter's grad <- its part of flat (converted to f32).
  void Unflatten();

 private:
  Backend& backend_;
  BucketPlan plan_;
  Tensor flat_;
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_BUCKET_H_
