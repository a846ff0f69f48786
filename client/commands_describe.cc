// ringmaster describe JOB: the job, a summary of its spec, every setting
// with its effective value and where it came from, its placement (ranks with
// node, local rank and data/pipeline coordinates) and its timeline (read
// page by page, newest first; events the coordinator folded are counted).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/progress.h"
#include "client/rpc_errors.h"
#include "common/spec.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// describe reads the timeline in pages of this many events, at most this
// many pages (a coordinator keeps a bounded timeline: a few pages).
constexpr int kEventsPageSize = 500;
constexpr int kMaxEventPages = 100;

std::string Ints(const google::protobuf::RepeatedField<int32_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

std::string ModelSummary(const v1::ModelSpec& model) {
  switch (model.kind_case()) {
    case v1::ModelSpec::kMlp:
      return absl::StrCat("mlp, hidden ", Ints(model.mlp().hidden_sizes()));
    case v1::ModelSpec::kCnn:
      return absl::StrCat("cnn, channels ", Ints(model.cnn().channels()), ", hidden ",
                          Ints(model.cnn().hidden_sizes()));
    case v1::ModelSpec::kGpt: {
      const v1::GptSpec& g = model.gpt();
      return absl::StrCat("gpt, ", g.layers(), " layers, ", g.heads(), " heads, width ", g.width(), ", context ",
                          g.context());
    }
    default:
      return "-";
  }
}

std::string TrainingSummary(const v1::TrainingSpec& training) {
  if (training.length_case() == v1::TrainingSpec::kSteps) return absl::StrCat(training.steps(), " steps");
  if (training.length_case() == v1::TrainingSpec::kEpochs) return absl::StrCat(training.epochs(), " epochs");
  return "-";
}

void PrintField(std::ostream& out, const std::string& label, const std::string& value) {
  out << absl::StrFormat("%-15s %s\n", label + ":", value);
}

// "Goodput: 79.0% of the time since placed" and where the time went, each
// phase in seconds (docs/operations.md defines them).
void PrintGoodput(const v1::GoodputBreakdown& g, std::ostream& out) {
  if (!g.has_first_placement_time()) {
    PrintField(out, "Goodput", absl::StrFormat("- (queued %.0fs, not placed yet)", g.queued_seconds()));
    return;
  }
  PrintField(out, "Goodput", absl::StrFormat("%.1f%% of the time since placed", 100 * g.goodput()));
  PrintField(out, "Time", absl::StrFormat("training %.0fs, checkpoint stall %.0fs, recomputed %.0fs, "
                                          "restart %.0fs, starting %.0fs, queued %.0fs",
                                          g.training_seconds(), g.checkpoint_stall_seconds(),
                                          g.recomputed_seconds(), g.restart_seconds(), g.starting_seconds(),
                                          g.queued_seconds()));
}

void PrintJob(const v1::Job& job, absl::Time now, std::ostream& out) {
  PrintField(out, "Job", job.id());
  PrintField(out, "Name", job.spec().name());
  std::string state = StateName(job.state());
  if (!job.reason().empty()) absl::StrAppend(&state, " (", job.reason(), ")");
  PrintField(out, "State", state);
  if (!job.message().empty()) PrintField(out, "Message", job.message());
  if (!job.unschedulable().empty()) PrintField(out, "Unschedulable", job.unschedulable());
  PrintField(out, "Priority", absl::StrCat(job.spec().priority()));
  PrintField(out, "Generation", absl::StrCat(job.generation(), " (", job.restarts(), " restarts)"));
  PrintField(out, "Submitted", absl::StrCat(FormatTimestamp(job.submit_time()), " (", FormatAge(job.submit_time(), now),
                                            " ago)"));
  PrintField(out, "Started", FormatTimestamp(job.start_time()));
  PrintField(out, "Ended", FormatTimestamp(job.end_time()));
  const v1::StepMetrics& p = job.progress();
  if (p.step() > 0 || p.total_steps() > 0) PrintField(out, "Progress", FormatProgressLine(job));
  if (p.eval_step() > 0) {
    std::string eval = absl::StrFormat("loss %.4f", p.eval_loss());
    if (p.eval_accuracy() > 0) absl::StrAppend(&eval, absl::StrFormat(", accuracy %.2f%%", 100 * p.eval_accuracy()));
    absl::StrAppend(&eval, " at step ", p.eval_step());
    PrintField(out, "Evaluation", eval);
  }
  if (job.has_last_checkpoint()) {
    PrintField(out, "Checkpoint", absl::StrCat("step ", job.last_checkpoint().step(), " at ",
                                               job.last_checkpoint().path()));
  }
  if (job.has_checkpoint_interval()) {
    // "every 12.4s (auto: sqrt(2 x 4ms stall x 4h MTBF) = 12.4s; MTBF: the prior (no failures seen))"
    const v1::CheckpointInterval& interval = job.checkpoint_interval();
    const std::string every = interval.seconds() > 0 ? absl::StrFormat("every %.3gs", interval.seconds())
                              : interval.steps() > 0 ? absl::StrCat("every ", interval.steps(), " steps")
                                                     : std::string("at the end only");
    PrintField(out, "Checkpoints", absl::StrCat(every, " (", interval.why(), ")"));
  }
  if (job.has_goodput()) PrintGoodput(job.goodput(), out);
  if (job.abridged()) {
    PrintField(out, "Abridged", "stored before the spec's limits and too large to show whole: its labels, node "
                                "selectors and env are cut to their limits");
  }
}

void PrintSpec(const v1::JobSpec& spec, std::ostream& out) {
  out << "\nSpec:\n";
  PrintField(out, "  Model", ModelSummary(spec.model()));
  std::string data = v1::DataSpec::Dataset_Name(spec.data().dataset());
  if (!spec.data().path().empty()) absl::StrAppend(&data, " ", spec.data().path());
  absl::StrAppend(&data, ", batch ", spec.data().batch_size());
  PrintField(out, "  Data", data);
  PrintField(out, "  Training", TrainingSummary(spec.training()));
  PrintField(out, "  Optimizer", absl::StrCat(v1::OptimizerSpec::Type_Name(spec.optimizer().type()), ", lr ",
                                              spec.optimizer().lr()));
  PrintField(out, "  Precision", v1::PrecisionSpec::Compute_Name(spec.precision().compute()));
  PrintField(out, "  Parallelism", absl::StrCat("data ", spec.parallelism().data(), " x pipeline ",
                                                spec.parallelism().pipeline()));
  const v1::ResourceSpec& r = spec.resources();
  PrintField(out, "  Resources", absl::StrCat(r.nodes(), " node(s) x ", r.ranks_per_node(), " rank(s), ",
                                              v1::ResourceSpec::Device_Name(r.device()), ", ",
                                              r.cpus_per_rank(), " cpu(s)/rank"));
  PrintField(out, "  Restarts", absl::StrCat("at most ", spec.restart().max_restarts(),
                                             spec.restart().move_stragglers() ? "; moved off a straggler's node" : ""));
}

// Every setting the job runs with, and where it came from: the spec, a --set,
// or a default.
void PrintSettings(const v1::Job& job, std::ostream& out) {
  const bool known = job.has_submitted();
  const std::vector<std::string> overrides(job.submitted().overrides().begin(), job.submitted().overrides().end());
  out << "\nSettings:";
  if (!known) out << " (where each came from was not recorded: the job predates it)";
  out << "\n";
  Table table({"SETTING", "VALUE", "SOURCE"});
  for (const SpecSetting& s : SpecSettings(job.spec(), known ? &job.submitted().spec() : nullptr, overrides)) {
    table.AddRow({s.path, s.value, std::string(SettingSourceName(s.source))});
  }
  table.Render(out);
}

void PrintPlacement(const v1::Placement& placement, std::ostream& out) {
  out << "\nPlacement:";
  if (placement.world_size() == 0) {
    out << " none\n";
    return;
  }
  out << " generation " << placement.generation() << ", " << placement.world_size() << " ranks on "
      << placement.nodes() << " node(s) x " << placement.ranks_per_node() << ", data "
      << placement.data_parallel_size() << " x pipeline " << placement.pipeline_parallel_size() << "\n";
  Table table({"RANK", "NODE", "HOSTNAME", "LOCAL", "NODE_RANK", "DATA", "STAGE", "GPU"});
  for (const v1::RankAssignment& r : placement.ranks()) {
    table.AddRow({absl::StrCat(r.global_rank()), r.node_id(), r.hostname(), absl::StrCat(r.local_rank()),
                  absl::StrCat(r.node_rank()), absl::StrCat(r.data_rank()), absl::StrCat(r.pipeline_rank()),
                  r.gpu_uuid().empty() ? "-" : r.gpu_uuid()});
  }
  table.Render(out);
}

void PrintEvents(const google::protobuf::RepeatedPtrField<v1::JobEvent>& events, std::ostream& out) {
  out << "\nEvents:";
  if (events.empty()) {
    out << " none\n";
    return;
  }
  out << "\n";
  Table table({"TIME", "GEN", "EVENT", "STATE", "REASON"});
  for (const v1::JobEvent& e : events) {
    if (e.folded() > 0) {  // the coordinator keeps the first and the newest of each kind
      table.AddRow({"...", "", EventKindName(e.kind()), "", absl::StrCat(e.folded(), " more, folded")});
    }
    std::string state = StateName(e.to_state());
    if (e.from_state() != e.to_state()) state = absl::StrCat(StateName(e.from_state()), " -> ", state);
    table.AddRow({FormatTimestamp(e.time()), absl::StrCat(e.generation()), EventKindName(e.kind()), state,
                  e.reason().empty() ? "-" : e.reason()});
  }
  table.Render(out);
}

}  // namespace

