#include "coordinator/core/rendezvous.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {
namespace {

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

// `"a", "b" and 3 more`: at most 8 quoted names.
std::string QuotedList(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (size_t i = 0; i < names.size() && i < 8; ++i) quoted.push_back(absl::StrCat("\"", names[i], "\""));
  return absl::StrCat(absl::StrJoin(quoted, ", "),
                      names.size() > 8 ? absl::StrCat(" and ", names.size() - 8, " more") : "");
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

// ---- the JobController's side ----

void Rendezvous::BeginGeneration(const std::string& job_id, int64_t generation, int32_t world_size,
                                 absl::Time deadline, bool already_complete) {
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRendezvous& job = jobs_[job_id];
    if (generation <= job.current) return;
    std::unique_ptr<Generation> old = std::move(job.gen);
    job.current = generation;
    job.gen = std::make_unique<Generation>();
    job.gen->number = generation;
    job.gen->world_size = world_size;
    job.gen->deadline = deadline;
    if (already_complete) {
      for (int32_t r = 0; r < world_size; ++r) job.gen->joined.insert(r);
      job.gen->complete = true;
    }
    if (old != nullptr) DropWaitersLocked(job_id, old.get(), &out);
  }
  Deliver(out);
}

void Rendezvous::EndGeneration(const std::string& job_id, int64_t generation) {
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRendezvous& job = jobs_[job_id];
    if (generation < job.current) return;
    std::unique_ptr<Generation> old = std::move(job.gen);
    job.current = generation;
    if (old != nullptr) DropWaitersLocked(job_id, old.get(), &out);
  }
  Deliver(out);
}

// ---- fencing, failure, delivery ----

absl::Status Rendezvous::FenceLocked(const RendezvousScope& scope) const {
  auto it = jobs_.find(scope.job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", scope.job_id, " has no rendezvous"));
  const JobRendezvous& job = it->second;
  if (scope.generation < job.current) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", scope.generation, " of job ", scope.job_id,
                                                      " is over; current is ", job.current));
  }
  if (scope.generation > job.current) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", scope.generation, " of job ", scope.job_id,
                                                      " is not known; current is ", job.current));
  }
  const Generation* gen = job.gen.get();
  if (gen == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", scope.generation, " of job ", scope.job_id, " is over"));
  }
  if (gen->failed) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", scope.generation, " of job ", scope.job_id, " failed: ", gen->failure));
  }
  if (scope.rank < 0 || scope.rank >= gen->world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank: must be in [0, ", gen->world_size, "), got ", scope.rank));
  }
  return absl::OkStatus();
}

absl::StatusOr<Rendezvous::Generation*> Rendezvous::EnterLocked(const RendezvousScope& scope, Outbox* out) {
  RETURN_IF_ERROR(FenceLocked(scope));
  Generation* gen = jobs_.at(scope.job_id).gen.get();
  if (gen->joined.insert(scope.rank).second && !gen->complete &&
      static_cast<int32_t>(gen->joined.size()) == gen->world_size) {
    gen->complete = true;
    out->reports.push_back({scope.job_id, gen->number, false, ""});
  }
  return gen;
}

std::string Rendezvous::TimedOut(const Waiter& w, absl::Time now) const {
  return absl::StrCat("rank ", w.rank, " timed out after ", absl::FormatDuration(now - w.start), " waiting for ",
                      w.what);
}

void Rendezvous::FinishLocked(uint64_t id, absl::StatusOr<std::vector<std::string>> result, Outbox* out) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  Waiter& w = it->second;
  deadlines_.erase({w.deadline, id});
  auto job = jobs_.find(w.job_id);
  if (job != jobs_.end() && job->second.gen != nullptr && job->second.gen->number == w.generation) {
    job->second.gen->waiters.erase(id);
  }
  out->completions.push_back({std::move(w.done), std::move(result)});
  waiters_.erase(it);
}

