#ifndef RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_
#define RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_

// The NCCL unique id of a communicator, passed from its rank 0 to the other
// ranks through a UniqueIdExchange (the coordinator's rendezvous RPCs, or a
// Store). Needs no CUDA device: ncclGetUniqueId only opens NCCL's bootstrap
// socket.

#include <nccl.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/unique_id_exchange.h"

namespace ringmaster::engine::dist {

// Rank 0 creates the id (ncclGetUniqueId) and publishes it for
// `communicator` as its NCCL_UNIQUE_ID_BYTES raw bytes; the other ranks fetch
// it, waiting up to `timeout`. Errors: the exchange's (DEADLINE_EXCEEDED when
// rank 0 never publishes, naming the communicator), DATA_LOSS for an id of
// the wrong size.
absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(UniqueIdExchange& ids, const std::string& communicator, int rank,
                                                  absl::Duration timeout);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_
