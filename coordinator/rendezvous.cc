#include "coordinator/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {
namespace {

// Longest single condition-variable wait; a waiter re-reads the clock at
// least this often even if nobody wakes it.
constexpr absl::Duration kMaxSingleWait = absl::Minutes(1);

std::string MissingRanks(int32_t world_size, const std::set<int32_t>& joined) {
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < world_size; ++r) {
    if (joined.count(r) == 0) missing.push_back(r);
  }
  if (missing.size() > 16) {
    return absl::StrCat(absl::StrJoin(missing.begin(), missing.begin() + 16, ", "), " and ", missing.size() - 16,
                        " more");
  }
  return absl::StrJoin(missing, ", ");
}

}  // namespace

Rendezvous::Rendezvous(const Clock* clock, RendezvousOptions options) : clock_(clock), options_(options) {}

std::string Rendezvous::Secret(const std::string& job_id, int64_t generation) const {
  return secrets_ == nullptr ? std::string() : secrets_->For(job_id, generation);
}

absl::Status Rendezvous::CheckSecret(const RendezvousScope& scope) const {
  if (secrets_ == nullptr) return absl::OkStatus();
  return secrets_->Check(scope.job_id, scope.generation, scope.secret);
}

void Rendezvous::BeginGeneration(const std::string& job_id, int64_t generation, int32_t world_size,
                                 absl::Time deadline, bool already_complete) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRendezvous& job = jobs_[job_id];
  if (generation <= job.current) return;
  job.current = generation;
  job.gen = std::make_unique<Generation>();
  job.gen->number = generation;
  job.gen->world_size = world_size;
  job.gen->deadline = deadline;
  if (already_complete) {
    for (int32_t r = 0; r < world_size; ++r) job.gen->joined.insert(r);
    job.gen->complete = true;
  }
  cv_.notify_all();  // waiters of the old generation fail their fencing check
}

void Rendezvous::EndGeneration(const std::string& job_id, int64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRendezvous& job = jobs_[job_id];
  if (generation < job.current) return;
  job.current = generation;
  job.gen.reset();
  cv_.notify_all();
}

absl::StatusOr<Rendezvous::Generation*> Rendezvous::EnterLocked(const RendezvousScope& scope,
                                                                 std::vector<Report>* reports) {
  auto it = jobs_.find(scope.job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", scope.job_id, " has no rendezvous"));
  }
  const JobRendezvous& job = it->second;
  if (scope.generation < job.current) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", scope.generation, " of job ", scope.job_id,
                                                      " is over; current is ", job.current));
  }
  if (scope.generation > job.current) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", scope.generation, " of job ", scope.job_id,
                                                      " is not known; current is ", job.current));
  }
  Generation* gen = job.gen.get();
  if (gen == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", scope.generation, " of job ", scope.job_id, " is over"));
  }
  if (gen->failed) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", scope.generation, " of job ", scope.job_id, " failed: ", gen->failure));
  }
  if (scope.rank < 0 || scope.rank >= gen->world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: must be in [0, ", gen->world_size, "), got ", scope.rank));
  }
  if (gen->joined.insert(scope.rank).second && !gen->complete &&
      static_cast<int32_t>(gen->joined.size()) == gen->world_size) {
    gen->complete = true;
    reports->push_back({scope.job_id, gen->number, false, ""});
  }
  return gen;
}

void Rendezvous::FailLocked(const std::string& job_id, Generation* gen, const std::string& reason,
                            std::vector<Report>* reports) {
  if (gen->failed) return;
  gen->failed = true;
  gen->failure = reason;
  reports->push_back({job_id, gen->number, true, reason});
  cv_.notify_all();
}

void Rendezvous::Deliver(const std::vector<Report>& reports) {
  if (listener_ == nullptr) return;
  for (const Report& r : reports) {
    if (r.failed) {
      listener_->OnRendezvousFailed(r.job_id, r.generation, r.reason);
    } else {
      listener_->OnRendezvousComplete(r.job_id, r.generation);
    }
  }
}

