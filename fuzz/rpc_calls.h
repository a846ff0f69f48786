#ifndef RINGMASTER_FUZZ_RPC_CALLS_H_
#define RINGMASTER_FUZZ_RPC_CALLS_H_

// One fuzzed call of RendezvousService or CheckpointService, made on a
// stub: the coordinator's (rendezvous_service_fuzzer,
// checkpoint_service_fuzzer) or the worker's agent socket, which forwards
// them (agent_service_fuzzer). Requests are decoded and fixed up as
// fuzz_input.h and coordinator_harness.h describe; the status is checked
// with CheckStatus. Test-only.

#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::fuzz {

inline constexpr int kRendezvousRpcs = 6;
inline constexpr int kCheckpointRpcs = 3;

// op % 6: PublishNcclUniqueId, GetNcclUniqueId, KvSet, KvGet, KvWait, KvAdd.
// Blocking calls (GetNcclUniqueId, KvWait) have a 50 ms deadline.
void CallRendezvous(CoordinatorHarness& h, v1::RendezvousService::StubInterface* stub, const FuzzCall& call);

// op % 2: Commit (kFixValid: a well-formed shard commit of step `step`
// under the job's checkpoint directory), GetLatestCheckpoint.
void CallCheckpoint(CoordinatorHarness& h, v1::CheckpointService::StubInterface* stub, const FuzzCall& call,
                    int64_t step);

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_RPC_CALLS_H_
