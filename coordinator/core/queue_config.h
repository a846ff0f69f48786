#ifndef RINGMASTER_COORDINATOR_QUEUE_CONFIG_H_
#define RINGMASTER_COORDINATOR_QUEUE_CONFIG_H_

// The operator's queues file (docs/operations.md, "Teams and queues"): which
// queues exist, who may submit to each, each queue's nominal quota, borrowing
// limit, fair-share weight and preemption policy, and the fair-share
// half-life. Parsed and validated here; the coordinator reads it at start and
// again on SIGHUP, keeping the old config when the new file is refused.
//
//   fair_share:
//     half_life: 7d              # default 7d; "inf": usage never decays
//     cpu_slot_weight: 0.0625    # GPU-seconds one CPU-slot-second counts as
//   queues:
//     - name: team-a
//       members: [alice, bob]    # token-file user names; "*": every user
//       nominal: {gpus: 16, cpu_slots: 64}
//       borrowing_limit: {gpus: 8}   # absent (or a field of it): unlimited
//       weight: 2                # default 1
//       preemption: {within_queue: true}   # default false
//   default_queues: {alice: team-a}
//
// Errors are INVALID_ARGUMENT: "<origin>: <field path>: <reason> (line L)",
// e.g. "queues.yaml: queues[1].nominal.gpus: must be >= 0, got -2 (line 9)".
// Unknown keys are errors, so that a typo is never silently ignored.
//
// Thread-compatible: a QueueConfig is a value; share it as const.

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringmaster::coordinator {

// An amount of the two slot kinds (capacity.h). kUnlimited in a field: no
// bound on that kind.
struct QueueResources {
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  // The largest finite value a file may give, so that sums over queues
  // cannot overflow.
  static constexpr int64_t kMaxFinite = 1'000'000'000;

  int64_t gpus = 0;
  int64_t cpu_slots = 0;

  bool operator==(const QueueResources& o) const { return gpus == o.gpus && cpu_slots == o.cpu_slots; }
};

struct Queue {
  std::string name;  // 1 to 63 characters of [A-Za-z0-9._/-], as label keys
  // User names as written; "*" stands for every user.
  std::vector<std::string> members;
  // What the queue may always run; it gets it back by preempting borrowers.
  QueueResources nominal;
  // How much beyond `nominal` it may run on capacity other queues leave idle.
  QueueResources borrowing_limit{QueueResources::kUnlimited, QueueResources::kUnlimited};
  // Fair share: queues competing for free capacity go in increasing order of
  // decayed usage / weight. > 0.
  double weight = 1.0;
  // A higher-priority job of this queue may preempt a lower-priority one of
  // the same queue.
  bool preempt_within_queue = false;

  // Is `user` listed, or "*"?
  bool HasMember(absl::string_view user) const;
};

struct FairShareConfig {
  // Usage counts half as much every `half_life`; InfiniteDuration(): never
  // decays. > 0.
  absl::Duration half_life = absl::Hours(7 * 24);
  // Usage is one figure in GPU-seconds: gpu_seconds + cpu_slot_seconds *
  // cpu_slot_weight (as Slurm's TRES billing weights). The default counts 16
  // CPU slots as one GPU. > 0, so that CPU-only clusters still rank queues.
  double cpu_slot_weight = 1.0 / 16;
};

class QueueConfig {
 public:
  // Parses and validates a queues file's text. `origin` (the file's path)
  // prefixes every error.
  static absl::StatusOr<QueueConfig> Parse(absl::string_view yaml, const std::string& origin);
  // Reads `path` (NOT_FOUND, PERMISSION_DENIED, ... naming it) and parses it.
  static absl::StatusOr<QueueConfig> Load(const std::string& path);
  // No queues file: one queue "default", every user a member, unlimited
  // nominal quota; the coordinator behaves as it did before queues.
  static QueueConfig Default();

  // nullptr if there is no such queue.
  const Queue* Find(absl::string_view name) const;

  // The queue a job of `user` goes to, given the spec's `requested` queue
  // (empty: none named). `user` empty means users are not authenticated (no
  // token file): membership is not checked.
  //   - unknown `requested`: INVALID_ARGUMENT
  //       spec.queue: unknown queue "x" (queues: a, b)
  //   - `user` not a member: PERMISSION_DENIED
  //       user bob is not a member of queue team-a
  //   - `requested` empty: the user's default queue, which is
  //     default_queues[user] if set, else the first queue (file order) that
  //     names the user, else the first that has "*"; for an unauthenticated
  //     caller, the first queue. PERMISSION_DENIED naming the user when they
  //     are in no queue.
  // Admins get no exemption: they are members where the file says so.
  absl::StatusOr<std::string> ResolveQueue(const std::string& user, const std::string& requested) const;

  // Warnings (never errors: the token file may change first) about members
  // and default_queues entries that are not in `known_users` (the token
  // file's user names), one line each.
  std::vector<std::string> Validate(const std::vector<std::string>& known_users) const;

  const std::vector<Queue>& queues() const { return queues_; }  // in file order
  const FairShareConfig& fair_share() const { return fair_share_; }
  const std::map<std::string, std::string>& default_queues() const { return default_queues_; }

 private:
  friend class QueueConfigParser;

  // Invariant: queues_ is never empty (Parse and Default are the only ways
  // to make one).
  QueueConfig() = default;

  std::string QueueNames() const;  // "a, b"

  std::vector<Queue> queues_;
  FairShareConfig fair_share_;
  std::map<std::string, std::string> default_queues_;  // user -> queue
};

// Usage decayed to `now`: the integral over [start, min(end, now)] of
// slots * 2^(-(now - t) / half_life) dt, in slot-seconds, in closed form.
// end = InfiniteFuture(): still running. half_life = InfiniteDuration(): no
// decay (slots * duration). 0 when the interval is empty or starts after
// `now`. half_life must be > 0.
double DecayedSlotSeconds(absl::Time start, absl::Time end, int64_t slots, absl::Time now, absl::Duration half_life);

// One job's hold on slots, for fair share and accounting.
struct UsageInterval {
  std::string queue;
  absl::Time start;
  absl::Time end = absl::InfiniteFuture();  // InfiniteFuture(): still running
  int64_t gpus = 0;
  int64_t cpu_slots = 0;
};

// Decayed usage per queue, in GPU-seconds (FairShareConfig), at `now`: the
// sum over `intervals`. Queues without intervals are absent.
std::map<std::string, double> DecayedUsageByQueue(const std::vector<UsageInterval>& intervals, absl::Time now,
                                                  const FairShareConfig& config);

// The same sum kept incrementally, so that finished intervals need not be
// kept: each queue's finished usage is folded into one figure decayed to the
// latest end recorded. Running intervals are passed to Usage() as they are
// (they change with `now`). Thread-compatible.
class FairShareLedger {
 public:
  explicit FairShareLedger(FairShareConfig config) : config_(config) {}

  // Records a finished interval; one with end <= start adds nothing.
  // INVALID_ARGUMENT if it is still running (end InfiniteFuture()).
  absl::Status RecordFinished(const UsageInterval& interval);

  // Decayed usage of `queue` at `now`, GPU-seconds: finished usage plus the
  // intervals of `running` that belong to `queue`. `now` before the latest
  // recorded end (a clock stepped back) counts as that end.
  double Usage(const std::string& queue, absl::Time now, const std::vector<UsageInterval>& running = {}) const;

  // Usage / weight, the fair-share ordering key: lower goes first.
  double WeightedUsage(const Queue& queue, absl::Time now, const std::vector<UsageInterval>& running = {}) const;

 private:
  struct Folded {
    double gpu_seconds = 0;  // decayed to `as_of`
    absl::Time as_of = absl::InfinitePast();
  };
  double DecayedTo(const Folded& folded, absl::Time at) const;

  FairShareConfig config_;
  std::map<std::string, Folded> finished_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_QUEUE_CONFIG_H_
