#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/plan/plan.h"
#include "engine/train/backend_factory.h"
#include "engine/train/state_dump.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {

Trainer::Trainer(const TrainerConfig& config, TrainerOptions options)
    : config_(config), options_(std::move(options)), world_(options_.world) {}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerConfig& config, TrainerOptions options) {
  std::unique_ptr<Trainer> trainer(new Trainer(config, std::move(options)));
  RETURN_IF_ERROR(trainer->Init());
  return trainer;
}

absl::Status Trainer::Init() {
  ASSIGN_OR_RETURN(backend_, options_.make_backend ? options_.make_backend(config_) : CreateBackend(config_));
  if (on_device() && distributed()) {
    if (std::string(world_->backend()) != "nccl") {
      return absl::FailedPreconditionError(absl::StrCat("training on CUDA with ", world_->size(),
                                                        " ranks needs an NCCL world, got ", world_->backend()));
    }
    // Collectives (and the groups split from the world) wait for the compute
    // stream on the device: bucket allreduces overlap backward without a host sync.
    world_->SetComputeStream(BackendStream(*backend_));
  }

  RETURN_IF_ERROR(LoadData());
  RETURN_IF_ERROR(ResolveLayout());
  ASSIGN_OR_RETURN(model_, nn::BuildModel(config_.model, *backend_));
  loss_ = std::make_unique<nn::SoftmaxCrossEntropy>(*backend_);
  if (config_.loss_scaler.enabled) {
    ASSIGN_OR_RETURN(scaler_, optim::LossScaler::Create(config_.loss_scaler));
  }
  RETURN_IF_ERROR(SetUpParallelism());
  RefreshWeightOperands(model_->Parameters());  // after the broadcasts of SetUpParallelism
  RETURN_IF_ERROR(InitStepScaler());
  if (on_device()) RETURN_IF_ERROR(InitDevice());

  LoaderOptions loader;
  loader.sampler.global_batch = config_.data.global_batch;
  loader.sampler.seed = config_.data.seed;
  loader.sampler.micro_batches = config_.parallel.micro_batches;
  if (grid_ != nullptr) {
    loader.sampler.world_size = grid_->layout().data();
    loader.sampler.rank = grid_->coord().data;
  }
  ASSIGN_OR_RETURN(train_loader_, DataLoader::Create(train_data_, loader));
  total_steps_ = config_.steps > 0 ? config_.steps : config_.epochs * train_loader_->batches_per_epoch();
  // A cosine decay of 0 steps lasts until the end of training.
  if (config_.schedule.decay == optim::LrDecay::kCosine && config_.schedule.decay_steps == 0) {
    config_.schedule.decay_steps = std::max<int64_t>(total_steps_ - config_.schedule.warmup_steps, 1);
  }
  ASSIGN_OR_RETURN(optim::LrSchedule schedule, optim::LrSchedule::Create(config_.schedule));
  schedule_.emplace(schedule);
  SetUpFlopAccounting();
  checkpoint_schedule_ = config_.checkpoint_interval_auto           ? CheckpointSchedule::Auto(options_.auto_interval)
              : config_.checkpoint_interval_seconds > 0 ? CheckpointSchedule::EverySeconds(config_.checkpoint_interval_seconds)
                                                        : CheckpointSchedule::EverySteps(config_.checkpoint_interval_steps);
  if (rank() == 0) {
    spdlog::info("{}: {} parameters, {} training samples, {} steps per epoch, {} steps", config_.name,
                 model_->NumParameters(), train_data_->size(), train_loader_->batches_per_epoch(), total_steps_);
    const size_t state_bytes = zero_ != nullptr ? zero_->StateBytes() : optimizer_->StateBytes();
    spdlog::info("optimizer state: {} bytes on this rank{}", state_bytes,
                 zero_ != nullptr ? absl::StrCat(" (ZeRO-1 shard 1/", grid_->layout().data(), ")") : "");
  }
  return absl::OkStatus();
}

void Trainer::SetUpFlopAccounting() {
  const int begin = pipeline_ != nullptr ? pipeline_->range().begin : 0;
  const int end = pipeline_ != nullptr ? pipeline_->range().end : model_->num_blocks();
  const int64_t replicas = grid_ != nullptr ? grid_->layout().data() : 1;
  rank_flops_per_step_ =
      plan::TrainingFlopsPerSample(config_.model, begin, end) * static_cast<double>(config_.data.global_batch / replicas);
  absl::StatusOr<plan::DeviceProfile> device =
      on_device() ? plan::DeviceForCudaName(BackendDeviceName(*backend_)) : plan::FindDevice("cpu");
  if (!device.ok()) return;  // a GPU without known peak rates: no MFU
  peak_flops_ = plan::PeakFlops(*device, config_);
  if (!on_device()) {
    // This rank's share of the cores: its threads.
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    const double threads = config_.threads > 0 ? std::min<double>(config_.threads, cores) : cores;
    peak_flops_ *= threads / cores;
  }
}

