#include "coordinator/core/rank_layout.h"

#include "absl/strings/str_cat.h"
#include "common/rank_layout.h"

namespace ringmaster::coordinator {

absl::StatusOr<v1::Placement> BuildPlacement(int64_t generation, int32_t ranks_per_node, int32_t data,
                                             int32_t pipeline, const std::vector<NodeGrant>& nodes,
                                             bool cuda) {
  const int32_t n = static_cast<int32_t>(nodes.size());
  if (n < 1 || ranks_per_node < 1 || data < 1 || pipeline < 1) {
    return absl::InvalidArgumentError("placement: nodes, ranks_per_node, data and pipeline must be >= 1");
  }
  const int64_t world = int64_t{n} * ranks_per_node;
  if (int64_t{data} * pipeline != world) {
    return absl::InvalidArgumentError(absl::StrCat("placement: data (", data, ") x pipeline (", pipeline,
                                                   ") must equal nodes (", n, ") x ranks_per_node (",
                                                   ranks_per_node, ")"));
  }
  v1::Placement p;
  p.set_generation(generation);
  p.set_world_size(static_cast<int32_t>(world));
  p.set_data_parallel_size(data);
  p.set_pipeline_parallel_size(pipeline);
  p.set_nodes(n);
  p.set_ranks_per_node(ranks_per_node);
  for (int32_t node_rank = 0; node_rank < n; ++node_rank) {
    const NodeGrant& grant = nodes[node_rank];
    if (cuda && static_cast<int32_t>(grant.gpu_uuids.size()) != ranks_per_node) {
      return absl::InvalidArgumentError(absl::StrCat("placement: node ", grant.node_id, " was granted ",
                                                     grant.gpu_uuids.size(), " GPUs for ", ranks_per_node,
                                                     " ranks"));
    }
    for (int32_t local = 0; local < ranks_per_node; ++local) {
      const int32_t global = node_rank * ranks_per_node + local;
      v1::RankAssignment* r = p.add_ranks();
      r->set_global_rank(global);
      r->set_local_rank(local);
      r->set_node_rank(node_rank);
      r->set_node_id(grant.node_id);
      r->set_hostname(grant.hostname);
      const GridPosition position = GridPositionOf(global, pipeline);
      r->set_pipeline_rank(position.pipeline);
      r->set_data_rank(position.data);
      if (cuda) r->set_gpu_uuid(grant.gpu_uuids[local]);
    }
  }
  return p;
}

}  // namespace ringmaster::coordinator
