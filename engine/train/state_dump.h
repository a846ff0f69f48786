#ifndef RINGMASTER_ENGINE_TRAIN_STATE_DUMP_H_
#define RINGMASTER_ENGINE_TRAIN_STATE_DUMP_H_

// What a trainer is doing, written to its log on request: the worker sends
// SIGUSR1 (and SIGCONT, in case it is stopped) to a rank it is about to stop,
// e.g. one that made no step progress for the job's progress timeout, then
// SIGTERM and SIGKILL. The dump is, on the log's fd:
//
//   === ringmaster state dump (SIGUSR1), pid 4242 ===
//   step 120, phase "gradient allreduce" for 35.21 s
//   thread 4242 "ringmaster-trai" state S wchan futex_wait_queue syscall 202 0x7f..
//   ... one line per thread (from /proc/self/task: what each one waits on)
//   --- thread 4242 stack
//   ringmaster-trainer(+0x1a2b3c)[0x55...]   (addr2line -e BINARY -f 0x1a2b3c)
//   ...
//   === end of state dump ===
//
// Stacks are taken by signalling each thread (SIGURG, handler runs
// backtrace(3) only); a thread that does not answer within 200 ms (signals
// blocked) is listed without a stack. The dump is written by its own thread,
// never from a signal handler, so the state of the hung threads does not
// matter. Step and phase are process-wide and lock-free; SetTrainingPhase
// takes a string with static storage.

#include <cstdint>

#include "absl/status/status.h"

namespace ringmaster::engine {

void SetTrainingStep(int64_t step);
void SetTrainingPhase(const char* phase);

// Sets the phase for the scope, then the previous one back.
class ScopedTrainingPhase {
 public:
  explicit ScopedTrainingPhase(const char* phase);
  ~ScopedTrainingPhase();
  ScopedTrainingPhase(const ScopedTrainingPhase&) = delete;
  ScopedTrainingPhase& operator=(const ScopedTrainingPhase&) = delete;

 private:
  const char* previous_;
};

// Installs the SIGUSR1 and SIGURG handlers and starts the dump thread, which
// writes every dump to `fd`. Once per process; later calls do nothing.
absl::Status InstallStateDumpHandler(int fd);

// Writes a dump to `fd` now, from the calling thread (what the dump thread
// does on SIGUSR1). For tests.
void WriteStateDump(int fd);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_STATE_DUMP_H_
