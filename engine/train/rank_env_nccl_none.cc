// A build without CUDA: no NCCL world.
#include "engine/train/rank_env.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::Store& /*store*/, const RankEnv& /*env*/,
                                                                    int /*device*/, absl::Duration /*timeout*/) {
  return absl::FailedPreconditionError("an NCCL world needs CUDA, and this trainer was built without it");
}

}  // namespace ringmaster::engine
