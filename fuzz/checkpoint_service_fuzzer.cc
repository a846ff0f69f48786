// libFuzzer target: CheckpointService's request handling (Commit,
// GetLatestCheckpoint: op % 2, rpc_calls.h), through the coordinator's real
// gRPC server (CoordinatorHarness). Input: up to 16 calls (fuzz_input.h).
// Fixups put the live job and generation into the request; kFixValid
// starts from a well-formed shard commit under the job's checkpoint
// directory.
// An inflated call grows one field of its request (fuzz/inflate.h).
// Properties: every call ends with OK or an actionable status
// (CheckStatus); after each input the coordinator still answers for its
// live job (CoordinatorHarness::CheckUsable).

#include <cstdint>

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/rpc_calls.h"
#include "proto/checkpoint_service.grpc.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::fuzz::CoordinatorHarness& h = ringmaster::fuzz::CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = ringmaster::v1::CheckpointService::NewStub(h.channel());
  ringmaster::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < 16 && !in.empty(); ++i) {
    const ringmaster::fuzz::FuzzCall call = ringmaster::fuzz::NextCall(in);
    ringmaster::fuzz::CallCheckpoint(h, stub.get(), call, 10 * (i + 1));
    h.MaybeAdvance(call.fixups);
  }
  h.CheckUsable();
  return 0;
}
