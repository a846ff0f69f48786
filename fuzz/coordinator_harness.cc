#include "fuzz/coordinator_harness.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/rendezvous.h"
#include "common/grpc_security.h"
#include "fuzz/fuzz_check.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/node_service.grpc.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

namespace ringmaster::fuzz {
namespace {

std::string MakeStateDir() {
  for (const char* base : {"/dev/shm", "/tmp"}) {
    std::string pattern = absl::StrCat(base, "/rm-fuzz-XXXXXX");
    if (::mkdtemp(pattern.data()) != nullptr) return pattern;
  }
  FUZZ_CHECK(false, "cannot create a state directory in /dev/shm or /tmp");
  return "";
}

bool Terminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
}

}  // namespace

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

namespace {

// Calls per RPC and status code, printed at exit: shows which RPCs the
// inputs reached and how far (OK vs. rejections).
std::map<std::string, std::map<int, int>>& Outcomes() {
  static auto* outcomes = new std::map<std::string, std::map<int, int>>();
  return *outcomes;
}

void PrintOutcomes() {
  for (const auto& [rpc, codes] : Outcomes()) {
    std::string line = absl::StrCat("fuzz: ", rpc, ":");
    for (const auto& [code, n] : codes) absl::StrAppend(&line, " code ", code, " x", n);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

bool ServerCanDecode(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> parsed(request.New());
  return parsed->ParseFromString(request.SerializeAsString());
}

void CheckStatus(const grpc::Status& status, const char* rpc, const google::protobuf::Message& request) {
  const grpc::StatusCode code = status.error_code();
  ++Outcomes()[rpc][static_cast<int>(code)];
  if (code != grpc::StatusCode::OK && !ServerCanDecode(request)) return;  // gRPC refused it
  FUZZ_CHECK(code != grpc::StatusCode::UNKNOWN && code != grpc::StatusCode::INTERNAL &&
                 code != grpc::StatusCode::UNIMPLEMENTED && code != grpc::StatusCode::DATA_LOSS,
             rpc, " ended with code ", static_cast<int>(code), ": ", status.error_message());
}

CoordinatorHarness& CoordinatorHarness::Get() {
  static CoordinatorHarness* const harness = [] {
    spdlog::set_level(spdlog::level::warn);  // not a line per request on long runs
    google::protobuf::SetLogHandler(nullptr);  // nor protobuf's complaints about fuzzed strings
    std::atexit(PrintOutcomes);
    auto* h = new CoordinatorHarness();
    h->StartServer();
    return h;
  }();
  return *harness;
}

v1::JobSpec CoordinatorHarness::ValidSpec() {
  v1::JobSpec spec;
  spec.set_name("fuzz-job");
  spec.mutable_model()->mutable_mlp();
  spec.mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  spec.mutable_training()->set_steps(10);
  spec.mutable_resources()->set_nodes(1);
  spec.mutable_resources()->set_ranks_per_node(2);
  spec.mutable_resources()->set_device(v1::ResourceSpec::CPU);
  return spec;
}

void CoordinatorHarness::StartServer() {
  if (server_ != nullptr) {
    server_->Shutdown();
    server_.reset();
    channel_.reset();
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }
  state_dir_ = MakeStateDir();
  checkpoint_root_ = state_dir_ + "/checkpoints";
  coordinator::CoordinatorConfig config;
  config.listen = "127.0.0.1:0";
  config.state_dir = state_dir_;
  config.metrics_listen = "";
  config.tick_interval = absl::ZeroDuration();
  config.shutdown_timeout = absl::Seconds(1);
  config.log_follow_linger = absl::ZeroDuration();
  config.max_rendezvous_waits = 64;
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> server =
      coordinator::CoordinatorServer::Start(config, &clock_);
  FUZZ_CHECK(server.ok(), "cannot start the coordinator: ", server.status().ToString());
  server_ = *std::move(server);
  // Every call carries the node's credential, as a worker's do (the JobService
  // ignores it), so that fuzzed node calls get past "which node is this".
  channel_ = MakeChannel(absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(),
                         grpc::ChannelArguments(), {}, [this]() -> Headers {
                           std::lock_guard<std::mutex> lock(credential_mu_);
                           if (credential_.empty()) return {};
                           return {{kNodeCredentialHeader, credential_}};
                         });
  std::lock_guard<std::mutex> lock(credential_mu_);
  credential_.clear();
  node_id_.clear();
  job_id_.clear();
  generation_ = 0;
  inputs_ = 0;
}

void CoordinatorHarness::RegisterNode() {
  v1::RegisterNodeRequest request;
  v1::NodeInfo* node = request.mutable_node();
  node->set_node_id(node_id_);
  node->set_hostname("fuzz-node");
  node->set_address("127.0.0.1:29500");
  node->set_cpu_slots(2);
  node->set_worker_version("fuzz");
  v1::RegisterNodeResponse response;
  const grpc::Status status =
      v1::NodeService::NewStub(channel_)->Register(Context().get(), request, &response);
  FUZZ_CHECK(status.ok(), "the harness cannot register its node: ", status.error_message());
  node_id_ = response.node_id();
  session_id_ = response.session_id();
  std::lock_guard<std::mutex> lock(credential_mu_);
  if (!response.credential().empty()) credential_ = response.credential();
}

void CoordinatorHarness::SubmitJob() {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = ValidSpec();
  v1::SubmitJobResponse response;
  const grpc::Status status = v1::JobService::NewStub(channel_)->Submit(Context().get(), request, &response);
  FUZZ_CHECK(status.ok(), "the harness cannot submit its job: ", status.error_message());
  job_id_ = response.job().id();
}

void CoordinatorHarness::BeginInput() {
  if (++inputs_ > kInputsPerServer) StartServer();
  if (node_id_.empty() || !server_->nodes().CheckSession(node_id_, session_id_).ok()) RegisterNode();
  absl::StatusOr<v1::Job> job =
      job_id_.empty() ? absl::NotFoundError("none") : server_->controller().views().GetJob(job_id_);
  if (!job.ok() || Terminal(job->state())) SubmitJob();
  server_->Tick();  // places a queued job
  job = server_->controller().views().GetJob(job_id_);
  FUZZ_CHECK(job.ok(), "the harness lost its job: ", job.status().ToString());
  generation_ = job->generation();
}

void CoordinatorHarness::MaybeAdvance(uint8_t fixups) {
  if ((fixups & kAdvanceClock) == 0) return;
  clock_.Advance(absl::Seconds((fixups & 0x70) >> 4));
  server_->Tick();
}

void CoordinatorHarness::CheckUsable() {
  v1::GetJobRequest request;
  request.set_job_id(job_id_);
  v1::GetJobResponse response;
  const grpc::Status status = v1::JobService::NewStub(channel_)->GetJob(Context().get(), request, &response);
  FUZZ_CHECK(status.ok(), "after an input the coordinator no longer answers GetJob of its live job: code ",
             static_cast<int>(status.error_code()), ": ", status.error_message());
}

std::string CoordinatorHarness::JobId(uint8_t fixups, const std::string& fuzzed) const {
  return (fixups & kFixJobId) != 0 ? job_id_ : fuzzed;
}

int64_t CoordinatorHarness::Generation(uint8_t fixups, int64_t fuzzed) const {
  return (fixups & kFixGeneration) != 0 ? generation_ : fuzzed;
}

std::string CoordinatorHarness::NodeId(uint8_t fixups, const std::string& fuzzed) const {
  return (fixups & kFixNode) != 0 ? node_id_ : fuzzed;
}

int64_t CoordinatorHarness::SessionId(uint8_t fixups, int64_t fuzzed) const {
  return (fixups & kFixNode) != 0 ? session_id_ : fuzzed;
}

std::string CoordinatorHarness::RendezvousSecret(uint8_t fixups, const std::string& fuzzed) {
  return (fixups & kFixGeneration) != 0 ? server_->rendezvous().Secret(job_id_, generation_) : fuzzed;
}

}  // namespace ringmaster::fuzz
