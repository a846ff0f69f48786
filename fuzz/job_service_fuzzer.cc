// libFuzzer target: JobService's request handling (what the CLI calls),
// through the coordinator's real gRPC server (CoordinatorHarness). Input:
// up to 12 calls (fuzz_input.h); op % 8 picks Submit, GetJob, ListJobs,
// CancelJob, StreamLogs, WatchJob, ListNodes, ListCheckpoints. Fixups put
// the live job into job ids; Submit with kFixValid merges the fuzzed spec
// over a valid one, so that it reaches defaults, validation and the store;
// an inflated Submit carries 70,000 labels, an 8 MiB path or a spec of
// megabytes (fuzz/inflate.h).
// The two server streams are read until they end, at most 32 messages
// (then cancelled), with a 100 ms deadline (a followed stream may not end).
// Properties: every call ends with OK or an actionable status
// (CheckStatus); a Submit past a limit (common/spec_limits.h, the request
// id's and the overrides' bounds) is refused with INVALID_ARGUMENT and
// stores nothing (ListJobs's newest job is the same after it as before); every
// ListJobs page and WatchJob message, during and after each input, stays
// under the gRPC message limit (kMaxGrpcMessageBytes).

#include <cstdint>
#include <memory>
#include <string>

#include "common/grpc_security.h"
#include "common/spec.h"
#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/spec_bounds.h"
#include "proto/job_service.grpc.pb.h"

namespace {

using ringmaster::fuzz::CheckStatus;
using ringmaster::fuzz::Context;
using ringmaster::fuzz::CoordinatorHarness;
using ringmaster::fuzz::Decode;
using ringmaster::fuzz::FuzzCall;
using ringmaster::fuzz::Unary;
namespace v1 = ringmaster::v1;
using Stub = v1::JobService::Stub;

constexpr int kMaxCalls = 12;
constexpr int kMaxStreamMessages = 32;
constexpr absl::Duration kStreamDeadline = absl::Milliseconds(100);

// A SubmitJobRequest's bounds besides the spec's (coordinator/core/job_lifecycle.cc).
constexpr size_t kMaxRequestIdBytes = 128;
constexpr int kMaxOverrides = 256;
constexpr size_t kMaxOverrideBytes = 4096;

void CheckBounded(const google::protobuf::Message& response, const char* rpc) {
  const size_t bytes = response.ByteSizeLong();
  FUZZ_CHECK(bytes <= static_cast<size_t>(ringmaster::kMaxGrpcMessageBytes), rpc, " answered ", bytes,
             " bytes, more than the gRPC message limit");
}

// The newest job stored (ListJobs orders by submission, newest first): a
// Submit stored a job if and only if this changed.
std::string NewestJob(Stub* stub) {
  v1::ListJobsRequest request;
  request.set_page_size(1);
  v1::ListJobsResponse page;
  const grpc::Status status = stub->ListJobs(Context().get(), request, &page);
  FUZZ_CHECK(status.ok(), "ListJobs failed: code ", static_cast<int>(status.error_code()), ": ",
             status.error_message());
  return page.jobs_size() == 0 ? "" : page.jobs(0).id();
}

// The bound a Submit breaks (a field name), or "" when it keeps them.
std::string Oversized(const v1::SubmitJobRequest& request) {
  if (request.request_id().size() > kMaxRequestIdBytes) return "request_id";
  if (request.overrides_size() > kMaxOverrides) return "overrides";
  for (const std::string& assignment : request.overrides()) {
    if (assignment.size() > kMaxOverrideBytes) return "overrides";
  }
  if (!request.has_spec()) return "";
  v1::JobSpec spec = request.spec();
  ringmaster::ApplyDefaults(&spec);
  return ringmaster::fuzz::BrokenLimit(spec);
}

void Submit(Stub* stub, const v1::SubmitJobRequest& request) {
  const std::string oversized = Oversized(request);
  const std::string newest = oversized.empty() ? "" : NewestJob(stub);
  v1::SubmitJobResponse response;
  const grpc::Status status = stub->Submit(Context().get(), request, &response);
  CheckStatus(status, "Submit", request);
  if (oversized.empty()) return;
  FUZZ_CHECK(NewestJob(stub) == newest, "a Submit past the bound on ", oversized, " stored a job (code ",
             static_cast<int>(status.error_code()), ")");
  if (!ringmaster::fuzz::ServerCanDecode(request)) return;  // gRPC refused it: not our code
  FUZZ_CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "a Submit past the bound on ", oversized,
             " ended with code ", static_cast<int>(status.error_code()), ": ", status.error_message());
}

