#include "worker/coordinator_session.h"

#include <filesystem>
#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "common/grpc_status.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"

namespace ringmaster::worker {
namespace {

constexpr absl::Duration kDefaultHeartbeat = absl::Seconds(5);
// After WritesDone, how long the coordinator gets to end the stream.
constexpr absl::Duration kCloseTimeout = absl::Seconds(1);

std::string ReadNodeId(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string id;
  std::getline(in, id);
  return std::string(absl::StripAsciiWhitespace(id));
}

void WriteNodeId(const std::string& path, const std::string& id) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << id << "\n";
    if (!out.good()) {
      spdlog::warn("cannot write the node id to {}", tmp);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) spdlog::warn("cannot write the node id to {}: {}", path, ec.message());
}

v1::RunningRank ToRunningRank(const RunningRankInfo& r) {
  v1::RunningRank out;
  out.set_job_id(r.job_id);
  out.set_generation(r.generation);
  out.set_global_rank(r.global_rank);
  out.set_pid(r.pid);
  *out.mutable_start_time() = ToProtoTime(r.start_time);
  return out;
}

}  // namespace

std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& address, const RetryPolicy& retry,
                                                  const TlsMaterial* tls, const std::string& join_token,
                                                  const NodeCredential* credential) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  const int initial_ms = static_cast<int>(absl::ToInt64Milliseconds(retry.initial));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(absl::ToInt64Milliseconds(retry.max)));
  Headers headers;
  if (!join_token.empty()) headers.emplace_back(kJoinTokenHeader, join_token);
  HeaderSource source;
  if (credential != nullptr) source = [credential] { return credential->CallHeaders(); };
  return MakeChannel(address, MakeChannelCredentials(tls), args, std::move(headers), std::move(source));
}

CoordinatorSession::CoordinatorSession(std::shared_ptr<grpc::Channel> channel, Clock* clock, RankLauncher* launcher,
                                       ProcessSupervisor* supervisor, WorkerMetrics* metrics,
                                       CoordinatorSessionOptions options)
    : stub_(v1::NodeService::NewStub(channel)),
      clock_(clock),
      launcher_(launcher),
      supervisor_(supervisor),
      metrics_(metrics),
      options_(std::move(options)) {
  node_id_ = options_.node.node_id().empty() ? ReadNodeId(options_.node_id_path) : options_.node.node_id();
}

CoordinatorSession::~CoordinatorSession() { Stop(absl::ZeroDuration()); }

void CoordinatorSession::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  session_thread_ = std::thread([this] { SessionLoop(); });
  exit_thread_ = std::thread([this] { ExitLoop(); });
}

void CoordinatorSession::Stop(absl::Duration drain_timeout) {
  // First the exit reports, while the session is still open.
  std::unique_lock<std::mutex> lock(mu_);
  if (!exits_stopping_) {
    exits_stopping_ = true;
    exits_deadline_ = clock_->Now() + drain_timeout;
  }
  exits_cv_.notify_all();
  if (exit_thread_.joinable()) {
    if (!clock_->WaitUntil(lock, exits_cv_, exits_deadline_ + absl::Milliseconds(100),
                           [&] { return exit_thread_done_; }) &&
        exit_call_ != nullptr) {
      exit_call_->TryCancel();  // a report in flight past the deadline
    }
    lock.unlock();
    exit_thread_.join();
    lock.lock();
  }
  // Then the session: the writer ends the stream; a call stuck in flight is cancelled.
  stopping_ = true;
  cv_.notify_all();
  if (session_thread_.joinable()) {
    if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(2 * kCloseTimeout), [&] { return session_thread_done_; }) &&
        active_call_ != nullptr) {
      active_call_->TryCancel();
    }
    lock.unlock();
    session_thread_.join();
  }
}

void CoordinatorSession::ReportProgress(const v1::RankProgress& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_[RankKey{progress.job_id(), progress.generation(), progress.global_rank()}] = progress;
  cv_.notify_all();
}

void CoordinatorSession::RequestDrain(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  drain_reason_ = reason.empty() ? "the worker drains its node" : reason;
  outbox_.push_back(DrainMessage());
  cv_.notify_all();
}

bool CoordinatorSession::drain_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !drain_reason_.empty();
}

v1::WorkerMessage CoordinatorSession::DrainMessage() const {
  v1::WorkerMessage message;
  message.mutable_drain()->set_reason(drain_reason_);
  return message;
}

std::string CoordinatorSession::node_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return node_id_;
}

bool CoordinatorSession::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_;
}

int64_t CoordinatorSession::sessions_opened() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_opened_;
}

size_t CoordinatorSession::pending_exits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exits_.size();
}

bool CoordinatorSession::SleepFor(absl::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_->WaitUntil(lock, cv_, clock_->Now() + d, [&] { return stopping_; });
  return !stopping_;
}

void CoordinatorSession::SetNodeId(const std::string& node_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (node_id_ == node_id) return;
    node_id_ = node_id;
    exits_cv_.notify_all();  // reports were waiting for an id
  }
  WriteNodeId(options_.node_id_path, node_id);
}

