#include "client/watch.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/output.h"
#include "client/progress.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// Streams in a row that broke without delivering anything before giving up.
constexpr int kMaxFruitlessReconnects = 5;

}  // namespace

bool Unstartable(const v1::Job& job) {
  return job.state() == v1::JOB_STATE_QUEUED && job.generation() == 0 && !job.unschedulable().empty();
}

WatchOutcome WatchToEnd(v1::JobService::StubInterface& stub, const GlobalOptions& global, const std::string& job_id,
                        const std::function<void(const v1::WatchJobResponse&)>& on_update) {
  WatchOutcome outcome;
  int64_t after_sequence = 0;
  int fruitless = 0;
  for (;;) {
    grpc::ClientContext context;
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_after_sequence(after_sequence);
    std::unique_ptr<grpc::ClientReaderInterface<v1::WatchJobResponse>> reader = stub.WatchJob(&context, request);
    v1::WatchJobResponse response;
    bool delivered = false;
    bool terminal = false;
    while (!terminal && reader->Read(&response)) {
      delivered = true;
      for (const v1::JobEvent& event : response.events()) after_sequence = std::max(after_sequence, event.sequence());
      outcome.job = response.job();
      on_update(response);
      terminal = IsTerminal(response.job().state()) || Unstartable(response.job());
    }
    if (terminal) {
      context.TryCancel();
      while (reader->Read(&response)) {
      }
      (void)reader->Finish();
      outcome.status = grpc::Status::OK;
      return outcome;
    }
    grpc::Status status = reader->Finish();
    if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      outcome.status = status;
      outcome.rpc = "WatchJob";
      return outcome;
    }
    fruitless = delivered ? 0 : fruitless + 1;
    if (fruitless > kMaxFruitlessReconnects) {
      outcome.status = status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                  "the job's watch stream keeps ending before the job does")
                                   : status;
      outcome.rpc = "WatchJob";
      return outcome;
    }
    // Wait (bounded) for the coordinator to be back, then look at the job.
    grpc::ClientContext get_context;
    get_context.set_wait_for_ready(true);
    SetTimeout(&get_context, global.reconnect_timeout);
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    v1::GetJobResponse got;
    grpc::Status get_status = stub.GetJob(&get_context, get, &got);
    if (!get_status.ok()) {
      // A coordinator that never came back is reported as the broken stream.
      outcome.status = get_status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && !status.ok() ? status
                                                                                                       : get_status;
      outcome.rpc = "GetJob";
      return outcome;
    }
    if (IsTerminal(got.job().state()) || Unstartable(got.job())) {
      v1::WatchJobResponse last;
      *last.mutable_job() = got.job();
      outcome.job = got.job();
      on_update(last);
      outcome.status = grpc::Status::OK;
      return outcome;
    }
  }
}

std::string FormatEventLine(const v1::JobEvent& event) {
  std::string line = absl::StrCat(FormatTimestamp(event.time()), "  ", EventKindName(event.kind()));
  if (event.from_state() != event.to_state()) {
    absl::StrAppend(&line, " (", StateName(event.from_state()), " -> ", StateName(event.to_state()), ")");
  }
  if (!event.reason().empty()) absl::StrAppend(&line, ": ", event.reason());
  return line;
}

int FollowJob(v1::JobService::StubInterface& stub, const GlobalOptions& global, const std::string& job_id,
              bool show_progress, Console& console) {
  const bool structured = IsStructured(global.output);
  ProgressPrinter printer(console.out, console.out_is_tty);
  v1::WatchJobResponse last;
  WatchOutcome outcome = WatchToEnd(stub, global, job_id, [&](const v1::WatchJobResponse& update) {
    last = update;
    if (!show_progress) return;
    if (structured) {
      PrintMessage(update, global.output, console.out);
      console.out.flush();
      return;
    }
    if (!update.older_events_page_token().empty()) {
      printer.Note(absl::StrCat("(earlier events not shown: ringmaster describe ", job_id, ")"));
    }
    for (const v1::JobEvent& event : update.events()) printer.Note(FormatEventLine(event));
    if (!IsTerminal(update.job().state())) printer.Update(FormatProgressLine(update.job()));
  });
  printer.Finish();
  if (!outcome.status.ok()) {
    return ReportRpcError(outcome.status, {global.coordinator, outcome.rpc, job_id, absl::InfiniteDuration()},
                          console.err);
  }
  if (structured && !show_progress) PrintMessage(last, global.output, console.out);
  if (Unstartable(outcome.job)) {
    console.err << "ringmaster: job " << job_id << " cannot start: no registered node could ever run it: "
                << outcome.job.unschedulable() << "; it stays QUEUED until such a node registers (`ringmaster "
                << "nodes` lists them; `ringmaster cancel " << job_id << "` removes it)\n";
    return kExitJobFailed;
  }
  const std::string final_line = FormatFinalLine(outcome.job, console.clock->Now());
  if (outcome.job.state() != v1::JOB_STATE_SUCCEEDED) {
    console.err << "ringmaster: " << final_line << "\n";
    return kExitJobFailed;
  }
  if (!structured) console.out << final_line << "\n";
  return kExitOk;
}

}  // namespace ringmaster::client
