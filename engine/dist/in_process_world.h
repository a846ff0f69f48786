#ifndef RINGMASTER_ENGINE_DIST_IN_PROCESS_WORLD_H_
#define RINGMASTER_ENGINE_DIST_IN_PROCESS_WORLD_H_

// InProcessWorld: what the N ranks of an in-process group share — a table of
// collective rendezvous slots (one per collective call, numbered by each
// rank's call count) and point-to-point mailboxes keyed by (src, dst, tag).
// Each rank is a thread holding its InProcessGroup (in_process_group.h); the
// world is the "network" between them, with failure injection (Kill).
//
// Failure model, mirroring the TCP groups: a rank whose call fails (timeout,
// bad argument, mismatch) or that is killed has "left"; a peer waiting for a
// contribution or a message from a rank that left gets UNAVAILABLE at once; a
// peer waiting for a rank that simply never arrives gets DEADLINE_EXCEEDED at
// its own deadline.
//
// Time comes from the injected Clock. With the real clock, waits block until
// the deadline; with any other clock (FakeClock) they re-check the clock every
// millisecond of real time, so a test advances the fake time once Waiters()
// shows the threads parked.
//
// Thread-safe. Obtain it through Create (it is shared by its groups).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster::engine::dist {

class InProcessGroup;

struct InProcessOptions {
  // Base name in errors: "world" -> "world[4 ranks]".
  std::string name = "world";
  // Deadline of every call of the world's groups.
  absl::Duration timeout = absl::Seconds(60);
  // Not owned; must outlive the world. Clock::Real() by default.
  Clock* clock = nullptr;
};

class InProcessWorld : public std::enable_shared_from_this<InProcessWorld> {
 public:
  // One rank's part of a collective call.
  struct Contribution {
    // What the rank called, e.g. "allreduce f32[12] sum"; must match across ranks.
    std::string signature;
    std::vector<float> values;  // f32 staging of a reduction's input
    std::string bytes;          // raw input (broadcast root, all-gather)
  };
  // A completed collective: every rank's contribution, immutable once complete.
  struct Slot {
    std::vector<std::optional<Contribution>> in;
    int arrived = 0;
    int taken = 0;
    // new_group's sub-world, created once by ChildWorld (guarded by the world's mutex).
    mutable std::shared_ptr<InProcessWorld> child;
  };

  static std::shared_ptr<InProcessWorld> Create(int size, InProcessOptions options = {});

  int size() const { return size_; }
  const InProcessOptions& options() const { return options_; }

  // The group of `rank`, for the thread that plays it.
  std::unique_ptr<InProcessGroup> Group(int rank);

  // Simulates the death of `rank`: peers waiting for it get UNAVAILABLE, its
  // own group's next call gets ABORTED.
  void Kill(int rank);
  // Threads blocked in the world right now.
  int Waiters() const;

  // --- For InProcessGroup. ---

  // Deposits `mine` as `rank`'s contribution to collective number `seq` and
  // waits until every rank has deposited one (or the deadline passes, or a
  // missing rank leaves). Returns the completed slot.
  absl::StatusOr<std::shared_ptr<const Slot>> Collective(int rank, uint64_t seq,
                                                         Contribution mine, absl::Time deadline);
  // The sub-world of a completed new_group slot, created by the first caller.
  std::shared_ptr<InProcessWorld> ChildWorld(const Slot& slot, int size, InProcessOptions options);
  // Queues a message from `src` to `dst`; UNAVAILABLE if `dst` left.
  absl::Status Post(int src, int dst, int tag, std::string bytes, std::string signature);
  // Waits for the next message from `src` to `dst` with `tag`.
  struct Message {
    std::string bytes;
    std::string signature;  // "f32[12]"
  };
  absl::StatusOr<Message> Take(int src, int dst, int tag, absl::Time deadline);
  // Records that `rank` left the world (its call failed or it was killed).
  void Leave(int rank, const std::string& reason);
  // Whether Kill(rank) was called.
  bool Killed(int rank) const;

 private:
  InProcessWorld(int size, InProcessOptions options);

  // Waits on cv_ until `done()`, a rank in `peers()` leaves, or `deadline`.
  // Returns OK when done, UNAVAILABLE naming a peer that left, ABORTED if
  // `rank` was killed meanwhile, DEADLINE_EXCEEDED otherwise. `waiting_for()`
  // says what was awaited ("ranks [2] to join").
  absl::Status WaitLocked(std::unique_lock<std::mutex>& lock, int rank,
                          const std::function<bool()>& done,
                          const std::function<std::vector<int>()>& peers, absl::Time deadline,
                          const std::function<std::string()>& waiting_for);

  const int size_;
  const InProcessOptions options_;
  const bool real_clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::shared_ptr<Slot>> slots_;
  std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes_;
  std::vector<std::optional<std::string>> left_;  // why each rank left, if it did
  std::vector<bool> killed_;
  int waiters_ = 0;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_IN_PROCESS_WORLD_H_
