// The NCCL world of a rank on a CUDA device (a build with CUDA).
#include "common/status_macros.h"
#include "engine/dist/nccl_process_group.h"
#include "engine/train/rank_env.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::Store& store, const RankEnv& env,
                                                                    int device, absl::Duration timeout) {
  dist::NcclGroupOptions options;
  options.rank = env.rank;
  options.size = env.world_size;
  options.device = device;
  options.timeout = timeout;
  options.key_prefix = env.key_prefix + "/nccl";
  options.name = "world";
  ASSIGN_OR_RETURN(std::unique_ptr<dist::NcclProcessGroup> group, dist::NcclProcessGroup::Create(&store, options));
  return std::unique_ptr<dist::ProcessGroup>(std::move(group));
}

}  // namespace ringmaster::engine
