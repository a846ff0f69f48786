#ifndef RINGMASTER_ENGINE_DIST_STORE_H_
#define RINGMASTER_ENGINE_DIST_STORE_H_

// Store: the key-value rendezvous the ranks of a job generation meet through —
// Gloo exchanges its connection addresses in it, rank 0 publishes the NCCL
// unique id in it. Implementations: FileStore (a shared directory; one node),
// TcpStore (a server on rank 0's host), and the coordinator's
// RendezvousService through the worker.
//
// Keys are scoped by the caller (prefix with job and generation). Values are
// bytes. Thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster::engine::dist {

class Store {
 public:
  virtual ~Store() = default;
  // Sets `key` to `value` (overwrites).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set;
  // DEADLINE_EXCEEDED naming the key otherwise.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  // Adds `delta` to the integer at `key` (0 if unset); returns the new value.
  // Atomic across all clients (barriers count arrivals with it).
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Waits until every key is set; DEADLINE_EXCEEDED naming the missing ones.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_STORE_H_
