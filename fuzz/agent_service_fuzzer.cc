// libFuzzer target: the worker's trainer socket (worker/agent_server.h):
// AgentService.ReportMetrics, and the RendezvousService and
// CheckpointService calls the worker fences (ProcessSupervisor::
// CheckCaller) and forwards to the coordinator. The AgentServer runs on a
// Unix socket in the fuzzer's process over a ProcessSupervisor with
// in-memory processes (FakeProcessControl) running ranks 0 and 1 of the
// harness's live job; it forwards to the whole coordinator of
// CoordinatorHarness. Input: up to 12 calls (fuzz_input.h); op % 9 picks
//   0 ReportMetrics, 1-6 the rendezvous calls (rpc_calls.h), 7-8 Commit and
//   GetLatestCheckpoint.
// Fixups as for the coordinator targets; without kFixJobId the job id is
// the fuzzed one (empty: the worker fills in its only job).
// Property: every call ends with OK or an actionable status (CheckStatus).

#include <stdlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/rpc_calls.h"
#include "proto/agent_service.grpc.pb.h"
#include "worker/agent_server.h"
#include "worker/fake_process_control.h"
#include "worker/process_supervisor.h"

namespace {

using ringmaster::fuzz::CoordinatorHarness;
using ringmaster::fuzz::FuzzCall;
namespace v1 = ringmaster::v1;
namespace worker = ringmaster::worker;

// The worker's side, for the process's lifetime (as the harness).
struct Worker {
  Worker()
      : supervisor(&control, ringmaster::Clock::Real(), [](const worker::RankExit&) {}),
        agent(&supervisor, nullptr, [](const v1::RankProgress&) {}, CoordinatorHarness::Get().channel(),
              worker::AgentServerOptions{SocketPath()}) {
    const absl::Status started = agent.Start();
    FUZZ_CHECK(started.ok(), "cannot start the agent server: ", started.ToString());
    auto channel = grpc::CreateChannel(agent.target(), grpc::InsecureChannelCredentials());
    metrics = v1::AgentService::NewStub(channel);
    rendezvous = v1::RendezvousService::NewStub(channel);
    checkpoints = v1::CheckpointService::NewStub(channel);
  }

  static std::string SocketPath() {
    char dir[] = "/tmp/rm-XXXXXX";
    FUZZ_CHECK(::mkdtemp(dir) != nullptr, "mkdtemp failed");
    return absl::StrCat(dir, "/agent.sock");
  }

  // Ranks 0 and 1 of the harness's live generation run here.
  void Follow(const CoordinatorHarness& h) {
    if (h.job_id() == job_id && h.generation() == generation) return;
    std::vector<worker::RankLaunch> launches;
    for (int32_t rank : {0, 1}) {
      worker::RankLaunch launch;
      launch.job_id = h.job_id();
      launch.generation = h.generation();
      launch.global_rank = rank;
      launch.process.path = "/fake/trainer";
      launch.process.argv = {"/fake/trainer"};
      launches.push_back(launch);
    }
    (void)supervisor.Start(launches);  // an older generation is refused: fine
    job_id = h.job_id();
    generation = h.generation();
  }

  worker::FakeProcessControl control;
  worker::ProcessSupervisor supervisor;
  worker::AgentServer agent;
  std::unique_ptr<v1::AgentService::Stub> metrics;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous;
  std::unique_ptr<v1::CheckpointService::Stub> checkpoints;
  std::string job_id;
  int64_t generation = 0;
};

Worker& GetWorker() {
  static Worker* const worker = new Worker();  // lives until exit, as the harness
  return *worker;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorHarness& h = CoordinatorHarness::Get();
  h.BeginInput();
  Worker& w = GetWorker();
  w.Follow(h);
  ringmaster::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < 12 && !in.empty(); ++i) {
    const FuzzCall call = ringmaster::fuzz::NextCall(in);
    const int op = call.op % (1 + ringmaster::fuzz::kRendezvousRpcs + ringmaster::fuzz::kCheckpointRpcs);
    if (op == 0) {
      v1::ReportMetricsRequest valid;
      valid.set_job_id(h.job_id());
      valid.set_generation(h.generation());
      valid.mutable_metrics()->set_step(i);
      v1::ReportMetricsRequest request = ringmaster::fuzz::Decode(call, valid);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      ringmaster::fuzz::Unary(w.metrics.get(), &v1::AgentService::Stub::ReportMetrics, "ReportMetrics", request);
    } else if (op <= ringmaster::fuzz::kRendezvousRpcs) {
      FuzzCall rendezvous = call;
      rendezvous.op = static_cast<uint8_t>(op - 1);
      ringmaster::fuzz::CallRendezvous(h, w.rendezvous.get(), rendezvous);
    } else {
      FuzzCall checkpoint = call;
      checkpoint.op = static_cast<uint8_t>(op - 1 - ringmaster::fuzz::kRendezvousRpcs);
      ringmaster::fuzz::CallCheckpoint(h, w.checkpoints.get(), checkpoint, 10 * (i + 1));
    }
    h.MaybeAdvance(call.fixups);
  }
  return 0;
}
