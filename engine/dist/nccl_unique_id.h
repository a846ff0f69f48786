#ifndef RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_
#define RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_

// The NCCL unique id of a communicator, passed from rank 0 to the other ranks
// through the rendezvous Store. Needs no CUDA device: ncclGetUniqueId only
// opens NCCL's bootstrap socket.

#include <nccl.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/store.h"

namespace ringmaster::engine::dist {

// The Store key of the unique id of the communicator whose keys start with
// `key_prefix` (the caller scopes it by job, generation and communicator).
std::string NcclUniqueIdKey(const std::string& key_prefix);

// Rank 0 creates the id (ncclGetUniqueId) and Sets it at `key` as its
// NCCL_UNIQUE_ID_BYTES raw bytes; the other ranks Get it, waiting up to
// `timeout`. Errors: the Store's (DEADLINE_EXCEEDED when rank 0 never
// publishes, naming the key), DATA_LOSS for a value of the wrong size.
absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(Store& store, const std::string& key, int rank,
                                                  absl::Duration timeout);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_UNIQUE_ID_H_
