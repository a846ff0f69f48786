#ifndef RINGMASTER_ENGINE_TRAIN_CHECKPOINT_WRITER_H_
#define RINGMASTER_ENGINE_TRAIN_CHECKPOINT_WRITER_H_

// CheckpointWriter: runs a trainer's checkpoint writes (write, fsync, commit)
// on one background thread while training goes on, at most one at a time.
//
// The training thread hands over a write that owns everything it needs (a
// host snapshot of the state, never the live tensors). Start waits for the
// write in flight first (the newer checkpoint waits for the older one), so
// checkpoints are written and committed in step order. A failed write's
// error is kept until the training thread collects it (Start, Poll or Wait
// returns it, once): it is never dropped.
//
// Thread-compatible: one thread (the training thread) calls Start, Poll and
// Wait; the writes run on the writer's own thread.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/status.h"

namespace ringmaster::engine {

class CheckpointWriter {
 public:
  using Write = std::function<absl::Status()>;

  CheckpointWriter();
  // Waits for the write in flight; an error nobody collected is logged.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Blocks until no write is in flight, then starts `write` in the
  // background. An earlier write's uncollected error is returned instead,
  // and `write` is not started.
  absl::Status Start(Write write);
  // Blocks until no write is in flight; returns an uncollected error.
  absl::Status Wait();
  // Never blocks: an uncollected error of a finished write; OK otherwise
  // (also while a write is in flight).
  absl::Status Poll();
  bool in_flight() const;

 private:
  void Loop();
  // The uncollected error, cleared. Needs mu_.
  absl::Status TakeErrorLocked();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Write> pending_;  // guarded by mu_: handed over, not yet finished
  absl::Status error_;            // guarded by mu_: the first failed write's, uncollected
  bool shutdown_ = false;         // guarded by mu_
  std::thread thread_;            // last: started after the state it reads
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_CHECKPOINT_WRITER_H_
