#ifndef RINGMASTER_COMMON_SIGNALS_H_
#define RINGMASTER_COMMON_SIGNALS_H_

// Orderly shutdown for daemons: block SIGINT/SIGTERM in every thread (call
// BlockShutdownSignals() first thing in main, before threads start), then
// WaitForShutdownSignal() in the main thread returns the signal received.

namespace ringmaster {

// `extra` (e.g. SIGUSR1; 0: none) is blocked and waited for too.
void BlockShutdownSignals(int extra = 0);
int WaitForShutdownSignal(int extra = 0);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SIGNALS_H_
