#include "engine/dist/nccl_comm.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/core/cuda_status.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine::dist {
namespace {

// Polls this many times back to back before sleeping between polls: short
// collectives finish within microseconds.
constexpr int kSpinPolls = 64;
constexpr absl::Duration kFirstSleep = absl::Microseconds(10);
constexpr absl::Duration kMaxSleep = absl::Microseconds(100);

ncclConfig_t NonBlockingConfig(const std::string& name) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name.c_str();
  return config;
}

}  // namespace

absl::Status PollUntil(Clock& clock, absl::Time deadline, absl::FunctionRef<absl::StatusOr<bool>()> done) {
  const absl::Time start = clock.Now();
  absl::Duration sleep = kFirstSleep;
  for (int polls = 0;; ++polls) {
    absl::StatusOr<bool> finished = done();
    if (!finished.ok()) return finished.status();
    if (*finished) return absl::OkStatus();
    absl::Time now = clock.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(now - start)));
    }
    if (polls < kSpinPolls) {
      std::this_thread::yield();
    } else {
      clock.SleepUntil(std::min(now + sleep, deadline));
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

absl::Status Annotate(const absl::Status& status, const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    Release();
    comm_ = std::exchange(other.comm_, nullptr);
    name_ = std::move(other.name_);
    clock_ = other.clock_;
    teardown_timeout_ = other.teardown_timeout_;
  }
  return *this;
}

absl::StatusOr<NcclComm> NcclComm::InitRank(const ncclUniqueId& id, int size, int rank,
                                            const std::string& name, Clock& clock, absl::Time deadline,
                                            absl::Duration teardown_timeout) {
  auto owned_name = std::make_shared<const std::string>(name);
  ncclConfig_t config = NonBlockingConfig(*owned_name);
  ncclComm_t raw = nullptr;
  ncclResult_t result = ncclCommInitRankConfig(&raw, size, id, rank, &config);
  // From here the communicator (if NCCL made one) is owned, and aborted on failure.
  NcclComm comm(raw, std::move(owned_name), &clock, teardown_timeout);
  if (result != ncclSuccess && result != ncclInProgress) {
    comm.Abort();
    return NCCL_STATUS(result);
  }
  if (raw == nullptr) {
    return absl::InternalError("ncclCommInitRankConfig returned no communicator");
  }
  absl::Status ready = comm.WaitReady(deadline);
  if (!ready.ok()) {
    comm.Abort();
    if (absl::IsDeadlineExceeded(ready)) {
      return Annotate(ready, absl::StrCat("communicator init: not every one of the ", size,
                                          " ranks joined (aborted)"));
    }
    return Annotate(ready, "communicator init");
  }
  return comm;
}

absl::StatusOr<NcclComm> NcclComm::Split(int color, int key, const std::string& name, absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("split of an aborted communicator");
  auto owned_name = std::make_shared<const std::string>(name);
  ncclConfig_t config = NonBlockingConfig(*owned_name);
  ncclComm_t raw = nullptr;
  ncclResult_t result = ncclCommSplit(comm_, color, key, &raw, &config);
  NcclComm child(raw, std::move(owned_name), clock_, teardown_timeout_);
  if (result != ncclSuccess && result != ncclInProgress) {
    child.Abort();
    return NCCL_STATUS(result);
  }
  // The split is collective over this communicator: wait for it here, and for
  // the new communicator to be made.
  absl::Status ready = WaitReady(deadline);
  if (ready.ok() && child.get() != nullptr) ready = child.WaitReady(deadline);
  if (!ready.ok()) {
    child.Abort();
    return Annotate(ready, "ncclCommSplit");
  }
  return child;
}

absl::StatusOr<ncclResult_t> NcclComm::State() const {
  ncclResult_t state = ncclSuccess;
  NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &state));
  return state;
}

absl::Status NcclComm::AsyncError() const {
  if (comm_ == nullptr) return absl::FailedPreconditionError("the NCCL communicator was aborted");
  absl::StatusOr<ncclResult_t> state = State();
  if (!state.ok()) return state.status();
  if (*state == ncclSuccess || *state == ncclInProgress) return absl::OkStatus();
  return NcclStatus(*state, "ncclCommGetAsyncError(comm)", __FILE__, __LINE__);
}

absl::Status NcclComm::WaitReady(absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("the NCCL communicator was aborted");
  return PollUntil(*clock_, deadline, [this]() -> absl::StatusOr<bool> {
    absl::StatusOr<ncclResult_t> state = State();
    if (!state.ok()) return state.status();
    if (*state == ncclInProgress) return false;
    if (*state == ncclSuccess) return true;
    return NcclStatus(*state, "ncclCommGetAsyncError(comm)", __FILE__, __LINE__);
  });
}

void NcclComm::Abort() {
  if (comm_ == nullptr) return;
  absl::Status status = NCCL_STATUS(ncclCommAbort(comm_));
  if (!status.ok()) spdlog::warn("{}", status.ToString());
  comm_ = nullptr;
}

void NcclComm::Release() {
  if (comm_ == nullptr) return;
  // Finalize flushes what was issued; it needs a healthy communicator, and its
  // peers, within the teardown timeout. Otherwise abort.
  absl::Status status = AsyncError();
  if (status.ok()) {
    ncclResult_t result = ncclCommFinalize(comm_);
    if (result == ncclSuccess || result == ncclInProgress) {
      status = WaitReady(clock_->Now() + teardown_timeout_);
    } else {
      status = NCCL_STATUS(result);
    }
  }
  if (status.ok()) {
    status = NCCL_STATUS(ncclCommDestroy(comm_));
    if (status.ok()) {
      comm_ = nullptr;
      return;
    }
  }
  spdlog::warn("NCCL communicator teardown failed, aborting it: {}", status.ToString());
  Abort();
}

}  // namespace ringmaster::engine::dist
