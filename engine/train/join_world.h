#ifndef RINGMASTER_ENGINE_TRAIN_JOIN_WORLD_H_
#define RINGMASTER_ENGINE_TRAIN_JOIN_WORLD_H_

// JoinWorld: a rank meets the other ranks of its generation, as its rank
// context says (rendezvous.address):
//   grpc:ADDRESS   the coordinator's RendezvousService (through the worker's
//                  socket): its key-value store for Gloo, its NCCL unique id
//                  RPCs for NCCL, every call scoped by the context's job,
//                  generation, rank and secret;
//   file:DIR       a directory every rank can reach (one node, by hand);
//   tcp:HOST:PORT  a store rank 0 serves there (by hand).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/process_group.h"
#include "engine/dist/store.h"
#include "engine/dist/unique_id_exchange.h"
#include "proto/rank_context.pb.h"

namespace ringmaster::engine {

struct JoinOptions {
  // Bounds every collective and the joining itself.
  absl::Duration timeout = absl::Minutes(5);
  // NCCL on CUDA device `device` (one GPU per rank); else Gloo over host
  // memory (the CPU backend).
  bool nccl = false;
  int device = 0;
  // Gloo: the network interface to bind (an operator's setting); empty: the
  // context's advertise_host, else the rendezvous host, else loopback.
  std::string gloo_interface;
};

// The job's world communicator ("world"). The returned group owns its
// rendezvous connection. NCCL in a build without CUDA: FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> JoinWorld(const v1::RankContext& context,
                                                              const JoinOptions& options);

// join_world_nccl.cc (a build with CUDA) or join_world_nccl_none.cc.
absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> CreateNcclWorld(dist::UniqueIdExchange& ids,
                                                                    const v1::RankContext& context,
                                                                    const JoinOptions& options);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_JOIN_WORLD_H_
