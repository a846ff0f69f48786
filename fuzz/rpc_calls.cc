#include "fuzz/rpc_calls.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::fuzz {
namespace {

using RendezvousStub = v1::RendezvousService::StubInterface;
using CheckpointStub = v1::CheckpointService::StubInterface;

constexpr absl::Duration kWaitDeadline = absl::Milliseconds(50);

// The request with its scope fixed up (live job, generation and secret).
template <typename Request>
Request WithScope(CoordinatorHarness& h, const FuzzCall& call, Request valid) {
  valid.mutable_scope()->set_rank(1);
  valid.mutable_scope()->set_job_id(h.job_id());
  valid.mutable_scope()->set_generation(h.generation());
  valid.mutable_scope()->set_secret(h.RendezvousSecret(kFixGeneration, ""));
  Request request = Decode(call, valid);
  v1::RendezvousScope* scope = request.mutable_scope();
  scope->set_job_id(h.JobId(call.fixups, scope->job_id()));
  scope->set_generation(h.Generation(call.fixups, scope->generation()));
  scope->set_secret(h.RendezvousSecret(call.fixups, scope->secret()));
  return request;
}

v1::CommitCheckpointRequest ValidCommit(const CoordinatorHarness& h, int64_t step) {
  v1::CommitCheckpointRequest commit;
  commit.set_job_id(h.job_id());
  commit.set_generation(h.generation());
  commit.set_step(step);
  // The directory the coordinator decided for the generation (any other is
  // PERMISSION_DENIED).
  commit.set_path(absl::StrFormat("%s/%s/gen-%d/step-%09d", h.checkpoint_root(), h.job_id(), h.generation(), step));
  commit.set_rank(0);
  commit.set_pipeline_stage(0);
  commit.set_pipeline_stages(1);
  commit.set_whole_model(true);
  v1::CheckpointFile* file = commit.add_files();
  file->set_path("model.safetensors");
  file->set_size_bytes(1024);
  file->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  file->mutable_checksum()->set_hex("0badf00d");
  return commit;
}

}  // namespace

void CallRendezvous(CoordinatorHarness& h, RendezvousStub* stub, const FuzzCall& call) {
  switch (call.op % kRendezvousRpcs) {
    case 0: {
      v1::PublishNcclUniqueIdRequest valid;
      valid.set_communicator("world");
      valid.set_unique_id(std::string(128, 'x'));
      Unary(stub, &RendezvousStub::PublishNcclUniqueId, "PublishNcclUniqueId", WithScope(h, call, valid));
      break;
    }
    case 1: {
      v1::GetNcclUniqueIdRequest valid;
      valid.set_communicator("world");
      Unary(stub, &RendezvousStub::GetNcclUniqueId, "GetNcclUniqueId", WithScope(h, call, valid), kWaitDeadline);
      break;
    }
    case 2: {
      v1::KvSetRequest valid;
      valid.set_key("k");
      valid.set_value("v");
      Unary(stub, &RendezvousStub::KvSet, "KvSet", WithScope(h, call, valid));
      break;
    }
    case 3: {
      v1::KvGetRequest valid;
      valid.set_key("k");
      Unary(stub, &RendezvousStub::KvGet, "KvGet", WithScope(h, call, valid));
      break;
    }
    case 4: {
      v1::KvWaitRequest valid;
      valid.add_keys("k");
      Unary(stub, &RendezvousStub::KvWait, "KvWait", WithScope(h, call, valid), kWaitDeadline);
      break;
    }
    default: {
      v1::KvAddRequest valid;
      valid.set_key("counter");
      valid.set_delta(1);
      Unary(stub, &RendezvousStub::KvAdd, "KvAdd", WithScope(h, call, valid));
      break;
    }
  }
}

void CallCheckpoint(CoordinatorHarness& h, CheckpointStub* stub, const FuzzCall& call, int64_t step) {
  switch (call.op % kCheckpointRpcs) {
    case 0: {
      v1::CommitCheckpointRequest request = Decode(call, ValidCommit(h, step));
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      Unary(stub, &CheckpointStub::Commit, "Commit", request);
      break;
    }
    case 1: {
      v1::GetLatestCheckpointRequest request = Decode<v1::GetLatestCheckpointRequest>(call);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      Unary(stub, &CheckpointStub::GetLatestCheckpoint, "GetLatestCheckpoint", request);
      break;
    }
    default: {
      // A rank reporting the checkpoint of an earlier commit damaged.
      v1::ReportDamagedCheckpointRequest valid;
      valid.set_job_id(h.job_id());
      valid.set_generation(h.generation());
      valid.set_checkpoint_generation(h.generation());
      valid.set_checkpoint_step(step - 10);
      valid.set_reason("model.safetensors: SHA-256 differs from the manifest's");
      v1::ReportDamagedCheckpointRequest request = Decode(call, valid);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      Unary(stub, &CheckpointStub::ReportDamaged, "ReportDamaged", request);
      break;
    }
  }
}

}  // namespace ringmaster::fuzz
