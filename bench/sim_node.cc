#include "bench/sim_node.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"

namespace ringmaster::bench {
namespace {

constexpr int kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
constexpr char kCommunicator[] = "world";

SteadyTime Now() { return std::chrono::steady_clock::now(); }

// One unary call in flight: its context, request and response live until the
// callback, which deletes them.
template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  // `credential`: the node's, issued at Register; every node-facing call carries it.
  Call(const std::string& credential, std::chrono::milliseconds timeout) {
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    context.AddMetadata(kNodeCredentialHeader, credential);
  }
};

std::string RandomId() {
  std::random_device device;
  std::mt19937_64 rng(device());
  std::string id(kNcclUniqueIdBytes, '\0');
  for (char& c : id) c = static_cast<char>(rng() & 0xff);
  return id;
}

void FillScope(v1::RendezvousScope* scope, const SimStartRanks& start, int rank) {
  scope->set_job_id(start.job_id());
  scope->set_generation(start.generation());
  scope->set_rank(rank);
  scope->set_secret(start.rendezvous_secret());
}

}  // namespace

SimStubs::SimStubs(std::shared_ptr<grpc::Channel> c)
    : channel(std::move(c)),
      nodes(v1::NodeService::NewStub(channel)),
      rendezvous(v1::RendezvousService::NewStub(channel)),
      session("/ringmaster.v1.NodeService/Session", grpc::internal::RpcMethod::BIDI_STREAMING, channel) {}

SimNode::SimNode(int index, int gpus, SimStubs* stubs, SimRecorder* recorder, std::chrono::milliseconds rpc_timeout)
    : index_(index),
      gpus_(gpus),
      stubs_(stubs),
      recorder_(recorder),
      hostname_(absl::StrFormat("sim-%05d", index)),
      rpc_timeout_(rpc_timeout) {}

SimNode::~SimNode() = default;

void SimNode::Register() {
  v1::NodeInfo* node = register_request_.mutable_node();
  node->set_hostname(hostname_);
  node->set_address(hostname_ + ":29500");
  node->set_cpu_slots(2 * gpus_);
  node->set_worker_version("bench");
  for (int i = 0; i < gpus_; ++i) {
    v1::GpuInfo* gpu = node->add_gpus();
    gpu->set_uuid(absl::StrFormat("GPU-%08x-%04x-4000-8000-000000000000", index_, i));  // real ones are 40 characters
    gpu->set_name("NVIDIA H100 80GB HBM3");
    gpu->set_memory_bytes(int64_t{80} << 30);
    gpu->set_index(i);
    gpu->set_compute_capability_major(9);
  }
  register_context_.set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    registering_ = true;
  }
  stubs_->nodes->async()->Register(&register_context_, &register_request_, &register_response_,
                                   [this](grpc::Status status) { OnRegistered(status); });
}

void SimNode::OnRegistered(const grpc::Status& status) {
  if (!status.ok()) {
    recorder_->OnError(absl::StrCat(hostname_, ": Register: ", status.error_message()));
    std::lock_guard<std::mutex> lock(mu_);
    registering_ = false;
    done_ = true;  // no stream was started
    done_cv_.notify_all();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    registering_ = false;
    node_id_ = register_response_.node_id();
    credential_ = register_response_.credential();
    session_context_.AddMetadata(kNodeCredentialHeader, credential_);
    v1::WorkerMessage open;
    open.mutable_open()->set_node_id(node_id_);
    open.mutable_open()->set_session_id(register_response_.session_id());
    grpc::internal::ClientCallbackReaderWriterFactory<v1::WorkerMessage, SimCoordinatorMessage>::Create(
        stubs_->channel.get(), stubs_->session, &session_context_, this);
    StartRead(&incoming_);
    open_ = true;
    QueueLocked(std::move(open), false);
    QueueLocked(HeartbeatLocked(), true);  // at once, as the worker does
  }
  StartCall();
}

