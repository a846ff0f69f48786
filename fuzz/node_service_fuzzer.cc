// libFuzzer target: NodeService's request handling (what workers call),
// through the coordinator's real gRPC server (CoordinatorHarness). Input:
// up to 8 calls (fuzz_input.h); op % 4 picks
//   0 Register        the payload is a RegisterNodeRequest;
//   1 Session         the payload is a sequence of [length u16][WorkerMessage]
//                     (at most 16) written on one bidi stream, then
//                     WritesDone; the coordinator's messages are read to
//                     the end (at most 64, then cancelled);
//   2 ReportRankExit  the payload is a ReportRankExitRequest;
//   3 PushLogs        the payload is a sequence of [length u16][LogChunk]
//                     (at most 16) on one client stream.
// Fixups put the live node id and session id (kFixNode) and the live job
// and generation into the requests, the open message and every line, so
// that inputs reach an open session, progress of a placed generation, rank
// exits of its ranks and log lines of its ranks. An inflated call grows its
// request, or each message of its stream (fuzz/inflate.h): 70,000 running
// ranks, an 8 MiB hostname, log chunks of megabytes.
// Properties: every call ends with OK or an actionable status
// (CheckStatus); after each input the coordinator still answers for its
// live job (CoordinatorHarness::CheckUsable).

#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/inflate.h"
#include "proto/node_service.grpc.pb.h"

namespace {

using ringmaster::fuzz::CheckStatus;
using ringmaster::fuzz::Context;
using ringmaster::fuzz::CoordinatorHarness;
using ringmaster::fuzz::Decode;
using ringmaster::fuzz::FuzzCall;
using ringmaster::fuzz::FuzzInput;
using ringmaster::fuzz::kFixNode;
using ringmaster::fuzz::Unary;
namespace v1 = ringmaster::v1;
using Stub = v1::NodeService::Stub;

constexpr int kMaxCalls = 8;
constexpr int kMaxStreamMessages = 16;
constexpr int kMaxReplies = 64;
constexpr absl::Duration kStreamDeadline = absl::Seconds(2);

void Session(CoordinatorHarness& h, Stub* stub, const FuzzCall& call) {
  auto context = Context(kStreamDeadline);
  auto stream = stub->Session(context.get());
  FuzzInput messages(reinterpret_cast<const uint8_t*>(call.payload.data()), call.payload.size());
  v1::WorkerMessage last;
  for (int i = 0; i < kMaxStreamMessages && !messages.empty(); ++i) {
    v1::WorkerMessage message;
    (void)message.MergeFromString(messages.LengthPrefixed());
    (void)ringmaster::fuzz::Inflate(&message, call.inflation, call.inflate_budget);
    if (i == 0 && (call.fixups & kFixNode) != 0) message.mutable_open();
    if (message.has_open()) {
      v1::SessionOpen* open = message.mutable_open();
      open->set_node_id(h.NodeId(call.fixups, open->node_id()));
      open->set_session_id(h.SessionId(call.fixups, open->session_id()));
    } else if (message.has_progress()) {
      v1::RankProgress* p = message.mutable_progress();
      p->set_job_id(h.JobId(call.fixups, p->job_id()));
      p->set_generation(h.Generation(call.fixups, p->generation()));
    } else if (message.has_start_result()) {
      v1::StartRanksResult* r = message.mutable_start_result();
      r->set_job_id(h.JobId(call.fixups, r->job_id()));
      r->set_generation(h.Generation(call.fixups, r->generation()));
    }
    last = message;
    if (!stream->Write(message)) break;  // the coordinator ended the stream
  }
  stream->WritesDone();
  v1::CoordinatorMessage reply;
  int read = 0;
  while (read < kMaxReplies && stream->Read(&reply)) ++read;
  if (read == kMaxReplies) context->TryCancel();
  const grpc::Status status = stream->Finish();
  if (status.error_code() != grpc::StatusCode::CANCELLED) CheckStatus(status, "Session", last);
}

void PushLogs(CoordinatorHarness& h, Stub* stub, const FuzzCall& call) {
  auto context = Context(kStreamDeadline);
  v1::PushLogsResponse response;
  auto stream = stub->PushLogs(context.get(), &response);
  FuzzInput chunks(reinterpret_cast<const uint8_t*>(call.payload.data()), call.payload.size());
  v1::LogChunk last;
  for (int i = 0; i < kMaxStreamMessages && !chunks.empty(); ++i) {
    v1::LogChunk chunk;
    (void)chunk.MergeFromString(chunks.LengthPrefixed());
    (void)ringmaster::fuzz::Inflate(&chunk, call.inflation, call.inflate_budget);
    for (v1::LogLine& line : *chunk.mutable_lines()) {
      line.set_job_id(h.JobId(call.fixups, line.job_id()));
      line.set_generation(h.Generation(call.fixups, line.generation()));
    }
    last = chunk;
    if (!stream->Write(chunk)) break;
  }
  stream->WritesDone();
  CheckStatus(stream->Finish(), "PushLogs", last);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorHarness& h = CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = v1::NodeService::NewStub(h.channel());
  FuzzInput in(data, size);
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    switch (call.op % 4) {
      case 0: {
        v1::RegisterNodeRequest request = Decode<v1::RegisterNodeRequest>(call);
        if ((call.fixups & kFixNode) != 0) request.mutable_node()->set_node_id(h.node_id());
        for (v1::RunningRank& r : *request.mutable_running_ranks()) {
          r.set_job_id(h.JobId(call.fixups, r.job_id()));
          r.set_generation(h.Generation(call.fixups, r.generation()));
        }
        Unary(stub.get(), &Stub::Register, "Register", request);
        break;
      }
      case 1:
        Session(h, stub.get(), call);
        break;
      case 2: {
        v1::ReportRankExitRequest request = Decode<v1::ReportRankExitRequest>(call);
        request.set_node_id(h.NodeId(call.fixups, request.node_id()));
        request.set_job_id(h.JobId(call.fixups, request.job_id()));
        request.set_generation(h.Generation(call.fixups, request.generation()));
        Unary(stub.get(), &Stub::ReportRankExit, "ReportRankExit", request);
        break;
      }
      default:
        PushLogs(h, stub.get(), call);
        break;
    }
    h.MaybeAdvance(call.fixups);
  }
  h.CheckUsable();
  return 0;
}
