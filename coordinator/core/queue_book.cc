#include "coordinator/core/queue_book.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ringmaster::coordinator {
namespace {

// Quotas the scheduler adds to usage stay far from overflow.
constexpr int64_t kSchedulerUnlimited = int64_t{1} << 40;

int64_t Bound(int64_t v) { return std::min(v, kSchedulerUnlimited); }

}  // namespace

QueueBook::QueueBook(const Clock* clock, QueueConfig config)
    : clock_(clock), config_(std::make_shared<const QueueConfig>(std::move(config))), as_of_(clock->Now()) {}

std::shared_ptr<const QueueConfig> QueueBook::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

void QueueBook::Replace(QueueConfig config) {
  auto next = std::make_shared<const QueueConfig>(std::move(config));
  std::lock_guard<std::mutex> lock(mu_);
  config_ = std::move(next);
}

absl::StatusOr<std::string> QueueBook::Resolve(const std::string& user, const std::string& requested) const {
  return config()->ResolveQueue(user, requested);
}

void QueueBook::Seed(const std::vector<UsageInterval>& intervals) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = std::max(clock_->Now(), as_of_);
  const double decay = std::exp2(-absl::FDivDuration(now - as_of_, config_->fair_share().half_life));
  for (auto& [queue, usage] : usage_) usage *= decay;
  as_of_ = now;
  for (const auto& [queue, usage] : DecayedUsageByQueue(intervals, now, config_->fair_share())) {
    usage_[queue] += usage;
  }
}

absl::Time QueueBook::SeedSince() const {
  const absl::Duration half_life = config()->fair_share().half_life;
  return half_life == absl::InfiniteDuration() ? absl::InfinitePast() : clock_->Now() - 20 * half_life;
}

void QueueBook::Advance(const std::map<std::string, QueueResources>& held) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = clock_->Now();
  if (now <= as_of_) return;  // a clock stepped back: nothing to add
  const FairShareConfig& fs = config_->fair_share();
  const double decay = std::exp2(-absl::FDivDuration(now - as_of_, fs.half_life));
  // One slot held over (as_of_, now], decayed to now.
  const double per_slot = DecayedSlotSeconds(as_of_, now, 1, now, fs.half_life);
  for (auto& [queue, usage] : usage_) usage *= decay;
  for (const auto& [queue, slots] : held) {
    usage_[queue] += per_slot * (static_cast<double>(slots.gpus) + static_cast<double>(slots.cpu_slots) * fs.cpu_slot_weight);
  }
  as_of_ = now;
}

double QueueBook::DecayedUsage(const std::string& queue) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = usage_.find(queue);
  return it == usage_.end() ? 0 : it->second;
}

std::vector<QueueState> QueueBook::States() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<QueueState> states;
  for (const Queue& q : config_->queues()) {
    QueueState s;
    s.name = q.name;
    s.nominal_gpus = Bound(q.nominal.gpus);
    s.nominal_cpus = Bound(q.nominal.cpu_slots);
    s.borrow_gpus = Bound(q.borrowing_limit.gpus);
    s.borrow_cpus = Bound(q.borrowing_limit.cpu_slots);
    s.weight = q.weight;
    auto it = usage_.find(q.name);
    s.decayed_usage = it == usage_.end() ? 0 : it->second;
    s.preempt_within = q.preempt_within_queue;
    states.push_back(std::move(s));
  }
  return states;
}

}  // namespace ringmaster::coordinator