absl::Status Rendezvous::WaitLocked(std::unique_lock<std::mutex>& lock, const RendezvousScope& scope,
                                    absl::Duration timeout, const std::string& what,
                                    const std::function<bool(const Generation&)>& ready,
                                    std::vector<Report>* reports) {
  const absl::Time start = clock_->Now();
  absl::Time deadline = jobs_.at(scope.job_id).gen->deadline;
  if (timeout > absl::ZeroDuration()) deadline = std::min(deadline, start + timeout);
  while (true) {
    if (shutting_down_) return absl::UnavailableError("the coordinator is shutting down");
    const absl::Time now = clock_->Now();
    const std::string timed_out = absl::StrCat("rank ", scope.rank, " timed out after ",
                                               absl::FormatDuration(now - start), " waiting for ", what);
    // Fencing again after every wake: the generation may have ended, failed
    // or been replaced meanwhile.
    absl::StatusOr<Generation*> gen = EnterLocked(scope, reports);
    if (!gen.ok()) {
      // Failed by CheckDeadlines at the generation's deadline, which is this
      // call's deadline too: the caller timed out.
      const JobRendezvous& job = jobs_.at(scope.job_id);
      const bool failed_here = job.current == scope.generation && job.gen != nullptr && job.gen->failed;
      if (failed_here && now >= deadline) return absl::DeadlineExceededError(timed_out);
      return gen.status();
    }
    if (ready(**gen)) return absl::OkStatus();
    if (now >= deadline) {
      FailLocked(scope.job_id, *gen, timed_out, reports);
      return absl::DeadlineExceededError(timed_out);
    }
    ++waiters_;
    cv_.wait_for(lock, absl::ToChronoNanoseconds(std::min(deadline - now, kMaxSingleWait)));
    --waiters_;
  }
}

absl::Status Rendezvous::PublishNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                             const std::string& unique_id) {
  if (communicator.empty() || communicator.size() > options_.max_communicator_name) {
    return absl::InvalidArgumentError(absl::StrCat("communicator: must be 1 to ", options_.max_communicator_name,
                                                   " characters, got ", communicator.size()));
  }
  if (unique_id.empty() ||
      (options_.nccl_unique_id_bytes != 0 && unique_id.size() != options_.nccl_unique_id_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("unique_id: must be ", options_.nccl_unique_id_bytes,
                                                   " bytes, got ", unique_id.size()));
  }
  std::vector<Report> reports;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &reports);
    if (!gen.ok()) {
      status = gen.status();
    } else {
      auto [it, inserted] = (*gen)->nccl_ids.emplace(communicator, unique_id);
      if (!inserted && it->second != unique_id) {
        status = absl::AlreadyExistsError(absl::StrCat("communicator ", communicator, " of generation ",
                                                       scope.generation, " already has a different id"));
      }
      cv_.notify_all();
    }
  }
  Deliver(reports);
  return status;
}

absl::StatusOr<std::string> Rendezvous::GetNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                                        absl::Duration timeout) {
  std::vector<Report> reports;
  absl::StatusOr<std::string> result;
  {
    std::unique_lock<std::mutex> lock(mu_);
    absl::Status s = EnterLocked(scope, &reports).status();
    if (s.ok()) {
      s = WaitLocked(lock, scope, timeout, absl::StrCat("the NCCL id of communicator \"", communicator, "\""),
                     [&](const Generation& g) { return g.nccl_ids.count(communicator) != 0; }, &reports);
    }
    if (s.ok()) {
      result = jobs_.at(scope.job_id).gen->nccl_ids.at(communicator);
    } else {
      result = s;
    }
  }
  Deliver(reports);
  return result;
}

absl::Status Rendezvous::CheckKey(const std::string& key) const {
  if (key.empty() || key.size() > options_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: must be 1 to ", options_.max_key_bytes, " bytes, got ", key.size()));
  }
  return absl::OkStatus();
}

absl::Status Rendezvous::KvSet(const RendezvousScope& scope, const std::string& key, const std::string& value) {
  RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value: must be at most ", options_.max_value_bytes, " bytes, got ", value.size()));
  }
  std::vector<Report> reports;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &reports);
    status = gen.status();
    if (gen.ok()) {
      (*gen)->kv[key] = value;
      cv_.notify_all();
    }
  }
  Deliver(reports);
  return status;
}

absl::StatusOr<std::optional<std::string>> Rendezvous::KvGet(const RendezvousScope& scope, const std::string& key) {
  RETURN_IF_ERROR(CheckKey(key));
  std::vector<Report> reports;
  absl::StatusOr<std::optional<std::string>> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &reports);
    if (!gen.ok()) {
      result = gen.status();
    } else {
      auto it = (*gen)->kv.find(key);
      result = it == (*gen)->kv.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
  }
  Deliver(reports);
  return result;
}

