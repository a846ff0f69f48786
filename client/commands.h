#ifndef RINGMASTER_CLIENT_COMMANDS_H_
#define RINGMASTER_CLIENT_COMMANDS_H_

// The commands of `ringmaster` that talk to the coordinator's JobService.
// Each returns an exit code (client/cli.h) and writes its result to
// console.out and, on failure, one line to console.err (client/rpc_errors.h).
// With --output json each response is printed as one line of protobuf JSON,
// with yaml as one YAML document (client/output.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::client {

using JobStub = v1::JobService::StubInterface;

// submit FILE|- [--set k=v ...] [--wait | --follow] [--request-id ID]
struct SubmitOptions {
  // The spec file; "-": console.in, JSON when its first non-blank character
  // is '{', else YAML, named "stdin" unless it (or a --set) names itself.
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
  // refusal (kExitUsage, nothing sent). strict also refuses what the cluster
  // could never run or whose data.path is outside its data roots
  // (client/cluster_check.h).
  std::string gpu;
  bool strict = false;
};
// Loads and validates the spec locally (a bad spec: one line naming the
// field, kExitUsage, nothing sent), submits it and prints the job id (table)
// or the SubmitJobResponse (json). With wait/follow, watches the job to the
// end: kExitOk when it SUCCEEDED, kExitJobFailed when it FAILED or was
// CANCELLED (one line on stderr with its message).
int RunSubmit(JobStub& stub, const GlobalOptions& global, const SubmitOptions& options, Console& console);

// jobs [--state S ...] [-l k=v[,k=v] ...]: all pages of ListJobs, newest
// first; -o wide adds OWNER and LABELS.
struct JobsOptions {
  std::vector<std::string> states;  // "running" or "JOB_STATE_RUNNING", any case
  // -l: "key=value" or "k1=v1,k2=v2" each; the jobs carry every one of them.
  std::vector<std::string> labels;
  int limit = 50;  // newest first; 0: every job
};
int RunJobs(JobStub& stub, const GlobalOptions& global, const JobsOptions& options, Console& console);

// describe JOB: the spec summary, the placement and the timeline.
int RunDescribe(JobStub& stub, const GlobalOptions& global, const std::string& job_id, Console& console);

// logs JOB [-f] [--rank N] [--tail N] [--since D] [--timestamps] [--generation N]
struct LogsOptions {
  std::string job_id;
  bool follow = false;
  std::optional<int> rank;
  int tail_lines = 0;  // 0: every stored line
  // Only lines whose LogLine.time is after console.clock's now - since (the
  // coordinator sends the --tail lines, the CLI drops the older ones).
  std::optional<absl::Duration> since;
  bool timestamps = false;  // prefix each line with its time, RFC 3339
  int64_t generation = 0;   // only this generation (>= 1); 0: the current one
};
// Lines are printed as "[rank N] text" (--timestamps: "TIME [rank N] text");
// the lines of each chunk the coordinator sends are merged by time across
// ranks (stable).
int RunLogs(JobStub& stub, const GlobalOptions& global, const LogsOptions& options, Console& console);

// cancel JOB [JOB ...] [--reason TEXT]
struct CancelOptions {
  std::vector<std::string> job_ids;
  std::string reason;  // recorded in each job's CANCELLED event
};
// Cancels each job in turn, one line per job (or one response each with
// json/yaml; a failure is its error line on console.err); kExitError when
// any failed, after trying them all.
int RunCancel(JobStub& stub, const GlobalOptions& global, const CancelOptions& options, Console& console);

// attach JOB: follows a job as `submit --follow` does (events, the live
// progress line, the final line; json/yaml: every WatchJobResponse) until it
// ends: kExitOk when it SUCCEEDED, kExitJobFailed when it FAILED or was
// CANCELLED.
int RunAttach(JobStub& stub, const GlobalOptions& global, const std::string& job_id, Console& console);

// nodes: the registered nodes, with their state (ready, cordoned, draining,
// lost) and who cordoned them.
int RunNodes(JobStub& stub, const GlobalOptions& global, Console& console);

// queues: each queue's quota, use, borrowing, fair-share usage, running and
// waiting jobs (admins see every queue, others their own).
int RunQueues(JobStub& stub, const GlobalOptions& global, Console& console);

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

// usage [--by user|queue|job] [--since T]: GPU- and CPU-slot-hours per
// key (GetUsage); -o csv for spreadsheets.
struct UsageOptions {
  std::string by = "user";
  // RFC 3339 ("2026-11-01T00:00:00Z") or a duration that long ago ("24h",
  // "7d"); empty: all of it.
  std::string since;
};
// --since as a time (`now` for durations); INVALID_ARGUMENT naming --since.
absl::StatusOr<absl::Time> ParseSince(const std::string& text, absl::Time now);
int RunUsage(JobStub& stub, const GlobalOptions& global, const UsageOptions& options, Console& console);

// checkpoints JOB [--all]: the job's checkpoints, newest first.
struct CheckpointsOptions {
  std::string job_id;
  bool include_incomplete = false;
};
int RunCheckpoints(JobStub& stub, const GlobalOptions& global, const CheckpointsOptions& options,
                   Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_COMMANDS_H_
