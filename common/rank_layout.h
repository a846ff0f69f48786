#ifndef RINGMASTER_COMMON_RANK_LAYOUT_H_
#define RINGMASTER_COMMON_RANK_LAYOUT_H_

// The one definition of where a rank sits in a job's data x pipeline grid,
// shared by the coordinator (which assigns ranks) and the trainer (which
// builds its groups from them, and numbers ranks started by hand):
//
//   global_rank = data_rank x pipeline + pipeline_rank
//   local_rank  = global_rank % ranks_per_node,  node_rank = global_rank / ranks_per_node
//
// so a replica's stages sit on consecutive ranks, and with ranks_per_node a
// multiple of pipeline a whole pipeline stays on one node. Pure functions.

#include <cstdint>

namespace ringmaster {

struct GridPosition {
  int32_t data = 0;      // replica, in [0, data)
  int32_t pipeline = 0;  // stage, in [0, pipeline)
  bool operator==(const GridPosition& o) const { return data == o.data && pipeline == o.pipeline; }
};

// `pipeline` >= 1.
inline GridPosition GridPositionOf(int32_t global_rank, int32_t pipeline) {
  return {global_rank / pipeline, global_rank % pipeline};
}

inline int32_t GlobalRankOf(GridPosition position, int32_t pipeline) {
  return position.data * pipeline + position.pipeline;
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_RANK_LAYOUT_H_
