#ifndef RINGMASTER_CLIENT_WATCH_H_
#define RINGMASTER_CLIENT_WATCH_H_

// Following a job to its end over JobService.WatchJob, surviving a
// coordinator restart: when the stream breaks (UNAVAILABLE, or it ends before
// the job does), the watcher waits for the coordinator with a GetJob that
// waits for the connection (bounded by GlobalOptions::reconnect_timeout) and
// reopens the stream after the last event it saw. FollowJob shows it as
// `submit --wait/--follow` and `attach` do.

#include <functional>
#include <string>

#include "client/cli.h"
#include "grpcpp/support/status.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::client {

struct WatchOutcome {
  grpc::Status status;  // OK once the job is terminal, or cannot ever start (Unstartable)
  std::string rpc;      // the call that failed, for the error line
  v1::Job job;          // the last state seen
};

// A job that waits, never ran, and that no registered node could ever run
// (Job.unschedulable, the coordinator's judgement of every node's whole
// capacity): waiting on it would wait forever.
bool Unstartable(const v1::Job& job);

// Calls `on_update` for every message (the job, and the events since the
// previous message) until the job is terminal or Unstartable.
WatchOutcome WatchToEnd(v1::JobService::StubInterface& stub, const GlobalOptions& global, const std::string& job_id,
                        const std::function<void(const v1::WatchJobResponse&)>& on_update);

// "2026-11-18T11:05:06Z  RUNNING (STARTING -> RUNNING): every rank joined"
std::string FormatEventLine(const v1::JobEvent& event);

// Watches the job to its end and returns the exit code: kExitOk when it
// SUCCEEDED, kExitJobFailed when it FAILED or was CANCELLED (the final line,
// client/progress.h, on console.err) or is Unstartable (why, and that it
// stays queued), the RPC error's otherwise.
// show_progress (`--follow`, `attach`): events and the live progress line,
// then the final line; json/yaml: every WatchJobResponse. Otherwise
// (`--wait`): only the final line, or the last WatchJobResponse.
int FollowJob(v1::JobService::StubInterface& stub, const GlobalOptions& global, const std::string& job_id,
              bool show_progress, Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_WATCH_H_
