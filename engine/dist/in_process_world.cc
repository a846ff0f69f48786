#include "engine/dist/in_process_world.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/check.h"
#include "engine/dist/in_process_group.h"

namespace ringmaster::engine::dist {
namespace {

// How often a wait re-reads a clock that is not the real one.
constexpr absl::Duration kFakeClockPollInterval = absl::Milliseconds(1);

}  // namespace

std::shared_ptr<InProcessWorld> InProcessWorld::Create(int size, InProcessOptions options) {
  ENGINE_CHECK(size >= 1, "an in-process world needs at least one rank, got {}", size);
  if (options.clock == nullptr) options.clock = Clock::Real();
  return std::shared_ptr<InProcessWorld>(new InProcessWorld(size, std::move(options)));
}

InProcessWorld::InProcessWorld(int size, InProcessOptions options)
    : size_(size),
      options_(std::move(options)),
      real_clock_(dynamic_cast<RealClock*>(options_.clock) != nullptr),
      left_(size),
      killed_(size, false) {}

std::unique_ptr<InProcessGroup> InProcessWorld::Group(int rank) {
  ENGINE_CHECK(rank >= 0 && rank < size_, "rank {} out of range for a world of {}", rank, size_);
  return std::unique_ptr<InProcessGroup>(new InProcessGroup(shared_from_this(), rank));
}

void InProcessWorld::Kill(int rank) {
  ENGINE_CHECK(rank >= 0 && rank < size_, "rank {} out of range for a world of {}", rank, size_);
  std::lock_guard<std::mutex> lock(mu_);
  killed_[rank] = true;
  if (!left_[rank]) left_[rank] = "it was killed";
  cv_.notify_all();
}

bool InProcessWorld::Killed(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return killed_[rank];
}

int InProcessWorld::Waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_;
}

void InProcessWorld::Leave(int rank, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!left_[rank]) left_[rank] = reason;
  cv_.notify_all();
}

absl::Status InProcessWorld::WaitLocked(std::unique_lock<std::mutex>& lock, int rank,
                                        const std::function<bool()>& done,
                                        const std::function<std::vector<int>()>& peers,
                                        absl::Time deadline,
                                        const std::function<std::string()>& waiting_for) {
  for (;;) {
    if (done()) return absl::OkStatus();
    if (killed_[rank]) return absl::AbortedError("this rank was killed");
    for (int peer : peers()) {
      if (left_[peer]) {
        return absl::UnavailableError(
            absl::StrCat("rank ", peer, " left the group (", *left_[peer], ") before ",
                         waiting_for()));
      }
    }
    absl::Time now = options_.clock->Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(options_.timeout),
                       " waiting for ", waiting_for()));
    }
    absl::Duration wait = deadline - now;
    if (!real_clock_) wait = std::min(wait, kFakeClockPollInterval);
    ++waiters_;
    cv_.wait_for(lock, absl::ToChronoNanoseconds(wait));
    --waiters_;
  }
}

absl::StatusOr<std::shared_ptr<const InProcessWorld::Slot>> InProcessWorld::Collective(
    int rank, uint64_t seq, Contribution mine, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  std::shared_ptr<Slot>& entry = slots_[seq];
  if (entry == nullptr) {
    entry = std::make_shared<Slot>();
    entry->in.resize(size_);
  }
  std::shared_ptr<Slot> slot = entry;
  ENGINE_CHECK(!slot->in[rank].has_value(), "rank {} joined collective {} twice", rank, seq);
  slot->in[rank] = std::move(mine);
  ++slot->arrived;
  cv_.notify_all();

  auto missing = [&] {
    std::vector<int> ranks;
    for (int r = 0; r < size_; ++r) {
      if (!slot->in[r].has_value()) ranks.push_back(r);
    }
    return ranks;
  };
  absl::Status status = WaitLocked(
      lock, rank, [&] { return slot->arrived == size_; }, missing, deadline,
      [&] { return absl::StrCat("ranks [", absl::StrJoin(missing(), ", "), "] to join"); });
  if (!status.ok()) return status;
  if (++slot->taken == size_) slots_.erase(seq);
  return std::shared_ptr<const Slot>(slot);
}

std::shared_ptr<InProcessWorld> InProcessWorld::ChildWorld(const Slot& slot, int size,
                                                           InProcessOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot.child == nullptr) slot.child = Create(size, std::move(options));
  return slot.child;
}

absl::Status InProcessWorld::Post(int src, int dst, int tag, std::string bytes,
                                  std::string signature) {
  std::lock_guard<std::mutex> lock(mu_);
  if (left_[dst]) {
    return absl::UnavailableError(
        absl::StrCat("rank ", dst, " left the group (", *left_[dst], ")"));
  }
  mailboxes_[{src, dst, tag}].push_back(Message{std::move(bytes), std::move(signature)});
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<InProcessWorld::Message> InProcessWorld::Take(int src, int dst, int tag,
                                                             absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_tuple(src, dst, tag);
  auto has_message = [&] {
    auto it = mailboxes_.find(key);
    return it != mailboxes_.end() && !it->second.empty();
  };
  absl::Status status = WaitLocked(
      lock, dst, has_message, [&] { return std::vector<int>{src}; }, deadline,
      [&] { return absl::StrCat("a message from rank ", src, " with tag ", tag); });
  if (!status.ok()) return status;
  auto it = mailboxes_.find(key);
  Message message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailboxes_.erase(it);
  return message;
}

}  // namespace ringmaster::engine::dist