// After each input: the first WatchJob message of the live job and, when
// the input submitted (what ListJobs answers changes only then), the first
// page of ListJobs at its largest size are answered, under the message limit.
void CheckAnswers(CoordinatorHarness& h, Stub* stub, bool submitted) {
  if (submitted) {
    v1::ListJobsRequest list;
    list.set_page_size(1000);
    v1::ListJobsResponse page;
    const grpc::Status listed = stub->ListJobs(Context().get(), list, &page);
    FUZZ_CHECK(listed.ok(), "ListJobs failed after an input: ", listed.error_message());
    CheckBounded(page, "ListJobs");
  }
  v1::WatchJobRequest watch;
  watch.set_job_id(h.job_id());
  auto context = Context(absl::Seconds(10));
  auto reader = stub->WatchJob(context.get(), watch);
  v1::WatchJobResponse first;
  const bool read = reader->Read(&first);
  context->TryCancel();
  const grpc::Status watched = reader->Finish();
  FUZZ_CHECK(read, "WatchJob of the live job sent nothing after an input: ", watched.error_message());
  CheckBounded(first, "WatchJob");
}

template <typename Response>
void Drain(std::unique_ptr<grpc::ClientContext> context, std::unique_ptr<grpc::ClientReader<Response>> reader,
           const char* name, const google::protobuf::Message& request) {
  Response response;
  int read = 0;
  while (read < kMaxStreamMessages && reader->Read(&response)) {
    CheckBounded(response, name);
    ++read;
  }
  if (read == kMaxStreamMessages) context->TryCancel();
  const grpc::Status status = reader->Finish();
  if (status.error_code() != grpc::StatusCode::CANCELLED) CheckStatus(status, name, request);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorHarness& h = CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = v1::JobService::NewStub(h.channel());
  ringmaster::fuzz::FuzzInput in(data, size);
  bool submitted = false;
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    switch (call.op % 8) {
      case 0: {
        v1::SubmitJobRequest valid;
        *valid.mutable_spec() = CoordinatorHarness::ValidSpec();
        Submit(stub.get(), Decode(call, valid));
        submitted = true;
        break;
      }
      case 1: {
        v1::GetJobRequest request = Decode<v1::GetJobRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        Unary(stub.get(), &Stub::GetJob, "GetJob", request);
        break;
      }
      case 2: {
        const v1::ListJobsRequest request = Decode<v1::ListJobsRequest>(call);
        v1::ListJobsResponse response;
        CheckStatus(stub->ListJobs(Context().get(), request, &response), "ListJobs", request);
        CheckBounded(response, "ListJobs");
        break;
      }
      case 3: {
        v1::CancelJobRequest request = Decode<v1::CancelJobRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        Unary(stub.get(), &Stub::CancelJob, "CancelJob", request);
        break;
      }
      case 4: {
        v1::StreamLogsRequest request = Decode<v1::StreamLogsRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        auto context = Context(kStreamDeadline);
        auto reader = stub->StreamLogs(context.get(), request);
        Drain(std::move(context), std::move(reader), "StreamLogs", request);
        break;
      }
      case 5: {
        v1::WatchJobRequest request = Decode<v1::WatchJobRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        auto context = Context(kStreamDeadline);
        auto reader = stub->WatchJob(context.get(), request);
        Drain(std::move(context), std::move(reader), "WatchJob", request);
        break;
      }
      case 6:
        Unary(stub.get(), &Stub::ListNodes, "ListNodes", Decode<v1::ListNodesRequest>(call));
        break;
      default: {
        v1::ListCheckpointsRequest request = Decode<v1::ListCheckpointsRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        Unary(stub.get(), &Stub::ListCheckpoints, "ListCheckpoints", request);
        break;
      }
    }
    h.MaybeAdvance(call.fixups);
  }
  CheckAnswers(h, stub.get(), submitted);
  return 0;
}
