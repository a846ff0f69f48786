#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/train/backend_factory.h"
#include "engine/optim/grad_norm.h"
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
  ASSIGN_OR_RETURN(backend_, CreateBackend(config_));
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
  if (rank() == 0) {
    spdlog::info("{}: {} parameters, {} training samples, {} steps per epoch, {} steps", config_.name,
                 model_->NumParameters(), train_data_->size(), train_loader_->batches_per_epoch(), total_steps_);
    const size_t state_bytes = zero_ != nullptr ? zero_->StateBytes() : optimizer_->StateBytes();
    spdlog::info("optimizer state: {} bytes on this rank{}", state_bytes,
                 zero_ != nullptr ? absl::StrCat(" (ZeRO-1 shard 1/", grid_->layout().data(), ")") : "");
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Trainer::ForwardBackward(const Batch& batch, float loss_scale, double* comm_seconds) {
  if (pipeline_ != nullptr) {
    parallel::PipelineStepOptions options;
    options.loss_scale = loss_scale;
    options.rng_key = static_cast<uint64_t>(step_);
    ASSIGN_OR_RETURN(parallel::PipelineStepResult result, pipeline_->Step(batch, options));
    *comm_seconds += result.comm_seconds;
    return result.loss;
  }
  // Micro-batches one after the other (gradient accumulation); micro-batch i
  // of step k draws dropout key k * m + i, as a pipeline stage does.
  const int m = config_.parallel.micro_batches;
  float loss_sum = 0.0f;
  for (int i = 0; i < m; ++i) {
    ASSIGN_OR_RETURN(Batch micro, ToBackend(m > 1 ? MicroBatch(batch, m, i) : batch));
    const Tensor& input = IsLanguageModel() ? micro.tokens : micro.images;
    model_->SetRngKey(static_cast<uint64_t>(step_) * m + i);
    ASSIGN_OR_RETURN(Tensor logits, model_->Forward(input, /*training=*/true));
    ASSIGN_OR_RETURN(Tensor loss, loss_->Forward(logits, micro.targets, /*training=*/true, loss_scale / m));
    ASSIGN_OR_RETURN(Tensor dlogits, loss_->Backward());
    if (dp_ != nullptr) {
      RETURN_IF_ERROR(dp_->Backward(dlogits, /*sync=*/i == m - 1).status());
    } else {
      RETURN_IF_ERROR(model_->Backward(dlogits).status());
    }
    if (on_device()) {
      backend_->Axpy(1.0f / m, loss, device_loss_);  // read back at log intervals
    } else {
      loss_sum += loss.ToVector()[0];
    }
  }
  return loss_sum / m;
}

absl::StatusOr<StepReport> Trainer::Step() {
  if (on_device()) return StepOnDevice();
  auto start = std::chrono::steady_clock::now();
  Batch batch = train_loader_->Next();
  StepReport report;
  report.epoch = batch.epoch;
  report.samples = config_.data.global_batch;
  report.loss_scale = scaler_.scale();
  if (IsLanguageModel()) report.tokens = config_.data.global_batch * config_.model.block_size;

  SetTrainingStep(step_ + 1);
  ScopedTrainingPhase phase("forward/backward");
  ASSIGN_OR_RETURN(float local_loss, ForwardBackward(batch, scaler_.scale(), &report.comm_seconds));
  SetTrainingPhase("gradient reduction");
  RETURN_IF_ERROR(ReduceGradients(&report.comm_seconds));
  SetTrainingPhase("optimizer step");
  report.loss = local_loss;
  if (grid_ != nullptr && grid_->layout().data() > 1) {
    ASSIGN_OR_RETURN(double mean, AllReduceScalar(grid_->data_group(), local_loss, dist::ReduceOp::kAvg));
    report.loss = static_cast<float>(mean);
  }

  const float grad_scale = scaler_.inverse_scale();  // read before Update changes the scale
  bool overflow = false;
  if (scaler_.enabled()) {
    ASSIGN_OR_RETURN(overflow, AnyNonFinite());
  }
  report.skipped = scaler_.Update(overflow);
  report.skipped_total = scaler_.skipped_steps();
  report.lr = schedule_->LearningRate(OptimizerStepCount());
  if (!report.skipped) {
    ASSIGN_OR_RETURN(double sum_squares, GradSumSquares());
    report.grad_norm = grad_scale * std::sqrt(sum_squares);
    float clip = config_.grad_clip_norm > 0 ? optim::ClipCoefficient(report.grad_norm, config_.grad_clip_norm) : 1.0f;
    RETURN_IF_ERROR(OptimizerStep(report.lr, grad_scale * clip));
  }
  ZeroGradients();
  ++step_;
  report.step = step_;
  report.total_steps = total_steps_;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!std::isfinite(report.loss) && !scaler_.enabled()) {
    return absl::InternalError(absl::StrCat("step ", step_, ": the training loss is ", report.loss,
                                            " (diverged; lower the learning rate or enable fp16 loss scaling)"));
  }
  return report;
}

bool Trainer::EvalDue() const {
  if (config_.eval_interval_steps > 0) return step_ % config_.eval_interval_steps == 0;
  return step_ % train_loader_->batches_per_epoch() == 0;  // end of an epoch
}

absl::Status Trainer::Run() {
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
  SetTrainingPhase("between steps");
  while (step_ < total_steps_) {
    if (options_.max_steps_this_run >= 0 && run_steps >= options_.max_steps_this_run) return absl::OkStatus();
    ASSIGN_OR_RETURN(StepReport report, Step());
    ++run_steps;
    if (options_.on_step) options_.on_step(report);
    evaluated_last = false;
    if (EvalDue() || step_ == total_steps_) {
      ScopedTrainingPhase phase("evaluation");
      RETURN_IF_ERROR(report_eval());
      evaluated_last = true;
    }
    bool checkpoint_due = config_.checkpoint_interval_steps > 0 && step_ % config_.checkpoint_interval_steps == 0;
    if (!options_.checkpoint_dir.empty() && (checkpoint_due || step_ == total_steps_)) {
      ScopedTrainingPhase phase("checkpoint save and commit");
      ASSIGN_OR_RETURN(std::string path, SaveCheckpoint());
      if (rank() == 0 && options_.on_checkpoint) RETURN_IF_ERROR(options_.on_checkpoint(step_, path));
    }
    if (options_.should_stop && options_.should_stop()) {
      return absl::CancelledError(absl::StrCat("stopped at step ", step_, " at the coordinator's request"));
    }
  }
  if (!evaluated_last) RETURN_IF_ERROR(report_eval());  // resumed at the end: report it again
  return absl::OkStatus();
}

}  // namespace ringmaster::engine
