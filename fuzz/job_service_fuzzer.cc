// libFuzzer target: JobService's request handling (what the CLI calls),
// through the coordinator's real gRPC server (CoordinatorHarness). Input:
// up to 12 calls (fuzz_input.h); op % 8 picks Submit, GetJob, ListJobs,
// CancelJob, StreamLogs, WatchJob, ListNodes, ListCheckpoints. Fixups put
// the live job into job ids; Submit with kFixValid merges the fuzzed spec
// over a valid one, so that it reaches defaults, validation and the store.
// The two server streams are read until they end, at most 32 messages
// (then cancelled), with a 100 ms deadline (a followed stream may not end).
// Property: every call ends with OK or an actionable status (CheckStatus).

#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
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

template <typename Response>
void Drain(std::unique_ptr<grpc::ClientContext> context, std::unique_ptr<grpc::ClientReader<Response>> reader,
           const char* name, const google::protobuf::Message& request) {
  Response response;
  int read = 0;
  while (read < kMaxStreamMessages && reader->Read(&response)) ++read;
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
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    switch (call.op % 8) {
      case 0: {
        v1::SubmitJobRequest valid;
        *valid.mutable_spec() = CoordinatorHarness::ValidSpec();
        Unary(stub.get(), &Stub::Submit, "Submit", Decode(call, valid));
        break;
      }
      case 1: {
        v1::GetJobRequest request = Decode<v1::GetJobRequest>(call);
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        Unary(stub.get(), &Stub::GetJob, "GetJob", request);
        break;
      }
      case 2:
        Unary(stub.get(), &Stub::ListJobs, "ListJobs", Decode<v1::ListJobsRequest>(call));
        break;
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
  return 0;
}