int RunDescribe(JobStub& stub, const GlobalOptions& global, const std::string& job_id, Console& console) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  request.set_include_events(true);
  request.set_events_page_size(kEventsPageSize);
  // The job and the newest events, then older pages until the first event
  // (a timeline is bounded: a few pages).
  v1::GetJobResponse response;
  std::vector<v1::JobEvent> events;  // newest page first, each page in order
  std::vector<size_t> page_starts;
  for (int page = 0; page < kMaxEventPages; ++page) {
    v1::GetJobResponse got;
    grpc::ClientContext context;
    SetTimeout(&context, global.rpc_timeout);
    grpc::Status status = stub.GetJob(&context, request, &got);
    if (!status.ok()) {
      return ReportRpcError(status, {global.coordinator, "GetJob", job_id, global.rpc_timeout}, console.err);
    }
    if (page == 0) response = got;
    page_starts.push_back(events.size());
    events.insert(events.end(), got.events().begin(), got.events().end());
    request.set_events_page_token(got.events_next_page_token());
    if (request.events_page_token().empty()) break;
  }
  response.clear_events();
  for (size_t p = page_starts.size(); p-- > 0;) {  // oldest page first
    const size_t end = p + 1 < page_starts.size() ? page_starts[p + 1] : events.size();
    for (size_t i = page_starts[p]; i < end; ++i) *response.add_events() = std::move(events[i]);
  }
  response.set_events_next_page_token(request.events_page_token());  // empty: every page read
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return kExitOk;
  }
  PrintJob(response.job(), console.clock->Now(), console.out);
  PrintSpec(response.job().spec(), console.out);
  PrintSettings(response.job(), console.out);
  PrintPlacement(response.job().placement(), console.out);
  PrintEvents(response.events(), console.out);
  return kExitOk;
}

}  // namespace ringmaster::client