absl::StatusOr<int64_t> Rendezvous::KvAdd(const RendezvousScope& scope, const std::string& key, int64_t delta) {
  RETURN_IF_ERROR(CheckKey(key));
  std::vector<Report> reports;
  absl::StatusOr<int64_t> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &reports);
    if (!gen.ok()) {
      result = gen.status();
    } else {
      std::string& value = (*gen)->kv[key];
      int64_t current = 0;
      if (!value.empty() && !absl::SimpleAtoi(value, &current)) {
        result = absl::FailedPreconditionError(absl::StrCat("key ", key, " holds a value that is not an integer"));
      } else if (__builtin_add_overflow(current, delta, &current)) {  // found by fuzz/rendezvous_service_fuzzer
        result = absl::OutOfRangeError(
            absl::StrCat("key ", key, ": adding ", delta, " to ", value, " overflows a 64-bit integer"));
      } else {
        value = absl::StrCat(current);
        result = current;
        cv_.notify_all();
      }
    }
  }
  Deliver(reports);
  return result;
}

absl::StatusOr<std::vector<std::string>> Rendezvous::KvWait(const RendezvousScope& scope,
                                                            const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  if (keys.empty() || keys.size() > options_.max_wait_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys: must be 1 to ", options_.max_wait_keys, " keys, got ", keys.size()));
  }
  for (const std::string& key : keys) RETURN_IF_ERROR(CheckKey(key));
  std::vector<Report> reports;
  absl::StatusOr<std::vector<std::string>> result;
  {
    std::unique_lock<std::mutex> lock(mu_);
    absl::Status s = EnterLocked(scope, &reports).status();
    if (s.ok()) {
      // Named on a timeout: the keys still missing now (what the rank's
      // error message should show).
      std::string what;
      if (keys.size() == 1) {
        what = absl::StrCat("key \"", keys[0], "\"");
      } else {
        std::vector<std::string> quoted;
        for (const std::string& k : keys) quoted.push_back(absl::StrCat("\"", k, "\""));
        what = absl::StrCat("keys ", absl::StrJoin(quoted.begin(), quoted.begin() + std::min<size_t>(quoted.size(), 8), ", "),
                            quoted.size() > 8 ? absl::StrCat(" and ", quoted.size() - 8, " more") : "");
      }
      s = WaitLocked(lock, scope, timeout, what,
                     [&](const Generation& g) {
                       return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return g.kv.count(k) != 0; });
                     },
                     &reports);
    }
    if (absl::IsDeadlineExceeded(s) && keys.size() > 1) {
      // Say which keys never came.
      std::vector<std::string> missing;
      const Generation* g = jobs_.at(scope.job_id).gen.get();
      for (const std::string& k : keys) {
        if (g == nullptr || g->kv.count(k) == 0) missing.push_back(absl::StrCat("\"", k, "\""));
      }
      const size_t shown = std::min<size_t>(missing.size(), 8);
      s = absl::DeadlineExceededError(absl::StrCat(
          s.message(), "; missing ", absl::StrJoin(missing.begin(), missing.begin() + shown, ", "),
          missing.size() > shown ? absl::StrCat(" and ", missing.size() - shown, " more") : ""));
    }
    if (s.ok()) {
      std::vector<std::string> values;
      const Generation& g = *jobs_.at(scope.job_id).gen;
      for (const std::string& k : keys) values.push_back(g.kv.at(k));
      result = std::move(values);
    } else {
      result = s;
    }
  }
  Deliver(reports);
  return result;
}

absl::Status Rendezvous::CheckIn(const RendezvousScope& scope) {
  std::vector<Report> reports;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = EnterLocked(scope, &reports).status();
  }
  Deliver(reports);
  return status;
}

void Rendezvous::CheckDeadlines() {
  std::vector<Report> reports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = clock_->Now();
    for (auto& [job_id, job] : jobs_) {
      Generation* gen = job.gen.get();
      if (gen == nullptr || gen->complete || gen->failed || now < gen->deadline) continue;
      FailLocked(job_id, gen,
                 absl::StrCat("rendezvous deadline passed; rank(s) ", MissingRanks(gen->world_size, gen->joined),
                              " never joined"),
                 &reports);
    }
    cv_.notify_all();
  }
  Deliver(reports);
}

void Rendezvous::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
}

int Rendezvous::Waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_;
}

bool Rendezvous::Complete(const std::string& job_id, int64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.gen == nullptr) return false;
  return it->second.gen->number == generation && it->second.gen->complete;
}

}  // namespace ringmaster::coordinator
