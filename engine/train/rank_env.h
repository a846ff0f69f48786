#ifndef RINGMASTER_ENGINE_TRAIN_RANK_ENV_H_
#define RINGMASTER_ENGINE_TRAIN_RANK_ENV_H_

// Who this trainer process is in its job, and how it meets the other ranks:
// from flags, else from the environment the launcher or the worker sets
// (RINGMASTER_RANK, RINGMASTER_WORLD_SIZE, RINGMASTER_LOCAL_RANK,
// RINGMASTER_RENDEZVOUS). The rendezvous is "file:DIR" (a directory every rank
// can reach: one node) or "tcp:HOST:PORT" (rank 0 serves the store there).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/process_group.h"
#include "engine/dist/store.h"

namespace ringmaster::engine {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string rendezvous;
  // Scopes the store's keys (job and generation).
  std::string key_prefix = "ringmaster";
};

// Fills the fields left at their defaults (rank -1, world 0, ...) from the
// environment. INVALID_ARGUMENT naming the variable or flag for a bad value
// (rank outside [0, world), a world > 1 without a rendezvous).
absl::StatusOr<RankEnv> ResolveRankEnv(int rank, int world_size, int local_rank, const std::string& rendezvous);

// How the ranks communicate: Gloo over host memory (the CPU backend), or NCCL
// on CUDA device `device` (one GPU per rank), with the unique id exchanged
// through the same store (the coordinator's, under grpc:).
struct WorldTransport {
  bool nccl = false;
  int device = 0;
};

// The job's world: a Gloo (or NCCL) process group over the store named by
// env.rendezvous. The returned group owns its store. NCCL in a build without
// CUDA: FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> JoinWorld(const RankEnv& env, absl::Duration timeout,
                                                              const WorldTransport& transport = {});

// rank_env_nccl.cc (a build with CUDA) or rank_env_nccl_none.cc.
absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::Store& store, const RankEnv& env,
                                                                    int device, absl::Duration timeout);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_RANK_ENV_H_
