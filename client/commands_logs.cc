// ringmaster logs JOB [-f] [--rank N] [--tail N]

#include <algorithm>
#include <memory>
#include <vector>

#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

bool EarlierThan(const v1::LogLine* a, const v1::LogLine* b) {
  if (a->time().seconds() != b->time().seconds()) return a->time().seconds() < b->time().seconds();
  return a->time().nanos() < b->time().nanos();
}

// The chunk's lines merged by time across ranks; lines of one rank keep the
// order they came in.
void PrintChunk(const v1::LogChunk& chunk, std::ostream& out) {
  std::vector<const v1::LogLine*> lines;
  lines.reserve(chunk.lines_size());
  for (const v1::LogLine& line : chunk.lines()) lines.push_back(&line);
  std::stable_sort(lines.begin(), lines.end(), EarlierThan);
  for (const v1::LogLine* line : lines) out << "[rank " << line->rank() << "] " << line->text() << "\n";
}

}  // namespace

int RunLogs(JobStub& stub, const GlobalOptions& global, const LogsOptions& options, Console& console) {
  v1::StreamLogsRequest request;
  request.set_job_id(options.job_id);
  if (options.rank.has_value()) request.set_rank(*options.rank);
  request.set_tail_lines(options.tail_lines);
  request.set_follow(options.follow);
  grpc::ClientContext context;
  // Without -f the stored lines come at once; bound that call like any other.
  if (!options.follow) SetTimeout(&context, global.rpc_timeout);
  std::unique_ptr<grpc::ClientReaderInterface<v1::LogChunk>> reader = stub.StreamLogs(&context, request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    if (global.output == OutputFormat::kJson) {
      PrintJsonLine(chunk, console.out);
    } else {
      PrintChunk(chunk, console.out);
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
