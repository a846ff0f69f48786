// ringmaster logs JOB [-f] [--rank N] [--tail N] [--since D] [--timestamps] [--generation N]

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

bool EarlierThan(const v1::LogLine* a, const v1::LogLine* b) {
  if (a->time().seconds() != b->time().seconds()) return a->time().seconds() < b->time().seconds();
  return a->time().nanos() < b->time().nanos();
}

// The chunk's lines merged by time across ranks; lines of one rank keep the
// order they came in. With `timestamps` each starts with its time as
// protobuf's JSON writes a Timestamp (RFC 3339, UTC, 0, 3, 6 or 9 fractional
// digits).
void PrintChunk(const v1::LogChunk& chunk, bool timestamps, std::ostream& out) {
  std::vector<const v1::LogLine*> lines;
  lines.reserve(chunk.lines_size());
  for (const v1::LogLine& line : chunk.lines()) lines.push_back(&line);
  std::stable_sort(lines.begin(), lines.end(), EarlierThan);
  for (const v1::LogLine* line : lines) {
    if (timestamps) out << google::protobuf::util::TimeUtil::ToString(line->time()) << " ";
    out << "[rank " << line->rank() << "] " << line->text() << "\n";
  }
}

// Drops the lines written before `since` (--since); false when none is left
// of a chunk that had some.
bool KeepNewer(absl::Time since, v1::LogChunk* chunk) {
  if (chunk->lines().empty()) return true;
  google::protobuf::RepeatedPtrField<v1::LogLine>* lines = chunk->mutable_lines();
  lines->erase(std::remove_if(lines->begin(), lines->end(),
                              [since](const v1::LogLine& line) { return FromProto(line.time()) < since; }),
               lines->end());
  return !lines->empty();
}

// Why --rank or --generation names what the job never had ("" if it may
// have it): the coordinator answers those with no lines, which would read as
// a job that logged nothing.
std::string MissingLogsTarget(const v1::Job& job, const LogsOptions& options) {
  const v1::ResourceSpec& resources = job.spec().resources();
  const int64_t nodes = std::max<int64_t>(resources.nodes(), job.spec().restart().elastic().max_nodes());
  const int64_t world = std::max<int64_t>(job.placement().world_size(), nodes * resources.ranks_per_node());
  if (options.rank.has_value() && world > 0 && *options.rank >= world) {
    return absl::StrCat("--rank ", *options.rank, ": job ", job.id(), " has ", world, " rank", world == 1 ? "" : "s",
                        " (0 to ", world - 1, ")");
  }
  const bool more_may_come = options.follow && !IsTerminal(job.state());
  if (options.generation > job.generation() && !more_may_come) {
    return absl::StrCat("--generation ", options.generation, ": job ", job.id(),
                        job.generation() == 0 ? " has not started yet"
                                              : absl::StrCat(" has generations 1 to ", job.generation()));
  }
  return "";
}

}  // namespace

int RunLogs(JobStub& stub, const GlobalOptions& global, const LogsOptions& options, Console& console) {
  if (options.rank.has_value() || options.generation > 0) {
    grpc::ClientContext get_context;
    SetTimeout(&get_context, global.rpc_timeout);
    v1::GetJobRequest get;
    get.set_job_id(options.job_id);
    v1::GetJobResponse got;
    grpc::Status status = stub.GetJob(&get_context, get, &got);
    if (!status.ok()) {
      return ReportRpcError(status, {global.coordinator, "GetJob", options.job_id, global.rpc_timeout}, console.err);
    }
    if (std::string missing = MissingLogsTarget(got.job(), options); !missing.empty()) {
      console.err << "ringmaster: " << missing << "\n";
      return kExitError;
    }
  }
  v1::StreamLogsRequest request;
  request.set_job_id(options.job_id);
  if (options.rank.has_value()) request.set_rank(*options.rank);
  request.set_generation(options.generation);
  request.set_tail_lines(options.tail_lines);
  request.set_follow(options.follow);
  const absl::Time since = options.since.has_value() ? console.clock->Now() - *options.since : absl::InfinitePast();
  grpc::ClientContext context;
  // Without -f the stored lines come at once; bound that call like any other.
  if (!options.follow) SetTimeout(&context, global.rpc_timeout);
  std::unique_ptr<grpc::ClientReaderInterface<v1::LogChunk>> reader = stub.StreamLogs(&context, request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    if (options.since.has_value() && !KeepNewer(since, &chunk)) continue;
    if (IsStructured(global.output)) {
      PrintMessage(chunk, global.output, console.out);
    } else {
      PrintChunk(chunk, options.timestamps, console.out);
    }
    console.out.flush();
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    return ReportRpcError(status,
                          {global.coordinator, "StreamLogs", options.job_id,
                           options.follow ? absl::InfiniteDuration() : global.rpc_timeout},
                          console.err);
  }
  return kExitOk;
}

}  // namespace ringmaster::client