void CoordinatorSession::SessionLoop() {
  Retry retry(clock_, options_.retry);
  while (true) {
    bool got_lease = false;
    absl::Status status = RunSession(&got_lease);
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_ = false;
      if (stopping_) break;
    }
    if (metrics_ != nullptr) metrics_->SetConnected(false);
    if (got_lease) retry.Reset();
    // Without a deadline in the policy there is always a next delay.
    const absl::Duration delay = retry.NextDelay().value_or(options_.retry.max);
    if (status.code() == absl::StatusCode::kNotFound || status.code() == absl::StatusCode::kFailedPrecondition) {
      spdlog::warn("the coordinator does not know this session ({}): registering again in {}", status.ToString(),
                   absl::FormatDuration(delay));
    } else {
      spdlog::warn("coordinator session ended ({}): reconnecting in {}", status.ToString(),
                   absl::FormatDuration(delay));
    }
    if (!SleepFor(delay)) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  session_thread_done_ = true;
  cv_.notify_all();
}

absl::Status CoordinatorSession::Register(int64_t* session_id, absl::Duration* heartbeat_interval) {
  v1::RegisterNodeRequest request;
  *request.mutable_node() = options_.node;
  request.mutable_node()->set_node_id(node_id());
  request.set_drain(drain_requested());
  for (const RunningRankInfo& r : supervisor_->Running()) *request.add_running_ranks() = ToRunningRank(r);
  v1::RegisterNodeResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));  // gRPC's real time
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return absl::CancelledError("stopping");
    active_call_ = &context;
    // A rank whose exit the coordinator has not been told yet is still
    // running as far as it knows: listed so, it is not taken for a rank that
    // vanished (which would restart its generation); the exit report follows.
    // No report is sent while this list is in flight (one being sent ends
    // first), so a rank is never both listed and reported before the answer.
    registering_ = true;
    exits_cv_.wait(lock, [&] { return exit_call_ == nullptr; });
    for (const RankExit& e : exits_) {
      v1::RunningRank* r = request.add_running_ranks();
      r->set_job_id(e.job_id);
      r->set_generation(e.generation);
      r->set_global_rank(e.global_rank);
      r->set_pid(e.pid);
    }
  }
  bool registered = false;
  absl::Cleanup done = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    registering_ = false;
    if (registered) retry_exits_now_ = true;  // the coordinator is back: report them now
    exits_cv_.notify_all();
  };
  grpc::Status status = stub_->Register(&context, request, &response);
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_call_ = nullptr;
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE && IsTlsHandshakeFailure(status.error_message())) {
    return absl::UnauthenticatedError(absl::StrCat(
        "TLS handshake with the coordinator failed (is its certificate issued by --tls-ca and does it name the "
        "--coordinator address?): ", status.error_message()));
  }
  if (!status.ok()) return FromGrpcStatus(status);
  registered = true;
  if (!response.credential().empty() && options_.credential != nullptr) {
    // Kept before the node id: a node id without its credential could not be registered again.
    if (absl::Status s = options_.credential->Set(response.credential()); !s.ok()) {
      spdlog::error("the node credential could not be kept ({}): a restarted worker will not be able to register "
                    "node {} again",
                    s.ToString(), response.node_id());
    }
    spdlog::info("the coordinator issued this node's credential");
  }
  SetNodeId(response.node_id());
  *session_id = response.session_id();
  absl::Duration interval = options_.heartbeat_interval;
  const absl::Duration lease = FromProtoDuration(response.lease_duration());
  if (interval <= absl::ZeroDuration()) interval = FromProtoDuration(response.heartbeat_interval());
  if (interval <= absl::ZeroDuration()) interval = lease > absl::ZeroDuration() ? lease / 3 : kDefaultHeartbeat;
  if (lease > absl::ZeroDuration()) interval = std::min(interval, lease / 3);
  *heartbeat_interval = interval;
  spdlog::info("registered with the coordinator as node {} (session {}, {} running rank(s), heartbeat every {})",
               response.node_id(), response.session_id(), request.running_ranks_size(), absl::FormatDuration(interval));
  for (const v1::StopRanks& stop : response.stop()) launcher_->Stop(stop);
  return absl::OkStatus();
}

