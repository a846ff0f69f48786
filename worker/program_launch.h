#ifndef RINGMASTER_WORKER_PROGRAM_LAUNCH_H_
#define RINGMASTER_WORKER_PROGRAM_LAUNCH_H_

// What a program job's rank (JobSpec.program) gets beside what every rank
// gets (worker/rank_launcher.h): its command resolved on this node, the
// environment torchrun would give it, the Python SDK on its PYTHONPATH, and,
// on rank 0's node, a check that the generation's MASTER_PORT is free.
// Pure functions (except the two that look at the node); thread-safe.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/node_service.pb.h"

namespace ringmaster::worker {

// `name` as execve needs it: a name with a '/' as it is (relative to the
// rank's working directory), else the first executable file of that name in
// the colon-separated `path_list` (the rank's PATH). INVALID_ARGUMENT naming
// program.command[0] when there is none: the node cannot run the job.
absl::StatusOr<std::string> ResolveProgram(const std::string& name, const std::string& path_list);

// torchrun's variables for one rank of `order` (proto/job_spec.proto,
// ProgramSpec) and RINGMASTER_RANK_CONTEXT=`context_path`.
std::map<std::string, std::string> TorchrunEnv(const v1::StartRanks& order, const v1::RankAssignment& rank,
                                               const std::string& context_path);

// PYTHONPATH with `sdk_dir` (the directory holding the `ringmaster` package)
// in front of the job's own value (`job_value`, may be empty); `job_value`
// when `sdk_dir` is empty.
std::string PythonPathWithSdk(const std::string& sdk_dir, const std::string& job_value);

// OK when `port` can be bound on this node (every address, as torch's
// TCPStore binds it); FAILED_PRECONDITION naming the port otherwise (another
// process holds it: a restart elsewhere, or later, gets another one).
absl::Status CheckMasterPortFree(int port);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_PROGRAM_LAUNCH_H_
