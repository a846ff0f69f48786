#ifndef RINGMASTER_ENGINE_PARALLEL_GRID_H_
#define RINGMASTER_ENGINE_PARALLEL_GRID_H_

// The data x pipeline grid: a world of D * P ranks holds D replicas of the
// model, each cut into P pipeline stages.
//
// Rank layout: rank = data_index * P + stage. Consecutive ranks are the
// consecutive stages of one replica, so with ranks numbered contiguously per
// node and ranks_per_node a multiple of P (or P a multiple of ranks_per_node),
// a replica's pipeline neighbours share a node. That is where the traffic is
// latency-critical: activations and their gradients cross every stage
// boundary for every micro-batch, on the step's critical path (the bubble
// grows with every microsecond of it). The data-parallel all-reduce of a
// stage's gradients crosses nodes instead: once per step, bandwidth-bound and
// overlapped with the backward. (It is also what the spec says: consecutive
// stages on consecutive ranks.)
//
// Sub-groups, built with ProcessGroup::NewGroup — every rank creates them all,
// in this order: the data-parallel group of stage 0, 1, .., P-1 (the D ranks
// holding that stage, rank in the group = data index), then the pipeline group
// of replica 0, 1, .., D-1 (its P stages, rank in the group = stage).
// Each rank keeps the two it belongs to.
//
// GridLayout is a value (thread-safe). Grid owns its sub-groups; it is used
// by the thread that drives this rank (the groups' own rules apply).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rank_layout.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::parallel {

struct GridCoord {
  int data = 0;   // replica index in [0, D)
  int stage = 0;  // pipeline stage in [0, P)
  bool operator==(const GridCoord& o) const { return data == o.data && stage == o.stage; }
};

class GridLayout {
 public:
  // INVALID_ARGUMENT unless data >= 1, pipeline >= 1 and data * pipeline == world_size.
  static absl::StatusOr<GridLayout> Create(int world_size, int data, int pipeline);

  int data() const { return data_; }
  int pipeline() const { return pipeline_; }
  int world_size() const { return data_ * pipeline_; }
  // common/rank_layout.h: the coordinator numbers ranks the same way.
  int RankOf(GridCoord coord) const { return GlobalRankOf({coord.data, coord.stage}, pipeline_); }
  GridCoord CoordOf(int rank) const {
    const GridPosition p = GridPositionOf(rank, pipeline_);
    return {p.data, p.pipeline};
  }
  // The ranks holding `stage`, by data index (a data-parallel group).
  std::vector<int> DataGroupRanks(int stage) const;
  // The stages of replica `data`, in stage order (a pipeline group).
  std::vector<int> PipelineGroupRanks(int data) const;

 private:
  GridLayout(int data, int pipeline) : data_(data), pipeline_(pipeline) {}
  int data_, pipeline_;
};

class Grid {
 public:
  // Collective over `world` (every rank calls it with the same D and P).
  // `coord` is this rank's place as its rank context states it (the
  // coordinator assigned it); INVALID_ARGUMENT when it is not world.rank()'s
  // place in a D x P grid.
  static absl::StatusOr<std::unique_ptr<Grid>> Create(dist::ProcessGroup& world, int data, int pipeline,
                                                      GridCoord coord);

  const GridLayout& layout() const { return layout_; }
  GridCoord coord() const { return coord_; }
  // The ranks holding this rank's stage; rank() = data index.
  dist::ProcessGroup& data_group() { return *data_group_; }
  // This replica's stages; rank() = stage.
  dist::ProcessGroup& pipeline_group() { return *pipeline_group_; }

 private:
  Grid(GridLayout layout, GridCoord coord) : layout_(layout), coord_(coord) {}

  GridLayout layout_;
  GridCoord coord_;
  std::unique_ptr<dist::ProcessGroup> data_group_;
  std::unique_ptr<dist::ProcessGroup> pipeline_group_;
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_GRID_H_
