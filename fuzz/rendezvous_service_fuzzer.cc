// libFuzzer target: RendezvousService's request handling (how a
// generation's ranks find each other), through the coordinator's real gRPC
// server (CoordinatorHarness). Input: up to 16 calls (fuzz_input.h); op % 6
// picks PublishNcclUniqueId, GetNcclUniqueId, KvSet, KvGet, KvWait, KvAdd.
// Fixups put the live job and generation into the scope, so that calls
// reach the rendezvous of a placed generation (with its secret); a KvSet then KvWait on the
// same key completes. Blocking calls have a 50 ms deadline.
// Property: every call ends with OK or an actionable status (CheckStatus).

#include <cstdint>
#include <string>

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace {

using ringmaster::fuzz::CoordinatorHarness;
using ringmaster::fuzz::Decode;
using ringmaster::fuzz::FuzzCall;
using ringmaster::fuzz::Unary;
namespace v1 = ringmaster::v1;
using Stub = v1::RendezvousService::Stub;

constexpr int kMaxCalls = 16;
constexpr absl::Duration kWaitDeadline = absl::Milliseconds(50);

template <typename Request>
Request WithScope(CoordinatorHarness& h, const FuzzCall& call, Request valid) {
  valid.mutable_scope()->set_rank(1);
  valid.mutable_scope()->set_job_id(h.job_id());
  valid.mutable_scope()->set_generation(h.generation());
  valid.mutable_scope()->set_secret(h.RendezvousSecret(ringmaster::fuzz::kFixGeneration, ""));
  Request request = Decode(call, valid);
  v1::RendezvousScope* scope = request.mutable_scope();
  scope->set_job_id(h.JobId(call.fixups, scope->job_id()));
  scope->set_generation(h.Generation(call.fixups, scope->generation()));
  scope->set_secret(h.RendezvousSecret(call.fixups, scope->secret()));
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorHarness& h = CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = v1::RendezvousService::NewStub(h.channel());
  ringmaster::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    switch (call.op % 6) {
      case 0: {
        v1::PublishNcclUniqueIdRequest valid;
        valid.set_communicator("world");
        valid.set_unique_id(std::string(128, 'x'));
        Unary(stub.get(), &Stub::PublishNcclUniqueId, "PublishNcclUniqueId", WithScope(h, call, valid));
        break;
      }
      case 1: {
        v1::GetNcclUniqueIdRequest valid;
        valid.set_communicator("world");
        Unary(stub.get(), &Stub::GetNcclUniqueId, "GetNcclUniqueId", WithScope(h, call, valid), kWaitDeadline);
        break;
      }
      case 2: {
        v1::KvSetRequest valid;
        valid.set_key("k");
        valid.set_value("v");
        Unary(stub.get(), &Stub::KvSet, "KvSet", WithScope(h, call, valid));
        break;
      }
      case 3: {
        v1::KvGetRequest valid;
        valid.set_key("k");
        Unary(stub.get(), &Stub::KvGet, "KvGet", WithScope(h, call, valid));
        break;
      }
      case 4: {
        v1::KvWaitRequest valid;
        valid.add_keys("k");
        Unary(stub.get(), &Stub::KvWait, "KvWait", WithScope(h, call, valid), kWaitDeadline);
        break;
      }
      default: {
        v1::KvAddRequest valid;
        valid.set_key("counter");
        valid.set_delta(1);
        Unary(stub.get(), &Stub::KvAdd, "KvAdd", WithScope(h, call, valid));
        break;
      }
    }
    h.MaybeAdvance(call.fixups);
  }
  return 0;
}
