#ifndef RINGMASTER_COORDINATOR_RANK_LAYOUT_H_
#define RINGMASTER_COORDINATOR_RANK_LAYOUT_H_

// Rank layout of a generation: which rank runs where and what it is. Pure
// functions; thread-safe.
//
// With N nodes (node_rank 0..N-1, in the scheduler's order), R ranks per
// node, and a data x pipeline grid (data x pipeline = N x R):
//   global_rank   = node_rank x R + local_rank      ranks contiguous per node
//   local_rank    = global_rank % R                 CUDA: GPU gpu_uuids[local_rank]
//   pipeline_rank = global_rank % pipeline          stage
//   data_rank     = global_rank / pipeline          replica
// so a replica's stages sit on consecutive ranks (global_rank = data_rank x
// pipeline + pipeline_rank, as proto/job.proto states), and with
// R a multiple of pipeline a whole pipeline stays on one node (its
// point-to-point traffic never crosses the network).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/capacity.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

// INVALID_ARGUMENT when the grid does not match the gang (data x pipeline !=
// nodes x ranks_per_node), or a CUDA grant does not carry R GPUs.
absl::StatusOr<v1::Placement> BuildPlacement(int64_t generation, int32_t ranks_per_node, int32_t data,
                                             int32_t pipeline, const std::vector<NodeGrant>& nodes,
                                             bool cuda);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RANK_LAYOUT_H_
