#ifndef RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_H_
#define RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_H_

// Stage partitioning: which consecutive blocks of a model each pipeline stage
// runs. Either from the spec's explicit boundaries (ParallelismSpec.
// stage_boundaries) or balanced by a per-block cost (stage_partition_cost.h
// estimates one: forward FLOPs counted on a sample batch). Pure functions;
// thread-safe. Every rank computes the same partition from the same inputs.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::engine::parallel {

// Blocks [begin, end) of the model.
struct StageRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool operator==(const StageRange& o) const { return begin == o.begin && end == o.end; }
};

using StagePartition = std::vector<StageRange>;

// "[0, 2) [2, 4)".
std::string PartitionString(const StagePartition& partition);

// Stage i + 1 begins at block boundaries[i]: num_stages - 1 strictly
// increasing indices in (0, num_blocks). INVALID_ARGUMENT otherwise, and when
// num_stages is not in [1, num_blocks].
absl::StatusOr<StagePartition> PartitionFromBoundaries(int num_blocks, int num_stages,
                                                       const std::vector<int>& boundaries);

// The contiguous partition of the blocks into num_stages non-empty stages that
// minimises the largest stage cost (the pipeline's bottleneck; exact, by
// dynamic programming). Among optimal partitions the earliest stages are the
// shortest (stage 0 holds the most in-flight activations under 1F1B).
// block_costs: one finite cost >= 0 per block. INVALID_ARGUMENT for a bad
// cost or num_stages not in [1, blocks].
absl::StatusOr<StagePartition> PartitionBalanced(const std::vector<double>& block_costs, int num_stages);

// The cost of each stage of `partition` (sum of its blocks' costs).
std::vector<double> StageCosts(const std::vector<double>& block_costs, const StagePartition& partition);

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_H_
