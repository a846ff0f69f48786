#include "engine/parallel/grid.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::engine::parallel {

absl::StatusOr<GridLayout> GridLayout::Create(int world_size, int data, int pipeline) {
  if (data < 1 || pipeline < 1 || static_cast<int64_t>(data) * pipeline != world_size)
    return absl::InvalidArgumentError(absl::StrCat("grid: data ", data, " x pipeline ", pipeline,
                                                   " must be positive and multiply to the world size ", world_size));
  return GridLayout(data, pipeline);
}

std::vector<int> GridLayout::DataGroupRanks(int stage) const {
  std::vector<int> ranks;
  for (int d = 0; d < data_; ++d) ranks.push_back(RankOf({d, stage}));
  return ranks;
}

std::vector<int> GridLayout::PipelineGroupRanks(int data) const {
  std::vector<int> ranks;
  for (int s = 0; s < pipeline_; ++s) ranks.push_back(RankOf({data, s}));
  return ranks;
}

absl::StatusOr<std::unique_ptr<Grid>> Grid::Create(dist::ProcessGroup& world, int data, int pipeline,
                                                   GridCoord coord) {
  ASSIGN_OR_RETURN(GridLayout layout, GridLayout::Create(world.size(), data, pipeline));
  if (coord.data < 0 || coord.data >= data || coord.stage < 0 || coord.stage >= pipeline ||
      layout.RankOf(coord) != world.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("grid: data_rank ", coord.data, ", pipeline_rank ", coord.stage,
                                                   " is not the place of rank ", world.rank(), " in a data ", data,
                                                   " x pipeline ", pipeline, " grid"));
  }
  std::unique_ptr<Grid> grid(new Grid(layout, coord));
  for (int s = 0; s < pipeline; ++s) {
    ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> g,
                     world.NewGroup(layout.DataGroupRanks(s), absl::StrCat("dp.stage", s)));
    if (g != nullptr) grid->data_group_ = std::move(g);
  }
  for (int d = 0; d < data; ++d) {
    ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> g,
                     world.NewGroup(layout.PipelineGroupRanks(d), absl::StrCat("pp.replica", d)));
    if (g != nullptr) grid->pipeline_group_ = std::move(g);
  }
  if (grid->data_group_ == nullptr || grid->pipeline_group_ == nullptr)
    return absl::InternalError(absl::StrCat("grid: rank ", world.rank(), " got no data or pipeline group from ",
                                            world.name()));
  return grid;
}

}  // namespace ringmaster::engine::parallel
