// libFuzzer target: CheckpointService's request handling (Commit,
// GetLatestCheckpoint: op % 2), through the coordinator's real gRPC server
// (CoordinatorHarness). Input: up to 16 calls (fuzz_input.h). Fixups put
// the live job and generation into the request; kFixValid starts from a
// well-formed shard commit under the job's checkpoint directory.
// Property: every call ends with OK or an actionable status (CheckStatus).

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_input.h"
#include "proto/checkpoint_service.grpc.pb.h"

namespace {

using ringmaster::fuzz::CoordinatorHarness;
using ringmaster::fuzz::Decode;
using ringmaster::fuzz::FuzzCall;
using ringmaster::fuzz::Unary;
namespace v1 = ringmaster::v1;
using Stub = v1::CheckpointService::Stub;

constexpr int kMaxCalls = 16;

v1::CommitCheckpointRequest ValidCommit(const CoordinatorHarness& h, int64_t step) {
  v1::CommitCheckpointRequest commit;
  commit.set_job_id(h.job_id());
  commit.set_generation(h.generation());
  commit.set_step(step);
  commit.set_path(absl::StrCat(h.checkpoint_root(), "/", h.job_id(), "/step-", step));
  commit.set_rank(0);
  commit.set_pipeline_stage(0);
  commit.set_pipeline_stages(1);
  v1::CheckpointFile* file = commit.add_files();
  file->set_path("model.safetensors");
  file->set_size_bytes(1024);
  file->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  file->mutable_checksum()->set_hex("0badf00d");
  return commit;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorHarness& h = CoordinatorHarness::Get();
  h.BeginInput();
  auto stub = v1::CheckpointService::NewStub(h.channel());
  ringmaster::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    if (call.op % 2 == 0) {
      v1::CommitCheckpointRequest request = Decode(call, ValidCommit(h, 10 * (i + 1)));
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      Unary(stub.get(), &Stub::Commit, "Commit", request);
    } else {
      v1::GetLatestCheckpointRequest request = Decode<v1::GetLatestCheckpointRequest>(call);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      Unary(stub.get(), &Stub::GetLatestCheckpoint, "GetLatestCheckpoint", request);
    }
    h.MaybeAdvance(call.fixups);
  }
  return 0;
}
