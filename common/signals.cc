#include "common/signals.h"

#include <signal.h>

namespace ringmaster {
namespace {

sigset_t ShutdownSet(int extra) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (extra != 0) sigaddset(&set, extra);
  return set;
}

}  // namespace

void BlockShutdownSignals(int extra) {
  sigset_t set = ShutdownSet(extra);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForShutdownSignal(int extra) {
  sigset_t set = ShutdownSet(extra);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace ringmaster
