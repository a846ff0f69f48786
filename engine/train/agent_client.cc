#include "engine/train/agent_client.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_files.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// An RPC that misses this is retried with the next report (metrics) or fails
// the commit (the trainer then stops: its generation is probably over).
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
// How long a checkpoint commit waits for an unreachable coordinator.
constexpr absl::Duration kCommitPatience = absl::Minutes(5);

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(kRpcTimeout)));
}

// Peak resident memory of this process, bytes (0 if unknown): the CPU
// backend's "device memory". A CUDA rank reports its caching allocator's peak.
int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

}  // namespace

std::unique_ptr<AgentClient> AgentClient::Connect(const v1::RankContext& context, absl::Duration interval) {
  if (context.agent().empty()) return nullptr;
  return std::unique_ptr<AgentClient>(new AgentClient(
      context.agent(), context.rendezvous().secret(), context.job_id(), context.generation(),
      context.rank().global_rank(), interval,
      std::vector<std::string>(context.checkpoint_roots().begin(), context.checkpoint_roots().end())));
}

AgentClient::AgentClient(std::string target, const std::string& secret, std::string job, int64_t generation, int rank,
                         absl::Duration interval, std::vector<std::string> checkpoint_roots)
    : job_(std::move(job)),
      generation_(generation),
      rank_(rank),
      interval_(interval),
      checkpoint_roots_(std::move(checkpoint_roots)) {
  // Every call presents the generation's secret: the worker acts for this
  // rank only on a call that does (any local process reaches its socket).
  auto channel = MakeChannel(target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
                             {{kRankSecretHeader, secret}});
  agent_ = v1::AgentService::NewStub(channel);
  checkpoints_ = v1::CheckpointService::NewStub(channel);
  sender_ = std::thread([this] { SendLoop(); });
}

AgentClient::~AgentClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  sender_.join();
}

void AgentClient::ReportStep(const StepReport& step) {
  v1::StepMetrics m;
  m.set_step(step.step);
  m.set_total_steps(step.total_steps);
  m.set_epoch(static_cast<int32_t>(step.epoch));
  m.set_loss(step.loss);
  m.set_samples_per_second(step.seconds > 0 ? step.samples / step.seconds : 0);
  m.set_tokens_per_second(step.seconds > 0 ? step.tokens / step.seconds : 0);
  m.set_loss_scale(step.loss_scale);
  m.set_skipped_steps(step.skipped_total);
  m.set_step_time_seconds(step.seconds);
  m.set_communication_seconds(step.comm_seconds);
  m.set_grad_norm(step.grad_norm);
  m.set_learning_rate(step.lr);
  m.set_memory_bytes(step.device_memory_peak_bytes > 0 ? step.device_memory_peak_bytes : PeakRssBytes());
  m.set_model_flops_per_second(step.seconds > 0 ? step.model_flops / step.seconds : 0);
  m.set_peak_flops_per_second(step.peak_flops);
  m.set_data_wait_seconds(step.data_wait_seconds);
  m.set_checkpoint_interval_seconds(step.checkpoint_interval_seconds);
  *m.mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.set_eval_loss(last_eval_.eval_loss());
    m.set_eval_accuracy(last_eval_.eval_accuracy());
    m.set_eval_step(last_eval_.eval_step());
    latest_ = m;
    pending_ = std::move(m);
    handed_back_ = absl::Now();
  }
  cv_.notify_all();
}

void AgentClient::ReportEval(const EvalReport& eval) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_eval_.set_eval_loss(eval.loss);
    last_eval_.set_eval_accuracy(eval.accuracy >= 0 ? eval.accuracy : 0);
    last_eval_.set_eval_step(eval.step);
    // An evaluation comes after its step's report may have gone (the final
    // one always does): send the latest step again, carrying it.
    if (!pending_.has_value() && latest_.has_value()) pending_ = latest_;
    if (pending_.has_value()) {
      pending_->set_eval_loss(eval.loss);
      pending_->set_eval_accuracy(eval.accuracy >= 0 ? eval.accuracy : 0);
      pending_->set_eval_step(eval.step);
    }
    handed_back_ = absl::Now();
  }
  cv_.notify_all();
}

void AgentClient::SendLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return shutdown_ || pending_.has_value(); });
    if (!pending_.has_value()) return;  // shut down with nothing left to send
    v1::ReportMetricsRequest request;
    request.set_job_id(job_);
    request.set_generation(generation_);
    request.set_global_rank(rank_);
    *request.mutable_metrics() = std::move(*pending_);
    pending_.reset();
    const bool last = shutdown_;
    lock.unlock();
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::ReportMetricsResponse response;
    grpc::Status status = agent_->ReportMetrics(&context, request, &response);
    if (!status.ok()) spdlog::debug("metrics report to the worker failed: {}", status.error_message());
    lock.lock();
    if (status.ok() && response.stop()) stop_requested_ = true;
    if (status.ok() && response.checkpoint()) checkpoint_requested_ = true;
    if (last) return;
    // At most one report per interval (the latest metrics win).
    cv_.wait_for(lock, std::chrono::milliseconds(absl::ToInt64Milliseconds(interval_)), [&] { return shutdown_; });
  }
}

