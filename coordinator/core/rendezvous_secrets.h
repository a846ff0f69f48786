#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_SECRETS_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_SECRETS_H_

// RendezvousSecrets: the secret of each job generation's rendezvous.
//
// The coordinator hands a generation's secret to the workers with the
// generation's StartRanks; a worker gives it to its ranks
// (RINGMASTER_RENDEZVOUS_SECRET) and they present it with every rendezvous
// call. The RendezvousService answers (NCCL unique ids, key-value pairs)
// only callers presenting the secret of the generation they name;
// others get PERMISSION_DENIED.
//
// A generation's secret is HMAC-SHA256(key, job_id "\n" generation), hex:
// unpredictable without the coordinator's random 256-bit key, different for
// every generation, and the same after a coordinator restart (the key is
// kept in <state-dir>/rendezvous.key, mode 0600), so ranks that survived a
// restart keep working without any secret being stored per job.
//
// Thread-safe: immutable.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::coordinator {

class RendezvousSecrets {
 public:
  // The key kept in `path`; a new random one is written there (0600) when
  // the file does not exist. PERMISSION_DENIED for a file others can read,
  // INVALID_ARGUMENT for one that holds no key.
  static absl::StatusOr<std::unique_ptr<RendezvousSecrets>> LoadOrCreate(const std::string& path);

  // `key`: any bytes (tests).
  explicit RendezvousSecrets(std::string key) : key_(std::move(key)) {}

  std::string For(const std::string& job_id, int64_t generation) const;

  // OK if `presented` is the generation's secret (constant time);
  // PERMISSION_DENIED otherwise, without revealing anything about the
  // generation.
  absl::Status Check(const std::string& job_id, int64_t generation, const std::string& presented) const;

 private:
  const std::string key_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_SECRETS_H_
