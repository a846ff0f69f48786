#ifndef RINGMASTER_COORDINATOR_CORE_QUEUE_BOOK_H_
#define RINGMASTER_COORDINATOR_CORE_QUEUE_BOOK_H_

// QueueBook: the queues in force and each queue's decayed usage (fair share).
//
// The config is replaced whole (SIGHUP: coordinator_server.h); readers take a
// shared pointer to the one in force, so a pass or a Submit sees one config
// throughout. A job keeps the queue it was submitted to; one whose queue a
// new file no longer has waits (the scheduler says so) until the queue is
// back or the job is cancelled.
//
// Fair share: each queue's usage in GPU-seconds (QueueConfig's
// FairShareConfig), decayed with the half-life, advanced at every tick from
// what its jobs held since the previous tick (Slurm does the same: usage is
// added per interval and decayed as it goes). A coordinator restart seeds it
// from the store's placements (SeedFinished).
//
// Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/queue_config.h"
#include "coordinator/core/scheduler.h"

namespace ringmaster::coordinator {

class QueueBook {
 public:
  QueueBook(const Clock* clock, QueueConfig config);

  std::shared_ptr<const QueueConfig> config() const;
  // The new config is in force for every later call; decayed usage is kept
  // per queue name.
  void Replace(QueueConfig config);
  // QueueConfig::ResolveQueue with the config in force.
  absl::StatusOr<std::string> Resolve(const std::string& user, const std::string& requested) const;

  // Usage before this coordinator started (placements of the store),
  // decayed to now.
  void Seed(const std::vector<UsageInterval>& intervals);
  // Usage that ended before this weighs less than a millionth of its
  // slot-seconds now (20 half-lives): Seed need not be given it.
  absl::Time SeedSince() const;
  // Adds what the queues held (`held`, by queue) since the previous call,
  // decayed to now.
  void Advance(const std::map<std::string, QueueResources>& held);
  // Decayed usage in GPU-seconds; 0 for a queue with none.
  double DecayedUsage(const std::string& queue) const;

  // The scheduler's view of every queue of the config in force.
  std::vector<QueueState> States() const;

 private:
  const Clock* clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const QueueConfig> config_;
  std::map<std::string, double> usage_;  // decayed to `as_of_`
  absl::Time as_of_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_QUEUE_BOOK_H_
