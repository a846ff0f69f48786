// libFuzzer target: the worker's trainer socket (worker/agent_server.h):
// AgentService.ReportMetrics, and the RendezvousService and
// CheckpointService calls the worker fences (ProcessSupervisor::
// CheckCaller) and forwards to the coordinator. The AgentServer runs on a
// Unix socket in the fuzzer's process over a ProcessSupervisor with
// in-memory processes (FakeProcessControl) running ranks 0 and 1 of the
// harness's live job; it forwards to the whole coordinator of
// CoordinatorHarness. Input: up to 12 calls (fuzz_input.h); op % 11 picks
//   0 ReportMetrics, 1-6 the rendezvous calls, 7-9 the checkpoint calls
//   (rpc_calls.h), 10 Rejoin.
// Rank 1 runs rejoinable and rank 0 not: a Rejoin of rank 1 with the live
// secret waits for a restart that never comes until its 50 ms deadline
// withdraws it (ProcessSupervisor::CancelRejoin), and rank 1 runs on; any
// other is refused.
// Fixups as for the coordinator targets; without kFixJobId the job id is
// the fuzzed one (empty: the worker fills in its only job). An inflated call
// grows one field of its request (fuzz/inflate.h): a 70,000-entry metrics
// map, an 8 MiB value, a commit of 70,000 files.
// Properties: every call ends with OK or an actionable status
// (CheckStatus); after each input the coordinator still answers for its
// live job, the agent socket still answers and the ranks started still run.

#include <stdlib.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_security.h"
#include "fuzz/coordinator_harness.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/rpc_calls.h"
#include "proto/agent_service.grpc.pb.h"
#include "worker/agent_server.h"
#include "worker/testing/fake_process_control.h"
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
    // Calls present the live generation's secret, as its trainers' do (the
    // agent acts for a rank only then).
    auto channel = ringmaster::MakeChannel(agent.target(), grpc::InsecureChannelCredentials(),
                                           grpc::ChannelArguments(), {}, [this]() -> ringmaster::Headers {
                                             std::lock_guard<std::mutex> lock(secret_mu);
                                             return {{ringmaster::kRankSecretHeader, secret}};
                                           });
    agent_stub = v1::AgentService::NewStub(channel);
    rendezvous = v1::RendezvousService::NewStub(channel);
    checkpoints = v1::CheckpointService::NewStub(channel);
  }

  static std::string SocketPath() {
    char dir[] = "/tmp/rm-XXXXXX";
    FUZZ_CHECK(::mkdtemp(dir) != nullptr, "mkdtemp failed");
    return absl::StrCat(dir, "/agent.sock");
  }

  // Ranks 0 and 1 of the harness's live generation run here.
  void Follow(CoordinatorHarness& h) {
    if (h.job_id() == job_id && h.generation() == generation) return;
    const std::string live_secret = h.RendezvousSecret(ringmaster::fuzz::kFixGeneration, "");
    std::vector<worker::RankLaunch> launches;
    for (int32_t rank : {0, 1}) {
      worker::RankLaunch launch;
      launch.job_id = h.job_id();
      launch.generation = h.generation();
      launch.global_rank = rank;
      launch.process.path = "/fake/trainer";
      launch.process.argv = {"/fake/trainer"};
      launch.secret = live_secret;
      if (rank == 1) launch.rejoin_context = "/fake/rank-1.context";
      launches.push_back(launch);
    }
    // An older generation is refused: fine, its ranks are not checked.
    started = static_cast<int>(supervisor.Start(launches).started.size());
    {
      std::lock_guard<std::mutex> lock(secret_mu);
      secret = live_secret;
    }
    job_id = h.job_id();
    generation = h.generation();
  }

  // After each input the agent socket still answers (a status of its
  // handlers or of the coordinator's, not UNAVAILABLE or a deadline).
  void CheckAnswers(const CoordinatorHarness& h) {
    v1::GetLatestCheckpointRequest request;
    request.set_job_id(h.job_id());
    v1::GetLatestCheckpointResponse response;
    const grpc::Status status = checkpoints->GetLatestCheckpoint(ringmaster::fuzz::Context().get(), request, &response);
    ringmaster::fuzz::CheckStatus(status, "GetLatestCheckpoint (after the input)", request);
    FUZZ_CHECK(status.error_code() != grpc::StatusCode::UNAVAILABLE &&
                   status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED,
               "after an input the agent socket no longer answers: ", status.error_message());
    // No call stops a rank: a Rejoin its deadline withdrew leaves rank 1 running.
    int running = 0;
    for (const worker::RunningRankInfo& rank : supervisor.Running()) {
      running += rank.job_id == job_id && rank.generation == generation;
    }
    FUZZ_CHECK(running == started, "after an input ", running, " of the ", started, " ranks of generation ", generation,
               " run");
  }

  worker::FakeProcessControl control;
  worker::ProcessSupervisor supervisor;
  worker::AgentServer agent;
  std::unique_ptr<v1::AgentService::Stub> agent_stub;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous;
  std::unique_ptr<v1::CheckpointService::Stub> checkpoints;
  std::string job_id;
  int64_t generation = 0;
  int started = 0;  // ranks of (job_id, generation) started here
  std::mutex secret_mu;  // read on gRPC's threads as calls start
  std::string secret;
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
    const int op = call.op % (2 + ringmaster::fuzz::kRendezvousRpcs + ringmaster::fuzz::kCheckpointRpcs);
    if (op == 0) {
      v1::ReportMetricsRequest valid;
      valid.set_job_id(h.job_id());
      valid.set_generation(h.generation());
      valid.mutable_metrics()->set_step(i);
      v1::ReportMetricsRequest request = ringmaster::fuzz::Decode(call, valid);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      ringmaster::fuzz::Unary(w.agent_stub.get(), &v1::AgentService::Stub::ReportMetrics, "ReportMetrics", request);
    } else if (op <= ringmaster::fuzz::kRendezvousRpcs) {
      FuzzCall rendezvous = call;
      rendezvous.op = static_cast<uint8_t>(op - 1);
      ringmaster::fuzz::CallRendezvous(h, w.rendezvous.get(), rendezvous);
    } else if (op == 1 + ringmaster::fuzz::kRendezvousRpcs + ringmaster::fuzz::kCheckpointRpcs) {
      v1::RejoinRequest valid;
      valid.set_job_id(h.job_id());
      valid.set_generation(h.generation());
      valid.set_global_rank(1);
      v1::RejoinRequest request = ringmaster::fuzz::Decode(call, valid);
      request.set_job_id(h.JobId(call.fixups, request.job_id()));
      request.set_generation(h.Generation(call.fixups, request.generation()));
      ringmaster::fuzz::Unary(w.agent_stub.get(), &v1::AgentService::Stub::Rejoin, "Rejoin", request,
                              absl::Milliseconds(50));
    } else {
      FuzzCall checkpoint = call;
      checkpoint.op = static_cast<uint8_t>(op - 1 - ringmaster::fuzz::kRendezvousRpcs);
      ringmaster::fuzz::CallCheckpoint(h, w.checkpoints.get(), checkpoint, 10 * (i + 1));
    }
    h.MaybeAdvance(call.fixups);
  }
  h.CheckUsable();
  w.CheckAnswers(h);
  return 0;
}