v1::WorkerMessage SimNode::HeartbeatLocked() const {
  v1::WorkerMessage message;
  v1::Heartbeat* heartbeat = message.mutable_heartbeat();
  *heartbeat->mutable_time() = ToProtoTime(absl::Now());
  for (int32_t rank : ranks_) {
    v1::RunningRank* r = heartbeat->add_running_ranks();
    r->set_job_id(job_id_);
    r->set_generation(generation_);
    r->set_global_rank(rank);
    r->set_pid(100000 + rank);
  }
  return message;
}

void SimNode::SendHeartbeat() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_ || closing_ || done_) return;
  QueueLocked(HeartbeatLocked(), true);
}

void SimNode::QueueLocked(v1::WorkerMessage message, bool heartbeat) {
  if (heartbeat) unanswered_.emplace_back(Now(), recorder_->recording());
  outbox_.push_back({std::move(message), heartbeat});
  PumpLocked();
}

void SimNode::PumpLocked() {
  if (write_in_flight_ || done_) return;
  if (outbox_.empty()) {
    if (closing_ && !writes_done_) {
      writes_done_ = true;
      StartWritesDone();
    }
    return;
  }
  writing_ = std::move(outbox_.front());
  outbox_.pop_front();
  write_in_flight_ = true;
  StartWrite(&writing_.message);
}

void SimNode::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  write_in_flight_ = false;
  if (!ok) {
    outbox_.clear();  // the stream is over; OnDone follows
    return;
  }
  PumpLocked();
}

void SimNode::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  switch (incoming_.kind_case()) {
    case SimCoordinatorMessage::kLease:
      HandleLease();
      break;
    case SimCoordinatorMessage::kStart:
      HandleStart(incoming_.start());
      break;
    case SimCoordinatorMessage::kStop: {
      recorder_->OnStop();
      std::lock_guard<std::mutex> lock(mu_);
      ranks_.clear();
      break;
    }
    default:
      break;
  }
  StartRead(&incoming_);
}

void SimNode::HandleLease() {
  const SteadyTime now = Now();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (unanswered_.empty()) {
      recorder_->OnError(absl::StrCat(hostname_, ": a lease grant without a heartbeat"));
      return;
    }
    const auto [sent, recorded] = unanswered_.front();
    unanswered_.pop_front();
    if (recorded) recorder_->OnHeartbeat(sent, std::chrono::duration<double, std::milli>(now - sent).count());
    first = !got_lease_;
    got_lease_ = true;
  }
  if (first) recorder_->OnSessionReady(now);
}

void SimNode::HandleStart(const SimStartRanks& start) {
  recorder_->OnAssignment(Now());
  if (index_ == 0) {  // what each real worker does with its own copy
    const SteadyTime begin = Now();
    v1::Placement placement;
    const bool ok = placement.ParseFromString(start.placement());
    recorder_->OnPlacementParsed(std::chrono::duration<double, std::milli>(Now() - begin).count(),
                                 start.placement().size(), ok ? placement.world_size() : -1);
  }
  v1::WorkerMessage answer;
  v1::StartRanksResult* result = answer.mutable_start_result();
  result->set_job_id(start.job_id());
  result->set_generation(start.generation());
  *result->mutable_started_ranks() = start.global_ranks();
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_id_ = start.job_id();
    generation_ = start.generation();
    ranks_.assign(start.global_ranks().begin(), start.global_ranks().end());
    QueueLocked(std::move(answer), false);
  }
  for (int32_t rank : start.global_ranks()) StartRendezvous(start, rank);
}

std::string SimNode::Credential() {
  std::lock_guard<std::mutex> lock(mu_);
  return credential_;
}