absl::StatusOr<std::string> AgentClient::AwaitRejoin(absl::Duration wait) {
  v1::RejoinRequest request;
  request.set_job_id(job_);
  request.set_generation(generation_);
  request.set_global_rank(rank_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(absl::ToInt64Milliseconds(wait)));
  v1::RejoinResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(agent_->Rejoin(&context, request, &response), "rejoin"));
  if (response.context_path().empty()) return absl::InternalError("rejoin: the worker named no rank context");
  return response.context_path();
}

bool AgentClient::checkpoint_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return checkpoint_requested_;
}

bool AgentClient::stop_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_requested_;
}

absl::Status AgentClient::CommitCheckpoint(int64_t step, const std::string& path, int stage, int stages) {
  v1::CommitCheckpointRequest request;
  request.set_step(step);
  request.set_pipeline_stage(stage);
  request.set_pipeline_stages(stages);
  return Commit(std::move(request), path, nullptr);
}

absl::Status AgentClient::CommitWholeModel(const CheckpointReport& checkpoint, int stages) {
  v1::CommitCheckpointRequest request;
  request.set_step(checkpoint.step);
  request.set_pipeline_stage(0);
  request.set_pipeline_stages(stages);
  request.set_whole_model(true);
  return Commit(std::move(request), checkpoint.path, &checkpoint);
}

absl::Status AgentClient::RetryUnavailable(const std::string& what,
                                           const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  // Commits and reports are idempotent: while the coordinator cannot be
  // reached (it is restarting) they are retried, training paused, for up to
  // kCommitPatience.
  const absl::Time give_up = absl::Now() + kCommitPatience;
  absl::Duration backoff = absl::Milliseconds(250);
  for (;;) {
    grpc::ClientContext context;
    SetDeadline(&context);
    grpc::Status status = call(&context);
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient || absl::Now() + backoff > give_up) return FromGrpcStatus(status, what);
    spdlog::warn("{} not answered ({}); retrying in {}", what, status.error_message(), absl::FormatDuration(backoff));
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(4));
  }
}

absl::Status AgentClient::ReportDamaged(const v1::CheckpointInfo& checkpoint, const std::string& damage) {
  v1::ReportDamagedCheckpointRequest request;
  request.set_job_id(job_);
  request.set_generation(generation_);
  request.set_rank(rank_);
  request.set_checkpoint_generation(checkpoint.generation());
  request.set_checkpoint_step(checkpoint.step());
  request.set_reason(damage);
  v1::ReportDamagedCheckpointResponse response;
  return RetryUnavailable(absl::StrCat("report of damaged checkpoint ", checkpoint.path()),
                          [&](grpc::ClientContext* c) { return checkpoints_->ReportDamaged(c, request, &response); });
}

absl::Status AgentClient::Commit(v1::CommitCheckpointRequest request, const std::string& path,
                                 const CheckpointReport* timed) {
  ASSIGN_OR_RETURN(std::string root, CheckpointRootFor(path, checkpoint_roots_));
  ASSIGN_OR_RETURN(Manifest manifest, VerifyCheckpoint(path, root));
  request.set_job_id(job_);
  request.set_generation(generation_);
  request.set_path(path);
  request.set_rank(rank_);
  if (timed != nullptr) {
    request.set_write_seconds(timed->write_seconds);
    request.set_stall_seconds(timed->stall_seconds);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    const bool known = handed_back_ != absl::InfinitePast();
    request.set_write_seconds(known ? absl::ToDoubleSeconds(absl::Now() - handed_back_) : -1);
  }
  for (const ManifestEntry& entry : manifest.files) {
    v1::CheckpointFile* file = request.add_files();
    file->set_path(entry.name);
    file->set_size_bytes(entry.size);
    file->mutable_checksum()->set_algorithm(v1::FileChecksum::SHA256);
    file->mutable_checksum()->set_hex(entry.sha256);
  }
  v1::CommitCheckpointResponse response;
  RETURN_IF_ERROR(RetryUnavailable(absl::StrCat("commit of checkpoint ", path),
                                   [&](grpc::ClientContext* c) { return checkpoints_->Commit(c, request, &response); }));
  // Pruned checkpoints lie in this job's directory: <job dir>/gen-<g>/step-<n>
  // (the coordinator hands out no other), removed beneath their root without
  // following a link.
  const std::filesystem::path generation_dir = std::filesystem::path(path).parent_path();
  const std::filesystem::path job_dir = generation_dir.parent_path();
  for (const std::string& pruned : response.prune_paths()) {
    const std::filesystem::path pruned_generation = std::filesystem::path(pruned).parent_path();
    if (pruned_generation.parent_path() != job_dir) {
      spdlog::warn("not pruning {}: outside the job's checkpoint directory {}", pruned, job_dir.string());
      continue;
    }
    absl::StatusOr<std::string> pruned_root = CheckpointRootFor(pruned, checkpoint_roots_);
    absl::Status removed = pruned_root.ok() ? RemoveCheckpoint(pruned, *pruned_root) : pruned_root.status();
    if (!removed.ok()) {
      spdlog::warn("could not remove pruned checkpoint: {}", removed.ToString());
      continue;
    }
    // An older generation's directory goes with its last checkpoint.
    if (pruned_generation != generation_dir) {
      if (absl::Status s = RemoveEmptyDirectory(pruned_generation.string(), *pruned_root); !s.ok()) {
        spdlog::warn("could not remove {}: {}", pruned_generation.string(), s.ToString());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::engine