void Rendezvous::FailLocked(const std::string& job_id, Generation* gen, const std::string& reason, Outbox* out) {
  if (gen->failed) return;
  gen->failed = true;
  gen->failure = reason;
  out->reports.push_back({job_id, gen->number, true, reason});
  const absl::Time now = clock_->Now();
  const absl::Status failed = absl::FailedPreconditionError(
      absl::StrCat("generation ", gen->number, " of job ", job_id, " failed: ", reason));
  const std::set<uint64_t> parked = gen->waiters;
  for (uint64_t id : parked) {
    const Waiter& w = waiters_.at(id);
    // A call whose own time is up (the generation's deadline, say) timed out.
    FinishLocked(id, now >= w.deadline ? absl::DeadlineExceededError(TimedOut(w, now)) : failed, out);
  }
}

void Rendezvous::DropWaitersLocked(const std::string& job_id, Generation* gen, Outbox* out) {
  const std::set<uint64_t> parked = gen->waiters;
  for (uint64_t id : parked) {
    const Waiter& w = waiters_.at(id);
    absl::Status fenced = FenceLocked({job_id, w.generation, w.rank});
    if (fenced.ok()) {  // cannot happen: the generation was ended or replaced
      fenced = absl::FailedPreconditionError(absl::StrCat("generation ", w.generation, " of job ", job_id, " is over"));
    }
    FinishLocked(id, fenced, out);
  }
}

void Rendezvous::Deliver(Outbox& out) {
  for (Completion& c : out.completions) c.done(std::move(c.result));
  if (listener_ == nullptr) return;
  for (const Report& r : out.reports) {
    if (r.failed) {
      listener_->OnRendezvousFailed(r.job_id, r.generation, r.reason);
    } else {
      listener_->OnRendezvousComplete(r.job_id, r.generation);
    }
  }
}

// ---- parked calls ----

void Rendezvous::WaitLocked(const RendezvousScope& scope, Generation* gen, Waiter w, absl::Duration timeout,
                            Outbox* out) {
  if (shutting_down_) {
    out->completions.push_back({std::move(w.done), absl::UnavailableError("the coordinator is shutting down")});
    return;
  }
  if (waiters_.size() >= options_.max_waiters) {
    out->completions.push_back(
        {std::move(w.done), absl::ResourceExhaustedError(absl::StrCat(
                                "too many rendezvous calls are waiting on the coordinator (", waiters_.size(),
                                "); retry after a backoff"))});
    return;
  }
  const absl::Time now = clock_->Now();
  w.job_id = scope.job_id;
  w.generation = scope.generation;
  w.rank = scope.rank;
  w.start = now;
  w.deadline = gen->deadline;
  if (timeout > absl::ZeroDuration()) w.deadline = std::min(w.deadline, now + timeout);
  if (now >= w.deadline) {
    const std::string timed_out = TimedOut(w, now);
    FailLocked(scope.job_id, gen, timed_out, out);
    out->completions.push_back({std::move(w.done), absl::DeadlineExceededError(timed_out)});
    return;
  }
  const uint64_t id = next_waiter_++;
  if (!w.keys.empty()) {
    gen->waiting_for_key[w.keys[w.next_missing]].push_back(id);
  } else {
    gen->waiting_for_id[w.communicator].push_back(id);
  }
  gen->waiters.insert(id);
  deadlines_.insert({w.deadline, id});
  waiters_.emplace(id, std::move(w));
}

void Rendezvous::WakeKeyLocked(Generation* gen, const std::string& key, Outbox* out) {
  auto it = gen->waiting_for_key.find(key);
  if (it == gen->waiting_for_key.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  gen->waiting_for_key.erase(it);
  for (uint64_t id : ids) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;  // finished meanwhile
    Waiter& waiter = w->second;
    while (waiter.next_missing < waiter.keys.size() && gen->kv.count(waiter.keys[waiter.next_missing]) != 0) {
      ++waiter.next_missing;
    }
    if (waiter.next_missing < waiter.keys.size()) {
      gen->waiting_for_key[waiter.keys[waiter.next_missing]].push_back(id);
      continue;
    }
    std::vector<std::string> values;
    values.reserve(waiter.keys.size());
    for (const std::string& k : waiter.keys) values.push_back(gen->kv.at(k));
    FinishLocked(id, std::move(values), out);
  }
}