bool Trainer::EvalDue() const {
  if (config_.eval_interval_steps > 0) return step_ % config_.eval_interval_steps == 0;
  return step_ % train_loader_->batches_per_epoch() == 0;  // end of an epoch
}

namespace {
double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

absl::StatusOr<Trainer::ControlDecision> Trainer::ControlNow() {
  ControlDecision d;
  if (options_.checkpoint_dir.empty()) return d;
  const bool ask = options_.checkpoint_requested && !checkpoint_request_done_;
  if (!ask && !checkpoint_schedule_.timed()) return d;  // every rank alike: no collective
  if (step_ % std::max<int64_t>(options_.control_interval_steps, 1) != 0) return d;
  d.requested = ask && options_.checkpoint_requested();
  // Time is rank 0's: it writes, its stall chose the interval, its clock counts it.
  d.timed = rank() == 0 && checkpoint_schedule_.DueAt(MonotonicSeconds());
  if (distributed()) {
    if (!control_flag_.defined()) control_flag_ = backend_->Zeros({2});
    Tensor mine = Tensor::Zeros({2}, DType::kF32);
    mine.f32()[0] = d.requested ? 1.0f : 0.0f;
    mine.f32()[1] = d.timed ? 1.0f : 0.0f;
    CopyIntoLive(mine, control_flag_);
    RETURN_IF_ERROR(world_->AllReduce(control_flag_, dist::ReduceOp::kSum));
    const Tensor all = HostCopy(control_flag_);
    d.requested = all.f32()[0] > 0.0f;
    d.timed = all.f32()[1] > 0.0f;
  }
  checkpoint_request_done_ = checkpoint_request_done_ || d.requested;
  return d;
}

bool Trainer::CheckpointDue() const { return checkpoint_schedule_.DueAtStep(step_); }

absl::Status Trainer::Run() {
  absl::Status status = TrainLoop();
  // Never return while a checkpoint is being written: a stop's or a drain's
  // checkpoint is committed first. The writer's error wins over a stop
  // (CANCELLED) or a finished run; another error is reported, the writer's
  // logged.
  absl::Status written = writer_ != nullptr ? writer_->Wait() : absl::OkStatus();
  if (written.ok()) return status;
  if (status.ok() || status.code() == absl::StatusCode::kCancelled) return written;
  spdlog::error("checkpoint write failed: {}", written.ToString());
  return status;
}

absl::Status Trainer::TrainLoop() {
  if (!options_.checkpoint_dir.empty()) {
    absl::StatusOr<int64_t> resumed = Resume();
    if (resumed.ok()) {
      if (rank() == 0) spdlog::info("resumed from step {} of {}", *resumed, total_steps_);
    } else if (resumed.status().code() != absl::StatusCode::kNotFound) {
      return resumed.status();
    }
  }
  auto report_eval = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(EvalReport eval, Evaluate());
    if (rank() == 0 && options_.on_eval) options_.on_eval(eval);
    return absl::OkStatus();
  };
  int64_t run_steps = 0;
  bool evaluated_last = false;
  checkpoint_schedule_.Start(MonotonicSeconds());  // the first interval counts from here
  SetTrainingPhase("between steps");
  while (step_ < total_steps_) {
    if (options_.max_steps_this_run >= 0 && run_steps >= options_.max_steps_this_run) return absl::OkStatus();
    ASSIGN_OR_RETURN(StepReport report, Step());
    report.checkpoint_interval_seconds = checkpoint_schedule_.interval().seconds();
    ++run_steps;
    if (writer_ != nullptr) RETURN_IF_ERROR(writer_->Poll());  // a background write failed
    if (options_.on_step) options_.on_step(report);
    evaluated_last = false;
    if (EvalDue() || step_ == total_steps_) {
      ScopedTrainingPhase phase("evaluation");
      RETURN_IF_ERROR(report_eval());
      evaluated_last = true;
    }
    ASSIGN_OR_RETURN(const ControlDecision control, ControlNow());
    const bool requested = control.requested;
    if (requested && rank() == 0) spdlog::info("step {}: a checkpoint was requested (a node is being drained)", step_);
    if (!options_.checkpoint_dir.empty() && (CheckpointDue() || control.timed || requested || step_ == total_steps_)) {
      // A drain's checkpoint and the final one are committed before going on.
      RETURN_IF_ERROR(TakeCheckpoint(/*wait=*/requested || step_ == total_steps_));
      // A stall that paid for the snapshot buffers keeps the interval in force.
      checkpoint_schedule_.Checkpointed(MonotonicSeconds(),
                                        last_checkpoint_allocated() ? 0 : last_checkpoint_stall_seconds());
      if (rank() == 0 && checkpoint_schedule_.timed()) {
        spdlog::info("checkpoint interval: {}", checkpoint_schedule_.interval().why());
      }
    }
    if (options_.should_stop && options_.should_stop()) {
      return absl::CancelledError(absl::StrCat("stopped at step ", step_, " at the coordinator's request"));
    }
  }
  if (!evaluated_last) RETURN_IF_ERROR(report_eval());  // resumed at the end: report it again
  return absl::OkStatus();
}

}  // namespace ringmaster::engine
