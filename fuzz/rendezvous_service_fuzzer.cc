// libFuzzer target: RendezvousService's request handling (how a
// generation's ranks find each other), through the coordinator's real gRPC
// server (CoordinatorHarness). Input: up to 16 calls (fuzz_input.h); op % 6
// picks PublishNcclUniqueId, GetNcclUniqueId, KvSet, KvGet, KvWait, KvAdd
// (rpc_calls.h). Fixups put the live job, generation and secret into the
// scope, so that calls reach the rendezvous of a placed generation; a KvSet
// then a KvWait of the same key completes.
// An inflated call grows one field of its request (fuzz/inflate.h).
// Properties: every call ends with OK or an actionable status
// (CheckStatus); after each input the coordinator still answers for its
// live job (CoordinatorHarness::CheckUsable).

#include <cstdint>

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/rpc_calls.h"
#include "proto/rendezvous_service.grpc.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::fuzz::CoordinatorHarness& h = ringmaster::fuzz::CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = ringmaster::v1::RendezvousService::NewStub(h.channel());
  ringmaster::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < 16 && !in.empty(); ++i) {
    const ringmaster::fuzz::FuzzCall call = ringmaster::fuzz::NextCall(in);
    ringmaster::fuzz::CallRendezvous(h, stub.get(), call);
    h.MaybeAdvance(call.fixups);
  }
  h.CheckUsable();
  return 0;
}