void Rendezvous::WakeIdLocked(Generation* gen, const std::string& communicator, Outbox* out) {
  auto it = gen->waiting_for_id.find(communicator);
  if (it == gen->waiting_for_id.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  gen->waiting_for_id.erase(it);
  const std::string& id_bytes = gen->nccl_ids.at(communicator);
  for (uint64_t id : ids) FinishLocked(id, std::vector<std::string>{id_bytes}, out);
}

// ---- the ranks' side ----

absl::Status Rendezvous::CheckCommunicator(const std::string& communicator) const {
  if (communicator.empty() || communicator.size() > options_.max_communicator_name) {
    return absl::InvalidArgumentError(absl::StrCat("communicator: must be 1 to ", options_.max_communicator_name,
                                                   " characters, got ", communicator.size()));
  }
  return absl::OkStatus();
}

absl::Status Rendezvous::PublishNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                             const std::string& unique_id) {
  RETURN_IF_ERROR(CheckCommunicator(communicator));
  if (unique_id.empty() ||
      (options_.nccl_unique_id_bytes != 0 && unique_id.size() != options_.nccl_unique_id_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("unique_id: must be ", options_.nccl_unique_id_bytes,
                                                   " bytes, got ", unique_id.size()));
  }
  Outbox out;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
    if (!gen.ok()) {
      status = gen.status();
    } else {
      auto [it, inserted] = (*gen)->nccl_ids.emplace(communicator, unique_id);
      if (!inserted && it->second != unique_id) {
        status = absl::AlreadyExistsError(absl::StrCat("communicator ", communicator, " of generation ",
                                                       scope.generation, " already has a different id"));
      } else {
        WakeIdLocked(*gen, communicator, &out);
      }
    }
  }
  Deliver(out);
  return status;
}

void Rendezvous::GetNcclUniqueIdAsync(const RendezvousScope& scope, const std::string& communicator,
                                      absl::Duration timeout, WaitDone done) {
  if (absl::Status valid = CheckCommunicator(communicator); !valid.ok()) {
    done(valid);
    return;
  }
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
    if (!gen.ok()) {
      out.completions.push_back({std::move(done), gen.status()});
    } else if (auto it = (*gen)->nccl_ids.find(communicator); it != (*gen)->nccl_ids.end()) {
      out.completions.push_back({std::move(done), std::vector<std::string>{it->second}});
    } else {
      Waiter w;
      w.communicator = communicator;
      w.what = absl::StrCat("the NCCL id of communicator \"", communicator, "\"");
      w.done = std::move(done);
      WaitLocked(scope, *gen, std::move(w), timeout, &out);
    }
  }
  Deliver(out);
}

absl::StatusOr<std::string> Rendezvous::GetNcclUniqueId(const RendezvousScope& scope, const std::string& communicator,
                                                        absl::Duration timeout) {
  std::promise<absl::StatusOr<std::vector<std::string>>> result;
  GetNcclUniqueIdAsync(scope, communicator, timeout, [&](auto r) { result.set_value(std::move(r)); });
  absl::StatusOr<std::vector<std::string>> id = result.get_future().get();
  if (!id.ok()) return id.status();
  return std::move(id->front());
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
  Outbox out;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
    status = gen.status();
    if (gen.ok()) {
      (*gen)->kv[key] = value;
      WakeKeyLocked(*gen, key, &out);
    }
  }
  Deliver(out);
  return status;
}

absl::StatusOr<std::optional<std::string>> Rendezvous::KvGet(const RendezvousScope& scope, const std::string& key) {
  RETURN_IF_ERROR(CheckKey(key));
  Outbox out;
  absl::StatusOr<std::optional<std::string>> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
    if (!gen.ok()) {
      result = gen.status();
    } else {
      auto it = (*gen)->kv.find(key);
      result = it == (*gen)->kv.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
  }
  Deliver(out);
  return result;
}

