#ifndef RINGMASTER_COMMON_EXIT_CODES_H_
#define RINGMASTER_COMMON_EXIT_CODES_H_

// Exit codes with a meaning between ringmaster-trainer, the worker that
// supervises it and the coordinator that decides what to do about an exit.

namespace ringmaster {

// The rank failed in a way no restart can fix: its spec or rank context is
// invalid, or the coordinator refused one of its requests as INVALID_ARGUMENT
// (a checkpoint commit, say). The coordinator ends the job at once, FAILED,
// without using its restart budget. (sysexits.h's EX_CONFIG.)
inline constexpr int kExitUnrecoverable = 78;

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_EXIT_CODES_H_
