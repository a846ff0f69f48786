// ringmaster jobs [--state S ...] [-l k=v ...] [--limit N] and ringmaster cancel JOB [JOB ...].

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// A label key as JobSpec.labels allows it: 1 to 63 characters of [A-Za-z0-9._/-].
bool IsLabelKey(absl::string_view key) {
  if (key.empty() || key.size() > 63) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' || c == '-';
  });
}

// -l: each "key=value[,key=value...]" onto `selector`; false (after writing
// the one-line error naming the bad part) when one is malformed or a key is
// asked for with two values.
bool ParseLabelSelector(const std::vector<std::string>& texts,
                        google::protobuf::Map<std::string, std::string>* selector, std::ostream& err) {
  for (const std::string& text : texts) {
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      const size_t eq = part.find('=');
      if (eq == absl::string_view::npos) {
        err << "ringmaster: -l: expected key=value, got \"" << part << "\"\n";
        return false;
      }
      const std::string key(part.substr(0, eq));
      const std::string value(part.substr(eq + 1));
      if (!IsLabelKey(key)) {
        err << "ringmaster: -l: bad label key \"" << key << "\" in \"" << part
            << "\" (1 to 63 characters of [A-Za-z0-9._/-])\n";
        return false;
      }
      auto [it, inserted] = selector->insert({key, value});
      if (!inserted && it->second != value) {
        err << "ringmaster: -l: label " << key << " asked for twice, as \"" << it->second << "\" and \"" << value
            << "\"\n";
        return false;
      }
    }
  }
  return true;
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
  if (!ParseLabelSelector(options.labels, request.mutable_label_selector(), console.err)) return kExitUsage;
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
    for (v1::JobSummary& job : *page.mutable_jobs()) {
      if (options.limit > 0 && all.jobs_size() >= options.limit) {
        more = true;
        break;
      }
      *all.add_jobs() = std::move(job);
    }
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty() && (options.limit == 0 || all.jobs_size() < options.limit));
  more = more || !request.page_token().empty();

  if (IsStructured(global.output)) {
    PrintMessage(all, global.output, console.out);
    return kExitOk;
  }
  const bool wide = global.output == OutputFormat::kWide;
  std::vector<std::string> header = {"ID", "NAME", "STATE", "QUEUE", "PRIORITY", "GEN", "RANKS", "AGE", "PROGRESS"};
  if (wide) header.insert(header.end(), {"POSITION", "OWNER", "LABELS"});
  Table table(std::move(header));
  const absl::Time now = console.clock->Now();
  std::vector<const v1::JobSummary*> unschedulable;
  for (const v1::JobSummary& job : all.jobs()) {
    std::string state = StateName(job.state());
    if (!job.unschedulable().empty()) {
      state += " (unschedulable)";
      unschedulable.push_back(&job);
    }
    // spec_hidden: another queue's job (the coordinator's --visibility team).
    std::vector<std::string> row = {job.id(),
                                    job.spec_hidden() ? "(hidden)" : job.spec().name(),
                                    state,
                                    job.spec().queue().empty() ? "-" : job.spec().queue(),
                                    absl::StrCat(job.spec().priority()),
                                    absl::StrCat(job.generation()),
                                    FormatRanks(job),
                                    FormatAge(job.submit_time(), now),
                                    FormatProgressCell(job.progress())};
    if (wide) {
      // Its place among the waiting jobs; an abridged summary (a job stored
      // before the spec's limits) lists only some labels.
      row.insert(row.end(), {job.queue_position() > 0 ? absl::StrCat("#", job.queue_position()) : "-",
                             job.owner().empty() ? "-" : job.owner(),
                             FormatLabels(job.spec().labels()) + (job.abridged() ? ",..." : "")});
    }
    table.AddRow(std::move(row));
  }
  table.Render(console.out);
  // Why, under the table: the reason is a sentence, not a cell.
  for (const v1::JobSummary* job : unschedulable) console.out << job->id() << ": " << job->unschedulable() << "\n";
  if (more) console.out << "(the " << all.jobs_size() << " newest shown; --limit N for more, --limit 0 for all)\n";
  return kExitOk;
}

namespace {

// One job of `cancel`: true when the coordinator took the request.
bool CancelOne(JobStub& stub, const GlobalOptions& global, const std::string& job_id, const std::string& reason,
               Console& console) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  v1::CancelJobResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.CancelJob(&context, request, &response);
  if (!status.ok()) {
    ReportRpcError(status, {global.coordinator, "CancelJob", job_id, global.rpc_timeout}, console.err);
    return false;
  }
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return true;
  }
  const v1::JobState state = response.job().state();
  if (state == v1::JOB_STATE_CANCELLED) {
    console.out << job_id << " cancelled\n";
  } else if (IsTerminal(state)) {
    console.out << job_id << " already " << StateName(state) << "\n";
  } else {
    console.out << job_id << " cancelling (" << StateName(state) << "; its ranks are being stopped)\n";
  }
  return true;
}

}  // namespace

int RunCancel(JobStub& stub, const GlobalOptions& global, const CancelOptions& options, Console& console) {
  bool all_ok = true;
  for (const std::string& job_id : options.job_ids) {
    all_ok = CancelOne(stub, global, job_id, options.reason, console) && all_ok;
    console.out.flush();  // each result as it comes, the errors in between
  }
  return all_ok ? kExitOk : kExitError;
}

}  // namespace ringmaster::client
