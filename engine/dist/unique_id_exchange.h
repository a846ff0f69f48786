#ifndef RINGMASTER_ENGINE_DIST_UNIQUE_ID_EXCHANGE_H_
#define RINGMASTER_ENGINE_DIST_UNIQUE_ID_EXCHANGE_H_

// UniqueIdExchange: how the ranks of an NCCL communicator get its unique id.
// The communicator's rank 0 creates the id (it embeds that rank's bootstrap
// address) and publishes it; the other ranks fetch it. Implementations: the
// coordinator's rendezvous RPCs (GrpcStore: PublishNcclUniqueId /
// GetNcclUniqueId, validated and fenced per generation; what a worker's
// ranks use), and StoreUniqueIdExchange over a key-value Store (ranks
// started by hand on a file: or tcp: rendezvous). Thread-safe.

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/store.h"

namespace ringmaster::engine::dist {

class UniqueIdExchange {
 public:
  virtual ~UniqueIdExchange() = default;
  // Publishes the id of `communicator` (a name unique within the job's
  // generation, e.g. "world"). Publishing the same bytes again is OK.
  virtual absl::Status Publish(const std::string& communicator, const std::string& id) = 0;
  // The id of `communicator`, waiting up to `timeout` for it to be
  // published; DEADLINE_EXCEEDED otherwise.
  virtual absl::StatusOr<std::string> Fetch(const std::string& communicator, absl::Duration timeout) = 0;
};

// Over a Store: the id is the value of "[<prefix>/]<communicator>/nccl_unique_id".
class StoreUniqueIdExchange final : public UniqueIdExchange {
 public:
  // `store` must outlive this; `prefix` scopes the keys (a job's, by hand).
  explicit StoreUniqueIdExchange(Store* store, std::string prefix = "")
      : store_(store), prefix_(std::move(prefix)) {}
  std::string Key(const std::string& communicator) const {
    return (prefix_.empty() ? "" : prefix_ + "/") + communicator + "/nccl_unique_id";
  }
  absl::Status Publish(const std::string& communicator, const std::string& id) override {
    return store_->Set(Key(communicator), id);
  }
  absl::StatusOr<std::string> Fetch(const std::string& communicator, absl::Duration timeout) override {
    return store_->Get(Key(communicator), timeout);
  }

 private:
  Store* const store_;
  const std::string prefix_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_UNIQUE_ID_EXCHANGE_H_
