#ifndef RINGMASTER_WORKER_PATHS_H_
#define RINGMASTER_WORKER_PATHS_H_

// Where the worker keeps things under its state directory, and how it finds
// the trainer binary. One place, so the supervisor, the launcher, the log
// shipper and the tests agree:
//
//   <state-dir>/agent.sock                          the trainers' gRPC socket
//   <state-dir>/node-id                             the id the coordinator gave
//   <state-dir>/node-credential                     the node's credential (0600; node_credential.h)
//   <state-dir>/jobs/<job>/gen-<g>/rank-<r>.log     stdout+stderr of a rank (appended;
//                                                   the worker's: the rank writes it
//                                                   through the descriptor it inherits)
//   <state-dir>/ranks/<job>/                        the job's private directory (its
//                                                   run account's, 0700; worker/job_dirs.h)
//   <state-dir>/ranks/<job>/tmp/                    its ranks' TMPDIR
//   <state-dir>/ranks/<job>/gen-<g>/rank-<r>/       a rank's working directory
//   <state-dir>/ranks/<job>/gen-<g>/rank-<r>/rank.json  its rank context (0600)
//
// The state directory is 0700, or 0711 when ranks run as other accounts
// (they pass through it to the socket and their job's directory, and can
// list nothing); everything in it but ranks/ and the socket is the worker's
// alone (0700 / 0600).
//
// Thread-safe (no state).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::worker {

// Longest path a Unix-domain socket address can hold (sun_path less its NUL).
inline constexpr size_t kMaxUnixSocketPath = 107;

// OK when `job_id` can name a directory: 1 to 128 characters of
// [A-Za-z0-9._-], not "." or "..". INVALID_ARGUMENT naming the problem otherwise.
absl::Status ValidateJobId(absl::string_view job_id);

std::string AgentSocketPath(const std::string& state_dir);
std::string NodeIdPath(const std::string& state_dir);
std::string NodeCredentialPath(const std::string& state_dir);
// <state-dir>/jobs: one directory per job that ran here.
std::string JobsDir(const std::string& state_dir);
std::string GenerationDir(const std::string& state_dir, const std::string& job_id, int64_t generation);
std::string RankLogPath(const std::string& state_dir, const std::string& job_id, int64_t generation, int32_t rank);
// <state-dir>/ranks, ranks/<job>, ranks/<job>/tmp.
std::string RanksDir(const std::string& state_dir);
std::string JobPrivateDir(const std::string& state_dir, const std::string& job_id);
std::string JobTmpDir(const std::string& state_dir, const std::string& job_id);
// <state-dir>/ranks/<job>/gen-<g>/rank-<r>.
std::string RankWorkDir(const std::string& state_dir, const std::string& job_id, int64_t generation, int32_t rank);

// The trainer binary: `flag_value` if set (must be an executable file);
// otherwise `ringmaster-trainer` beside `self_exe` (the worker's own path,
// from /proc/self/exe), then in ../engine/ beside it (the bazel-bin layout),
// then on `path_env` (PATH). NOT_FOUND listing where it looked.
absl::StatusOr<std::string> FindTrainer(const std::string& flag_value, const std::string& self_exe,
                                        const std::string& path_env);

// The directory holding the Python SDK's `ringmaster` package, which program
// jobs' ranks get first on their PYTHONPATH: `flag_value` if set (must hold
// ringmaster/__init__.py; NOT_FOUND otherwise); else python/ beside
// `self_exe` (an installed layout), then ../python/sdk (bazel-bin, built by
// //python:sdk_tree); else "" (none: a program then finds the SDK only where
// it is installed for the system's python3).
absl::StatusOr<std::string> FindPythonSdk(const std::string& flag_value, const std::string& self_exe);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_PATHS_H_