absl::Status CoordinatorSession::RunSession(bool* got_lease) {
  int64_t session_id = 0;
  absl::Duration interval;
  if (absl::Status s = Register(&session_id, &interval); !s.ok()) return s;

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::CancelledError("stopping");
    active_call_ = &context;
    reader_done_ = false;
    outbox_.clear();  // answers meant for the previous session
    // A drain asked for after the registration was sent.
    if (!drain_reason_.empty()) outbox_.push_back(DrainMessage());
  }
  stream = stub_->Session(&context);
  v1::WorkerMessage open;
  open.mutable_open()->set_node_id(node_id());
  open.mutable_open()->set_session_id(session_id);
  bool ok = stream->Write(open);
  bool closing = false;  // Stop() ended the session
  std::thread reader;
  if (ok) {
    reader = std::thread([&] { ReadLoop(stream.get(), got_lease); });
    bool reconnect;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_ = true;
      reconnect = sessions_opened_++ > 0;
    }
    if (metrics_ != nullptr) {
      metrics_->SetConnected(true);
      if (reconnect) metrics_->CountReconnect();
    }
    absl::Time next_heartbeat = clock_->Now();
    while (ok) {
      std::vector<v1::WorkerMessage> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        clock_->WaitUntil(lock, cv_, next_heartbeat,
                          [&] { return stopping_ || reader_done_ || !outbox_.empty() || !progress_.empty(); });
        if (stopping_) closing = true;
        if (stopping_ || reader_done_) break;
        for (; !outbox_.empty(); outbox_.pop_front()) batch.push_back(std::move(outbox_.front()));
        for (auto& [key, progress] : progress_) *batch.emplace_back().mutable_progress() = std::move(progress);
        progress_.clear();
      }
      if (clock_->Now() >= next_heartbeat) {
        batch.push_back(HeartbeatMessage());
        next_heartbeat = clock_->Now() + interval;
      }
      for (const v1::WorkerMessage& message : batch) {
        if (!(ok = stream->Write(message))) break;
      }
    }
    if (closing && ok) {
      stream->WritesDone();
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, absl::ToChronoNanoseconds(kCloseTimeout), [&] { return reader_done_; });
    }
  }
  bool server_closed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    server_closed = reader_done_;
  }
  // Stopping: end the reader if the coordinator did not close the stream. In
  // every other case the call is over already (a failed Write means so), and
  // Finish returns the coordinator's status rather than CANCELLED.
  if (closing && !server_closed) context.TryCancel();
  if (reader.joinable()) reader.join();
  grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_call_ = nullptr;
    if (stopping_) return absl::OkStatus();
  }
  if (status.ok()) return absl::UnavailableError("the coordinator closed the session");
  return FromGrpcStatus(status);
}

void CoordinatorSession::ReadLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream,
                                  bool* got_lease) {
  v1::CoordinatorMessage message;
  while (stream->Read(&message)) {
    switch (message.kind_case()) {
      case v1::CoordinatorMessage::kLease:
        *got_lease = true;
        break;
      case v1::CoordinatorMessage::kStart: {
        const v1::StartRanks& start = message.start();
        if (metrics_ != nullptr) {
          metrics_->SetCheckpointPlan(start.job_id(), start.generation(), start.spec().checkpoint().interval_steps(),
                                      start.has_resume_from() ? start.resume_from().step() : 0);
          for (const v1::RankAssignment& rank : start.placement().ranks()) {
            metrics_->SetRankGpu(start.job_id(), rank.global_rank(), rank.gpu_uuid());
          }
        }
        v1::WorkerMessage answer;
        bool unfit = false;
        *answer.mutable_start_result() = Start(start, &unfit);
        // A refusal goes after a heartbeat that says why, so that the restart is placed elsewhere.
        v1::WorkerMessage heartbeat;
        if (unfit) heartbeat = HeartbeatMessage();
        std::lock_guard<std::mutex> lock(mu_);
        if (heartbeat.has_heartbeat()) outbox_.push_back(std::move(heartbeat));
        outbox_.push_back(std::move(answer));
        cv_.notify_all();
        break;
      }
      case v1::CoordinatorMessage::kStop:
        launcher_->Stop(message.stop());
        break;
      case v1::CoordinatorMessage::kCheckpoint: {
        const v1::CheckpointNow& checkpoint = message.checkpoint();
        if (supervisor_->RequestCheckpoint(checkpoint.job_id(), checkpoint.generation())) {
          spdlog::info("job {} generation {}: checkpoint requested ({})", checkpoint.job_id(),
                       checkpoint.generation(), checkpoint.reason());
        }
        break;
      }
      default:
        spdlog::warn("ignoring a coordinator message of unknown kind {}", static_cast<int>(message.kind_case()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  reader_done_ = true;
  cv_.notify_all();
}

v1::StartRanksResult CoordinatorSession::Start(const v1::StartRanks& start, bool* unfit) {
  const std::string failure =
      options_.health == nullptr
          ? ""
          : options_.health->CheckBeforePlacement({start.checkpoint_roots().begin(), start.checkpoint_roots().end()});
  *unfit = !failure.empty();
  if (failure.empty()) return launcher_->Start(start);
  spdlog::warn("job {} generation {}: not started, the node is NOT_READY: {}", start.job_id(), start.generation(),
               failure);
  v1::StartRanksResult result;
  result.set_job_id(start.job_id());
  result.set_generation(start.generation());
  result.set_error(absl::StrCat("node not ready: ", failure));
  return result;
}

v1::WorkerMessage CoordinatorSession::HeartbeatMessage() const {
  v1::WorkerMessage message;
  v1::Heartbeat* heartbeat = message.mutable_heartbeat();
  *heartbeat->mutable_time() = ToProtoTime(clock_->Now());
  if (options_.health != nullptr) heartbeat->set_health_failure(options_.health->Failure());
  for (const RunningRankInfo& r : supervisor_->Running()) *heartbeat->add_running_ranks() = ToRunningRank(r);
  return message;
}

}  // namespace ringmaster::worker
