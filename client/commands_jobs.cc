// ringmaster jobs [--state S ...] [--limit N] and ringmaster cancel JOB.

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

constexpr int kPageSize = 100;

// "running", "RUNNING" or "JOB_STATE_RUNNING".
bool ParseJobState(const std::string& text, v1::JobState* state) {
  std::string name = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(name, "JOB_STATE_")) name = "JOB_STATE_" + name;
  return v1::JobState_Parse(name, state) && *state != v1::JOB_STATE_UNSPECIFIED;
}

}  // namespace

int RunJobs(JobStub& stub, const GlobalOptions& global, const JobsOptions& options, Console& console) {
  v1::ListJobsRequest request;
  request.set_page_size(options.limit > 0 ? std::min(options.limit, kPageSize) : kPageSize);
  for (const std::string& text : options.states) {
    v1::JobState state;
    if (!ParseJobState(text, &state)) {
      console.err << "ringmaster: --state: unknown job state \"" << text
                  << "\" (expected queued, placed, starting, running, restarting, succeeded, failed or cancelled)\n";
      return kExitUsage;
    }
    request.add_states(state);
  }
  v1::ListJobsResponse all;
  bool more = false;  // jobs beyond --limit
  do {
    v1::ListJobsResponse page;
    grpc::ClientContext context;
    SetTimeout(&context, global.rpc_timeout);
    grpc::Status status = stub.ListJobs(&context, request, &page);
    if (!status.ok()) {
      return ReportRpcError(status, {global.coordinator, "ListJobs", "", global.rpc_timeout}, console.err);
    }
    for (v1::Job& job : *page.mutable_jobs()) {
      if (options.limit > 0 && all.jobs_size() >= options.limit) {
        more = true;
        break;
      }
      *all.add_jobs() = std::move(job);
    }
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty() && (options.limit == 0 || all.jobs_size() < options.limit));
  more = more || !request.page_token().empty();

  if (global.output == OutputFormat::kJson) {
    PrintJsonLine(all, console.out);
    return kExitOk;
  }
  Table table({"ID", "NAME", "STATE", "PRIORITY", "GEN", "RANKS", "AGE", "PROGRESS"});
  const absl::Time now = console.clock->Now();
  std::vector<const v1::Job*> unschedulable;
  for (const v1::Job& job : all.jobs()) {
    std::string state = StateName(job.state());
    if (!job.unschedulable().empty()) {
      state += " (unschedulable)";
      unschedulable.push_back(&job);
    }
    table.AddRow({job.id(), job.spec().name(), state, absl::StrCat(job.spec().priority()),
                  absl::StrCat(job.generation()), FormatRanks(job), FormatAge(job.submit_time(), now),
                  FormatProgressCell(job.progress())});
  }
  table.Render(console.out);
  // Why, under the table: the reason is a sentence, not a cell.
  for (const v1::Job* job : unschedulable) console.out << job->id() << ": " << job->unschedulable() << "\n";
  if (more) console.out << "(the " << all.jobs_size() << " newest shown; --limit N for more, --limit 0 for all)\n";
  return kExitOk;
}

int RunCancel(JobStub& stub, const GlobalOptions& global, const CancelOptions& options, Console& console) {
  v1::CancelJobRequest request;
  request.set_job_id(options.job_id);
  request.set_reason(options.reason);
  v1::CancelJobResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.CancelJob(&context, request, &response);
  if (!status.ok()) {
    return ReportRpcError(status, {global.coordinator, "CancelJob", options.job_id, global.rpc_timeout},
                          console.err);
  }
  if (global.output == OutputFormat::kJson) {
    PrintJsonLine(response, console.out);
    return kExitOk;
  }
  const v1::JobState state = response.job().state();
  if (state == v1::JOB_STATE_CANCELLED) {
    console.out << options.job_id << " cancelled\n";
  } else if (IsTerminal(state)) {
    console.out << options.job_id << " already " << StateName(state) << "\n";
  } else {
    console.out << options.job_id << " cancelling (" << StateName(state)
                << "; its ranks are being stopped)\n";
  }
  return kExitOk;
}

}  // namespace ringmaster::client
