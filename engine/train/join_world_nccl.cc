// The NCCL world of a rank on a CUDA device (a build with CUDA).
#include "common/status_macros.h"
#include "engine/dist/nccl_process_group.h"
#include "engine/train/join_world.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::UniqueIdExchange& ids,
                                                                    const v1::RankContext& context,
                                                                    const JoinOptions& options) {
  dist::NcclGroupOptions group;
  group.rank = context.rank().global_rank();
  group.size = context.world().world_size();
  group.device = options.device;
  group.timeout = options.timeout;
  group.communicator = "world";
  group.name = "world";
  ASSIGN_OR_RETURN(std::unique_ptr<dist::NcclProcessGroup> created, dist::NcclProcessGroup::Create(&ids, group));
  return std::unique_ptr<dist::ProcessGroup>(std::move(created));
}

}  // namespace ringmaster::engine