absl::StatusOr<int64_t> Rendezvous::KvAdd(const RendezvousScope& scope, const std::string& key, int64_t delta) {
  RETURN_IF_ERROR(CheckKey(key));
  Outbox out;
  absl::StatusOr<int64_t> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
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
        WakeKeyLocked(*gen, key, &out);
      }
    }
  }
  Deliver(out);
  return result;
}

void Rendezvous::KvWaitAsync(const RendezvousScope& scope, const std::vector<std::string>& keys,
                             absl::Duration timeout, WaitDone done) {
  absl::Status valid = keys.empty() || keys.size() > options_.max_wait_keys
                           ? absl::InvalidArgumentError(absl::StrCat("keys: must be 1 to ", options_.max_wait_keys,
                                                                     " keys, got ", keys.size()))
                           : absl::OkStatus();
  for (size_t i = 0; valid.ok() && i < keys.size(); ++i) valid = CheckKey(keys[i]);
  if (!valid.ok()) {
    done(valid);
    return;
  }
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Generation*> gen = EnterLocked(scope, &out);
    if (!gen.ok()) {
      out.completions.push_back({std::move(done), gen.status()});
    } else {
      Waiter w;
      w.keys = keys;
      while (w.next_missing < keys.size() && (*gen)->kv.count(keys[w.next_missing]) != 0) ++w.next_missing;
      if (w.next_missing == keys.size()) {
        std::vector<std::string> values;
        for (const std::string& k : keys) values.push_back((*gen)->kv.at(k));
        out.completions.push_back({std::move(done), std::move(values)});
      } else {
        w.what = keys.size() == 1 ? absl::StrCat("key \"", keys[0], "\"") : absl::StrCat("keys ", QuotedList(keys));
        w.done = std::move(done);
        WaitLocked(scope, *gen, std::move(w), timeout, &out);
      }
    }
  }
  Deliver(out);
}

absl::StatusOr<std::vector<std::string>> Rendezvous::KvWait(const RendezvousScope& scope,
                                                            const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  std::promise<absl::StatusOr<std::vector<std::string>>> result;
  KvWaitAsync(scope, keys, timeout, [&](auto r) { result.set_value(std::move(r)); });
  return result.get_future().get();
}

absl::Status Rendezvous::CheckIn(const RendezvousScope& scope) {
  Outbox out;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = EnterLocked(scope, &out).status();
  }
  Deliver(out);
  return status;
}

void Rendezvous::CheckDeadlines() {
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = clock_->Now();
    for (auto& [job_id, job] : jobs_) {
      Generation* gen = job.gen.get();
      if (gen == nullptr || gen->complete || gen->failed || now < gen->deadline) continue;
      FailLocked(job_id, gen,
                 absl::StrCat("rendezvous deadline passed; rank(s) ", MissingRanks(gen->world_size, gen->joined),
                              " never joined"),
                 &out);
    }
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const uint64_t id = deadlines_.begin()->second;
      const Waiter& w = waiters_.at(id);
      const std::string timed_out = TimedOut(w, now);
      std::string message = timed_out;
      Generation* gen = jobs_.at(w.job_id).gen.get();
      if (w.keys.size() > 1) {  // say which keys never came
        std::vector<std::string> missing;
        for (const std::string& k : w.keys) {
          if (gen->kv.count(k) == 0) missing.push_back(k);
        }
        absl::StrAppend(&message, "; missing ", QuotedList(missing));
      }
      const std::string job_id = w.job_id;
      FinishLocked(id, absl::DeadlineExceededError(message), &out);
      FailLocked(job_id, gen, timed_out, &out);
    }
  }
  Deliver(out);
}

void Rendezvous::Shutdown() {
  Outbox out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    while (!waiters_.empty()) {
      FinishLocked(waiters_.begin()->first, absl::UnavailableError("the coordinator is shutting down"), &out);
    }
  }
  Deliver(out);
}

int Rendezvous::Waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiters_.size());
}

bool Rendezvous::Complete(const std::string& job_id, int64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.gen == nullptr) return false;
  return it->second.gen->number == generation && it->second.gen->complete;
}

}  // namespace ringmaster::coordinator
