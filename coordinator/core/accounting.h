#ifndef RINGMASTER_COORDINATOR_ACCOUNTING_H_
#define RINGMASTER_COORDINATOR_ACCOUNTING_H_

// Accounting: GPU-seconds and CPU-slot-seconds used, per user, queue or job,
// read from the store's record of every placement (Store::LoadUsage: a
// generation's slots count from its placement to the event that ended it,
// running ones up to now). Nothing is kept in memory, so the figures
// survive coordinator restarts as the store does.
//
// Who sees what: admins (and everyone when users are not authenticated)
// every placement; other users their own jobs' placements only.
//
// Thread-safe (the store is); each call is one SQLite query.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/auth.h"
#include "coordinator/store/store.h"

namespace ringmaster::coordinator {

struct UsageReport {
  std::vector<UsageTotal> rows;  // by key
  absl::Time as_of;              // "now" for placements still held
};

// The user whose placements `caller` may see; empty: everyone's.
std::string UsageVisibleTo(const Caller& caller);

class Accounting {
 public:
  // `clock` and `store` must outlive this.
  Accounting(const Clock* clock, Store* store) : clock_(clock), store_(store) {}

  // Usage within [since, now] (InfinitePast: all of it) of the placements
  // of `user` (empty: everyone's), grouped by `by`. A `since` after now
  // gives no rows.
  absl::StatusOr<UsageReport> Usage(UsageGroup by, absl::Time since, const std::string& user) const;
  // Every queue's usage since the store began (the metrics' counters).
  absl::StatusOr<std::vector<UsageTotal>> QueueTotals() const;

 private:
  const Clock* const clock_;
  Store* const store_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_ACCOUNTING_H_
