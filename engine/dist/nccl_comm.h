#ifndef RINGMASTER_ENGINE_DIST_NCCL_COMM_H_
#define RINGMASTER_ENGINE_DIST_NCCL_COMM_H_

// NcclComm: owns one NON-BLOCKING NCCL communicator (ncclConfig_t.blocking = 0)
// and waits for it the only way that cannot hang: by polling
// ncclCommGetAsyncError against a deadline, aborting the communicator when the
// deadline passes. Init and split are non-blocking NCCL calls that return
// ncclInProgress; so may collectives and ncclGroupEnd. After every such call
// the owner waits with WaitReady() before the next NCCL call on the
// communicator, as NCCL requires.
//
// Destruction: a healthy communicator is finalized (ncclCommFinalize, polled
// with `teardown_timeout`) and destroyed; a failed one, or one whose finalize
// does not finish in time, is aborted (ncclCommAbort), which never waits for
// peers.
//
// Not thread-safe: one thread uses a communicator at a time. The calling
// thread's current CUDA device must be the communicator's device.

#include <nccl.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster::engine::dist {

// Calls `done` until it returns true (OK), an error (returned), or `deadline`
// passes (DEADLINE_EXCEEDED "timed out after <waited>"). Spins briefly, then
// sleeps on `clock` with a backoff of up to 100 us between calls (a poll
// costs about a microsecond; the sleep bounds the latency it adds).
absl::Status PollUntil(Clock& clock, absl::Time deadline, absl::FunctionRef<absl::StatusOr<bool>()> done);

// `status` with "<context>: " in front of its message, same code.
absl::Status Annotate(const absl::Status& status, const std::string& context);

class NcclComm {
 public:
  NcclComm() = default;
  NcclComm(NcclComm&& other) noexcept { *this = std::move(other); }
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() { Release(); }

  // ncclCommInitRankConfig (non-blocking), waited for until `deadline`; on the
  // deadline the half-made communicator is aborted: DEADLINE_EXCEEDED.
  // `name` is NCCL's commName (its logs). The current device is the comm's.
  static absl::StatusOr<NcclComm> InitRank(const ncclUniqueId& id, int size, int rank,
                                           const std::string& name, Clock& clock, absl::Time deadline,
                                           absl::Duration teardown_timeout);

  // ncclCommSplit (non-blocking): collective over this communicator. Returns
  // an empty NcclComm (get() == nullptr) for color NCCL_SPLIT_NOCOLOR.
  absl::StatusOr<NcclComm> Split(int color, int key, const std::string& name, absl::Time deadline);

  // Waits until the last non-blocking call on the communicator has finished
  // (its state left ncclInProgress). The communicator's error, or
  // DEADLINE_EXCEEDED, otherwise; the caller decides whether to Abort.
  absl::Status WaitReady(absl::Time deadline);
  // The communicator's asynchronous error as a Status; OK while it is healthy
  // or a call is still in progress.
  absl::Status AsyncError() const;
  // Aborts in-flight operations and frees the communicator; get() becomes null.
  void Abort();

  ncclComm_t get() const { return comm_; }
  Clock& clock() const { return *clock_; }

 private:
  NcclComm(ncclComm_t comm, std::shared_ptr<const std::string> name, Clock* clock,
           absl::Duration teardown_timeout)
      : comm_(comm), name_(std::move(name)), clock_(clock), teardown_timeout_(teardown_timeout) {}
  // The communicator's state (ncclSuccess, ncclInProgress or an error).
  absl::StatusOr<ncclResult_t> State() const;
  void Release();

  ncclComm_t comm_ = nullptr;
  // NCCL's commName points here: kept at a stable address for the comm's life.
  std::shared_ptr<const std::string> name_;
  Clock* clock_ = nullptr;
  absl::Duration teardown_timeout_ = absl::ZeroDuration();
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_NCCL_COMM_H_
