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
// Waiting: GetNcclUniqueIdAsync and KvWaitAsync never block a thread. A call
// whose data is not there yet is parked (a record, no thread) and its `done`
// runs when the data arrives, from the thread of the call that set it, or
// when time runs out, from CheckDeadlines. A parked call waits until the
// earliest of its timeout (zero: none) and the generation's deadline; then it
// gets DEADLINE_EXCEEDED and FAILS THE GENERATION (it does not hang).
// CheckDeadlines() (the JobController's tick, about 4 times a second; tests
// call it after advancing a FakeClock) expires parked calls and fails a
// generation whose deadline has passed while some rank never checked in. At
// most options.max_waiters calls are parked at once; one more is answered
// RESOURCE_EXHAUSTED at once, and its caller comes back after a backoff
// (engine/dist/grpc_store.h). GetNcclUniqueId and KvWait are the same calls
// made blocking (for tests and tools).
//
// Completion and failure are reported to the RendezvousListener, always
// without the Rendezvous lock held, from the thread that noticed: a rank's
// call, CheckIn or CheckDeadlines. BeginGeneration and EndGeneration never
// call the listener, so they may be called under the caller's own lock; they
// do finish the parked calls of the generation they end (FAILED_PRECONDITION),
// so a `done` must never block nor call back into the Rendezvous.
//
// Thread-safe.

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
#include "coordinator/core/rendezvous_secrets.h"

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
  // Calls parked at once (waiting for an id or keys), over every job.
  size_t max_waiters = 65536;
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
  // What a parked call is finished with: the id (one value) or the keys'
  // values in request order; or why not.
  using WaitDone = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  // The id of `communicator`, once it is published (timeout zero: until the
  // generation's deadline). `done` is called exactly once, possibly before
  // this returns.
  void GetNcclUniqueIdAsync(const RendezvousScope& scope, const std::string& communicator, absl::Duration timeout,
                            WaitDone done);
  absl::StatusOr<std::string> GetNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                              absl::Duration timeout);
  absl::Status KvSet(const RendezvousScope& scope, const std::string& key, const std::string& value);
  // nullopt: the key is not set.
  absl::StatusOr<std::optional<std::string>> KvGet(const RendezvousScope& scope, const std::string& key);
  // Adds `delta` to the key's value (decimal text; absent = 0) and returns
  // the new value. FAILED_PRECONDITION if the value is not an integer.
  absl::StatusOr<int64_t> KvAdd(const RendezvousScope& scope, const std::string& key, int64_t delta);
  // Every key's value (in the order of `keys`) once all are set. `done` is
  // called exactly once, possibly before this returns.
  void KvWaitAsync(const RendezvousScope& scope, const std::vector<std::string>& keys, absl::Duration timeout,
                   WaitDone done);
  absl::StatusOr<std::vector<std::string>> KvWait(const RendezvousScope& scope, const std::vector<std::string>& keys,
                                                  absl::Duration timeout);

  // A rank shows it is alive outside the rendezvous calls (its first
  // progress report). Fencing errors as for the calls above.
  absl::Status CheckIn(const RendezvousScope& scope);

  // Fails generations whose deadline has passed with ranks missing, then
  // expires parked calls whose time ran out. Call periodically.
  void CheckDeadlines();

  // The coordinator is stopping: every parked call is finished with
  // UNAVAILABLE ("the coordinator is shutting down") WITHOUT failing its
  // generation, and later waiting calls get it at once. Irreversible.
  void Shutdown();

  // Calls parked right now (tests wait for this before advancing a clock).
  int Waiters() const;
  // Whether every rank of the generation has checked in.
  bool Complete(const std::string& job_id, int64_t generation) const;

 private:
  // A parked GetNcclUniqueId (communicator set) or KvWait (keys set).
  struct Waiter {
    std::string job_id;
    int64_t generation = 0;
    int32_t rank = 0;
    std::string communicator;
    std::vector<std::string> keys;
    size_t next_missing = 0;  // keys[next_missing] is the key it is indexed under
    absl::Time start;
    absl::Time deadline;
    std::string what;  // "key \"a\"", "the NCCL id of communicator \"world\""
    WaitDone done;
  };
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
    // Parked calls, and the index that finds them when data arrives (ids of
    // waiters already finished may linger there; they are skipped).
    std::set<uint64_t> waiters;
    std::map<std::string, std::vector<uint64_t>> waiting_for_key;
    std::map<std::string, std::vector<uint64_t>> waiting_for_id;
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
  // A parked call to finish once the lock is released.
  struct Completion {
    WaitDone done;
    absl::StatusOr<std::vector<std::string>> result;
  };
  // What a call collects under the lock and delivers after it.
  struct Outbox {
    std::vector<Report> reports;
    std::vector<Completion> completions;
  };

  // OK if `scope` may act on its generation now: the fencing errors above.
  absl::Status FenceLocked(const RendezvousScope& scope) const;
  // The caller's generation after fencing, with the caller checked in.
  absl::StatusOr<Generation*> EnterLocked(const RendezvousScope& scope, Outbox* out);
  // Fails the generation and finishes its parked calls: those whose own
  // time is up with DEADLINE_EXCEEDED, the others FAILED_PRECONDITION.
  void FailLocked(const std::string& job_id, Generation* gen, const std::string& reason, Outbox* out);
  // Finishes every parked call of a generation that ended or was replaced.
  void DropWaitersLocked(const std::string& job_id, Generation* gen, Outbox* out);
  // Parks a call (or answers it at once: ready, at a limit, out of time).
  void WaitLocked(const RendezvousScope& scope, Generation* gen, Waiter waiter, absl::Duration timeout, Outbox* out);
  // Advances the calls indexed under `key` (just set); finishes those now ready.
  void WakeKeyLocked(Generation* gen, const std::string& key, Outbox* out);
  void WakeIdLocked(Generation* gen, const std::string& communicator, Outbox* out);
  // Unparks waiter `id` and finishes it with `result`.
  void FinishLocked(uint64_t id, absl::StatusOr<std::vector<std::string>> result, Outbox* out);
  std::string TimedOut(const Waiter& w, absl::Time now) const;
  void Deliver(Outbox& out);
  absl::Status CheckKey(const std::string& key) const;
  absl::Status CheckCommunicator(const std::string& communicator) const;

  const Clock* clock_;
  const RendezvousOptions options_;
  RendezvousListener* listener_ = nullptr;
  const RendezvousSecrets* secrets_ = nullptr;

  mutable std::mutex mu_;
  std::map<std::string, JobRendezvous> jobs_;
  std::map<uint64_t, Waiter> waiters_;
  std::set<std::pair<absl::Time, uint64_t>> deadlines_;  // (deadline, waiter id)
  uint64_t next_waiter_ = 1;
  bool shutting_down_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_H_
