#include "engine/parallel/stage_partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::parallel {
namespace {

absl::Status CheckStageCount(int num_blocks, int num_stages) {
  if (num_stages < 1)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: stages must be >= 1, got ", num_stages));
  if (num_stages > num_blocks)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: ", num_stages, " stages need at least ", num_stages,
                                                   " blocks; the model has ", num_blocks));
  return absl::OkStatus();
}

}  // namespace

std::string PartitionString(const StagePartition& partition) {
  std::string out;
  for (const StageRange& r : partition) absl::StrAppend(&out, out.empty() ? "" : " ", "[", r.begin, ", ", r.end, ")");
  return out;
}

absl::StatusOr<StagePartition> PartitionFromBoundaries(int num_blocks, int num_stages,
                                                       const std::vector<int>& boundaries) {
  if (absl::Status s = CheckStageCount(num_blocks, num_stages); !s.ok()) return s;
  if (static_cast<int>(boundaries.size()) != num_stages - 1)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: ", num_stages, " stages need ", num_stages - 1,
                                                   " stage boundaries, got ", boundaries.size()));
  StagePartition out;
  int begin = 0;
  for (int b : boundaries) {
    if (b <= begin || b >= num_blocks)
      return absl::InvalidArgumentError(absl::StrCat("pipeline: stage boundaries must increase strictly within (0, ",
                                                     num_blocks, "); got ", b, " after ", begin));
    out.push_back({begin, b});
    begin = b;
  }
  out.push_back({begin, num_blocks});
  return out;
}

absl::StatusOr<StagePartition> PartitionBalanced(const std::vector<double>& block_costs, int num_stages) {
  const int n = static_cast<int>(block_costs.size());
  if (absl::Status s = CheckStageCount(n, num_stages); !s.ok()) return s;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(block_costs[i]) || block_costs[i] < 0)
      return absl::InvalidArgumentError(absl::StrCat("pipeline: block ", i, " has cost ", block_costs[i]));
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + block_costs[i];
  auto cost = [&](int b, int e) { return prefix[e] - prefix[b]; };
  // best[s][i]: the smallest bottleneck of blocks [i, n) split into stages s .. P-1;
  // cut[s][i]: where stage s ends in that split (the smallest optimal end).
  const int p = num_stages;
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(p, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(p, std::vector<int>(n + 1, -1));
  for (int i = 0; i < n; ++i) {
    best[p - 1][i] = cost(i, n);
    cut[p - 1][i] = n;
  }
  for (int s = p - 2; s >= 0; --s) {
    const int stages_after = p - s - 1;
    for (int i = s; i + stages_after < n; ++i) {
      for (int e = i + 1; e + stages_after <= n; ++e) {
        double v = std::max(cost(i, e), best[s + 1][e]);
        if (v < best[s][i]) {  // strict: keeps the smallest end among equals
          best[s][i] = v;
          cut[s][i] = e;
        }
      }
    }
  }
  StagePartition out;
  int begin = 0;
  for (int s = 0; s < p; ++s) {
    int end = cut[s][begin];
    out.push_back({begin, end});
    begin = end;
  }
  return out;
}

std::vector<double> StageCosts(const std::vector<double>& block_costs, const StagePartition& partition) {
  std::vector<double> out;
  for (const StageRange& r : partition) {
    double c = 0.0;
    for (int i = r.begin; i < r.end && i < static_cast<int>(block_costs.size()); ++i) c += block_costs[i];
    out.push_back(c);
  }
  return out;
}

}  // namespace ringmaster::engine::parallel
