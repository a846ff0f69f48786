#ifndef RINGMASTER_CLIENT_COMMANDS_H_
#define RINGMASTER_CLIENT_COMMANDS_H_

// The commands of `ringmaster` that talk to the coordinator's JobService.
// Each returns an exit code (client/cli.h) and writes its result to
// console.out and, on failure, one line to console.err (client/rpc_errors.h).
// With --output json each response is printed as one line of protobuf JSON.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/cli.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::client {

using JobStub = v1::JobService::StubInterface;

// submit FILE [--set k=v ...] [--wait | --follow] [--request-id ID]
struct SubmitOptions {
  std::string file;
  std::vector<std::string> overrides;  // --set, in order
  bool wait = false;    // block until the job is terminal
  bool follow = false;  // like wait, with a live progress line and events
  // Idempotency key sent with Submit (empty: a random one per invocation).
  std::string request_id;
  // Send the spec without validating it here: only the coordinator's
  // validation applies (a CLI older or newer than the coordinator).
  bool skip_local_validation = false;
  // The plan (engine/plan/plan.h) on this device type ("": from
  // resources.device) must fit: a warning when it does not, or with strict a
  // refusal (kExitUsage, nothing sent).
  std::string gpu;
  bool strict = false;
};
// Loads and validates the spec locally (a bad spec: one line naming the
// field, kExitUsage, nothing sent), submits it and prints the job id (table)
// or the SubmitJobResponse (json). With wait/follow, watches the job to the
// end: kExitOk when it SUCCEEDED, kExitJobFailed when it FAILED or was
// CANCELLED (one line on stderr with its message).
int RunSubmit(JobStub& stub, const GlobalOptions& global, const SubmitOptions& options, Console& console);

// jobs [--state S ...]: all pages of ListJobs, newest first.
struct JobsOptions {
  std::vector<std::string> states;  // "running" or "JOB_STATE_RUNNING", any case
  int limit = 50;                   // newest first; 0: every job
};
int RunJobs(JobStub& stub, const GlobalOptions& global, const JobsOptions& options, Console& console);

// describe JOB: the spec summary, the placement and the timeline.
int RunDescribe(JobStub& stub, const GlobalOptions& global, const std::string& job_id, Console& console);

// logs JOB [-f] [--rank N] [--tail N]
struct LogsOptions {
  std::string job_id;
  bool follow = false;
  std::optional<int> rank;
  int tail_lines = 0;  // 0: every stored line
};
// Lines are printed as "[rank N] text"; the lines of each chunk the
// coordinator sends are merged by time across ranks (stable).
int RunLogs(JobStub& stub, const GlobalOptions& global, const LogsOptions& options, Console& console);

// cancel JOB [--reason TEXT]
struct CancelOptions {
  std::string job_id;
  std::string reason;  // recorded in the job's CANCELLED event
};
int RunCancel(JobStub& stub, const GlobalOptions& global, const CancelOptions& options, Console& console);

// nodes: the registered nodes, with their state (ready, cordoned, draining,
// lost) and who cordoned them.
int RunNodes(JobStub& stub, const GlobalOptions& global, Console& console);

// nodes cordon|uncordon|drain NODE [--reason TEXT] (drain: [--no-wait] [--timeout D])
struct NodeCommandOptions {
  std::string node;    // id or hostname
  std::string reason;  // recorded with the cordon
  bool wait = true;    // drain: until nothing runs on the node
  absl::Duration timeout = absl::Minutes(30);  // drain: how long to wait
};
// Cordon: no new jobs on the node; uncordon: it takes jobs again.
int RunCordon(JobStub& stub, const GlobalOptions& global, const NodeCommandOptions& options, bool uncordon,
              Console& console);
// Drain: cordons the node and has every job there checkpoint and move to
// other nodes; waits (printing each job that moved) until nothing runs
// there, unless !wait. kExitError when the timeout passes first.
int RunDrain(JobStub& stub, const GlobalOptions& global, const NodeCommandOptions& options, Console& console);

// checkpoints JOB [--all]: the job's checkpoints, newest first.
struct CheckpointsOptions {
  std::string job_id;
  bool include_incomplete = false;
};
int RunCheckpoints(JobStub& stub, const GlobalOptions& global, const CheckpointsOptions& options,
                   Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_COMMANDS_H_
