#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_H_

// Rendezvous: how the ranks of one job generation find each other.
//
// Owns, per job, the state of its current generation: the NCCL unique id of
// each communicator (opaque bytes published by the communicator's rank 0:
// the id embeds that rank's bootstrap address, so only a rank can create
// it), a key-value store (what Gloo's rendezvous needs: set, get, add, wait),
// which ranks have checked in, and the generation's rendezvous deadline.
// Nothing is stored durably: a generation's rendezvous lives as long as the
// generation.
//
// Fencing: every call names (job, generation, rank). A generation older
// than the job's current one fails with FAILED_PRECONDITION ("generation 2
// of job j-3 is over; current is 3"), as does a newer one than the
// coordinator started, or a generation that has ended or failed; the rank
// must exit. BeginGeneration drops the previous generation's state.
//
// Deadlines: a blocking call (GetNcclUniqueId, KvWait) waits until the
// earliest of its timeout (zero: none) and the generation's deadline, on a
// condition variable, re-reading the injected clock whenever it wakes; a
// call still waiting when time runs out returns DEADLINE_EXCEEDED and FAILS
// THE GENERATION (it does not hang). CheckDeadlines() wakes every waiter so
// that it sees the clock move (the JobController's tick calls it; tests call
// it after advancing a FakeClock), and fails a generation whose deadline has
// passed while some rank never checked in.
//
// Completion and failure are reported to the RendezvousListener, always
// without the Rendezvous lock held, from the thread that noticed: a rank's
// call, CheckIn or CheckDeadlines. BeginGeneration and EndGeneration never
// call the listener, so they may be called under the caller's own lock.
//
// Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous_secrets.h"

namespace ringmaster::coordinator {

struct RendezvousScope {
  std::string job_id;
  int64_t generation = 0;
  int32_t rank = 0;  // global rank of the caller
  std::string secret;  // the generation's rendezvous secret, as presented
};

struct RendezvousOptions {
  size_t nccl_unique_id_bytes = 128;  // NCCL_UNIQUE_ID_BYTES; 0: any non-empty length
  size_t max_communicator_name = 128;
  size_t max_key_bytes = 512;
  size_t max_value_bytes = size_t{1} << 20;
  size_t max_wait_keys = 4096;
};

class RendezvousListener {
 public:
  virtual ~RendezvousListener() = default;
  // Every rank of the generation has checked in.
  virtual void OnRendezvousComplete(const std::string& job_id, int64_t generation) = 0;
  // The generation failed: a rank missed a deadline. Reported once.
  virtual void OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) = 0;
};

class Rendezvous {
 public:
  explicit Rendezvous(const Clock* clock, RendezvousOptions options = {});
  // Set once, before the first call; may be null (no reports).
  void SetListener(RendezvousListener* listener) { listener_ = listener; }
  // Set once, before the first call; null (the default): no secrets, every
  // caller is let in (unit tests of the rendezvous logic).
  void SetSecrets(const RendezvousSecrets* secrets) { secrets_ = secrets; }

  // The generation's secret for its StartRanks; empty without secrets.
  std::string Secret(const std::string& job_id, int64_t generation) const;
  // OK if the scope carries its generation's secret (or there are no
  // secrets); PERMISSION_DENIED otherwise. The RendezvousService checks it
  // before any rank-side call.
  absl::Status CheckSecret(const RendezvousScope& scope) const;

  // ---- the JobController's side (never calls the listener) ----

  // Starts `generation` of a job: world_size ranks, every rank must check in
  // by `deadline`. Drops an older generation's state (its waiters fail with
  // FAILED_PRECONDITION). No-op for a generation not newer than the current.
  // `already_complete`: every rank is known to have joined (a RUNNING
  // generation recovered after a coordinator restart); the deadline then
  // only bounds blocking calls.
  void BeginGeneration(const std::string& job_id, int64_t generation, int32_t world_size, absl::Time deadline,
                       bool already_complete = false);
  // Ends a generation (restart, success, cancel): its state is dropped, its
  // waiters and later calls fail with FAILED_PRECONDITION.
  void EndGeneration(const std::string& job_id, int64_t generation);

  // ---- the ranks' side (the RendezvousService adapter) ----

  // ALREADY_EXISTS if the communicator has a different id; the same bytes
  // again are OK (a retry).
  absl::Status PublishNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                   const std::string& unique_id);
  // Waits for the id (timeout zero: until the generation's deadline).
  absl::StatusOr<std::string> GetNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                              absl::Duration timeout);
  absl::Status KvSet(const RendezvousScope& scope, const std::string& key, const std::string& value);
  // nullopt: the key is not set.
  absl::StatusOr<std::optional<std::string>> KvGet(const RendezvousScope& scope, const std::string& key);
  // Adds `delta` to the key's value (decimal text; absent = 0) and returns
  // the new value. FAILED_PRECONDITION if the value is not an integer.
  absl::StatusOr<int64_t> KvAdd(const RendezvousScope& scope, const std::string& key, int64_t delta);
  // Waits until every key is set; their values, in the order of `keys`.
  absl::StatusOr<std::vector<std::string>> KvWait(const RendezvousScope& scope, const std::vector<std::string>& keys,
                                                  absl::Duration timeout);

  // A rank shows it is alive outside the rendezvous calls (its first
  // progress report). Fencing errors as for the calls above.
  absl::Status CheckIn(const RendezvousScope& scope);

  // Wakes every waiter to re-read the clock; fails generations whose
  // deadline has passed with ranks missing. Call periodically.
  void CheckDeadlines();

  // The coordinator is stopping: every blocked call returns UNAVAILABLE
  // ("the coordinator is shutting down") WITHOUT failing its generation, and
  // later blocking calls return it at once. Irreversible.
  void Shutdown();

  // Calls blocked right now (tests wait for this before advancing a clock).
  int Waiters() const;
  // Whether every rank of the generation has checked in.
  bool Complete(const std::string& job_id, int64_t generation) const;

 private:
  struct Generation {
    int64_t number = 0;
    int32_t world_size = 0;
    absl::Time deadline;
    std::map<std::string, std::string> nccl_ids;
    std::map<std::string, std::string> kv;
    std::set<int32_t> joined;
    bool complete = false;
    bool failed = false;
    std::string failure;
  };
  struct JobRendezvous {
    int64_t current = 0;             // newest generation begun or ended
    std::unique_ptr<Generation> gen;  // null once `current` ended
  };
  // A listener call to make once the lock is released.
  struct Report {
    std::string job_id;
    int64_t generation;
    bool failed;
    std::string reason;
  };

  // The caller's generation after fencing, with the caller checked in.
  absl::StatusOr<Generation*> EnterLocked(const RendezvousScope& scope, std::vector<Report>* reports);
  void FailLocked(const std::string& job_id, Generation* gen, const std::string& reason,
                  std::vector<Report>* reports);
  // Blocks until ready(gen) or the deadline; fails the generation on timeout.
  absl::Status WaitLocked(std::unique_lock<std::mutex>& lock, const RendezvousScope& scope, absl::Duration timeout,
                          const std::string& what, const std::function<bool(const Generation&)>& ready,
                          std::vector<Report>* reports);
  void Deliver(const std::vector<Report>& reports);
  absl::Status CheckKey(const std::string& key) const;

  const Clock* clock_;
  const RendezvousOptions options_;
  RendezvousListener* listener_ = nullptr;
  const RendezvousSecrets* secrets_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, JobRendezvous> jobs_;
  int waiters_ = 0;
  bool shutting_down_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_H_
