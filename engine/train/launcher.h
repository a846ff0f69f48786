#ifndef RINGMASTER_ENGINE_TRAIN_LAUNCHER_H_
#define RINGMASTER_ENGINE_TRAIN_LAUNCHER_H_

// The single-node launcher behind `ringmaster-trainer --nproc N`: runs N ranks
// of a command as child processes and supervises them.
//
// Each child gets RINGMASTER_RANK = RINGMASTER_LOCAL_RANK = r and
// RINGMASTER_WORLD_SIZE = N (plus the extra environment given), dies with the
// launcher (PR_SET_PDEATHSIG), and shares the launcher's stdout/stderr. When a
// rank exits with an error or a signal, the others get SIGTERM, then SIGKILL
// after the grace period; every child is reaped before RunLocalRanks returns.
// SIGINT/SIGTERM sent to the launcher are passed on to the ranks.
// Call from one thread; not reentrant.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringmaster::engine {

struct LaunchOptions {
  int nproc = 1;
  // The command each rank runs (argv[0] is a path).
  std::vector<std::string> argv;
  // Set in every rank's environment (e.g. the rendezvous address).
  std::map<std::string, std::string> env;
  // Between SIGTERM and SIGKILL when the ranks are being stopped.
  absl::Duration grace = absl::Seconds(5);
};

// Runs the ranks to completion. OK when every rank exits 0; otherwise ABORTED
// naming the first rank that failed and how ("rank 2 exited with status 1",
// "rank 1 was killed by signal 9"), or the error of starting one.
absl::Status RunLocalRanks(const LaunchOptions& options);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_LAUNCHER_H_
