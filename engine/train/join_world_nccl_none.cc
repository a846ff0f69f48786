// A build without CUDA: no NCCL world.
#include "engine/train/join_world.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::UniqueIdExchange& /*ids*/,
                                                                    const v1::RankContext& /*context*/,
                                                                    const JoinOptions& /*options*/) {
  return absl::FailedPreconditionError("an NCCL world needs CUDA, and this trainer was built without it");
}

}  // namespace ringmaster::engine