void SimNode::StartRendezvous(const SimStartRanks& start, int rank) {
  if (rank == 0) {  // the communicator's rank 0 creates the id (ncclGetUniqueId) and publishes it
    auto* call = new Call<v1::PublishNcclUniqueIdRequest, v1::PublishNcclUniqueIdResponse>(Credential(), rpc_timeout_);
    BeginCall(&call->context);
    FillScope(call->request.mutable_scope(), start, rank);
    call->request.set_communicator(kCommunicator);
    call->request.set_unique_id(RandomId());
    recorder_->SetPublishedId(call->request.unique_id());
    stubs_->rendezvous->async()->PublishNcclUniqueId(
        &call->context, &call->request, &call->response, [this, call](grpc::Status status) {
          if (!status.ok()) recorder_->OnError(absl::StrCat("rank 0: PublishNcclUniqueId: ", status.error_message()));
          recorder_->OnRankId(Now(), status.ok());
          EndCall(&call->context);
          delete call;
        });
    return;
  }
  auto* call = new Call<v1::GetNcclUniqueIdRequest, v1::GetNcclUniqueIdResponse>(Credential(), rpc_timeout_);
  BeginCall(&call->context);
  FillScope(call->request.mutable_scope(), start, rank);
  call->request.set_communicator(kCommunicator);
  stubs_->rendezvous->async()->GetNcclUniqueId(
      &call->context, &call->request, &call->response, [this, call, rank](grpc::Status status) {
        const SteadyTime now = Now();
        bool ok = status.ok() && call->response.unique_id() == recorder_->published_id();
        if (!status.ok()) {
          recorder_->OnError(absl::StrCat("rank ", rank, ": GetNcclUniqueId: ", status.error_message()));
        } else if (!ok) {
          recorder_->OnError(absl::StrCat("rank ", rank, ": GetNcclUniqueId returned other bytes than rank 0's"));
        }
        recorder_->OnRankId(now, ok);
        EndCall(&call->context);
        delete call;
      });
}

void SimNode::ReportExits() {
  std::string job_id;
  int64_t generation;
  std::vector<int32_t> ranks;
  std::string node_id;
  std::string credential;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_id = job_id_;
    generation = generation_;
    ranks.swap(ranks_);
    node_id = node_id_;
    credential = credential_;
  }
  for (int32_t rank : ranks) {
    auto* call = new Call<v1::ReportRankExitRequest, v1::ReportRankExitResponse>(credential, rpc_timeout_);
    BeginCall(&call->context);
    call->request.set_node_id(node_id);
    call->request.set_job_id(job_id);
    call->request.set_generation(generation);
    call->request.set_global_rank(rank);
    call->request.set_exit_code(0);
    *call->request.mutable_time() = ToProtoTime(absl::Now());
    stubs_->nodes->async()->ReportRankExit(&call->context, &call->request, &call->response,
                                           [this, call, rank](grpc::Status status) {
                                             if (!status.ok()) {
                                               recorder_->OnError(absl::StrCat("rank ", rank, ": ReportRankExit: ",
                                                                               status.error_message()));
                                             }
                                             recorder_->OnExitReported(Now());
                                             EndCall(&call->context);
                                             delete call;
                                           });
  }
}

void SimNode::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_ || closing_) return;
  closing_ = true;
  PumpLocked();
}

void SimNode::OnDone(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok() && !closing_) {
    recorder_->OnError(absl::StrCat(hostname_, ": session ended: ", status.error_message()));
  }
  done_ = true;
  done_cv_.notify_all();
}

void SimNode::BeginCall(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.insert(context);
}

void SimNode::EndCall(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(context);
  done_cv_.notify_all();
}

SimNode::Ending SimNode::WaitDone(SteadyTime deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  // Over: the stream ended (or never started and no Register is in flight),
  // and no unary call is left.
  auto over = [&] { return (done_ || (!open_ && !registering_)) && calls_.empty(); };
  if (done_cv_.wait_until(lock, deadline, over)) return Ending::kByThemselves;
  if (registering_) register_context_.TryCancel();
  if (open_) session_context_.TryCancel();
  for (grpc::ClientContext* context : calls_) context->TryCancel();
  return done_cv_.wait_until(lock, Now() + kCancelGrace, over) ? Ending::kCancelled : Ending::kStuck;
}

}  // namespace ringmaster::bench
