#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/optim/grad_norm.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {

Trainer::Trainer(const TrainerConfig& config, TrainerOptions options)
    : config_(config), options_(std::move(options)) {}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerConfig& config, TrainerOptions options) {
  std::unique_ptr<Trainer> trainer(new Trainer(config, std::move(options)));
  RETURN_IF_ERROR(trainer->Init());
  return trainer;
}

absl::Status Trainer::Init() {
  CpuBackendConfig backend_config;
  backend_config.num_threads = config_.threads;
  backend_config.compute_dtype = config_.compute_dtype;
  backend_ = std::make_unique<CpuBackend>(backend_config);

  RETURN_IF_ERROR(LoadData());
  ASSIGN_OR_RETURN(model_, nn::BuildModel(config_.model, *backend_));
  loss_ = std::make_unique<nn::SoftmaxCrossEntropy>(*backend_);
  ASSIGN_OR_RETURN(optimizer_, optim::Optimizer::Create(config_.optimizer, model_->Parameters()));
  if (config_.loss_scaler.enabled) {
    ASSIGN_OR_RETURN(scaler_, optim::LossScaler::Create(config_.loss_scaler));
  }

  LoaderOptions loader;
  loader.sampler.global_batch = config_.data.global_batch;
  loader.sampler.seed = config_.data.seed;
  ASSIGN_OR_RETURN(train_loader_, DataLoader::Create(train_data_, loader));
  total_steps_ = config_.steps > 0 ? config_.steps : config_.epochs * train_loader_->batches_per_epoch();
  // A cosine decay of 0 steps lasts until the end of training.
  if (config_.schedule.decay == optim::LrDecay::kCosine && config_.schedule.decay_steps == 0) {
    config_.schedule.decay_steps = std::max<int64_t>(total_steps_ - config_.schedule.warmup_steps, 1);
  }
  ASSIGN_OR_RETURN(optim::LrSchedule schedule, optim::LrSchedule::Create(config_.schedule));
  schedule_.emplace(schedule);
  spdlog::info("{}: {} parameters, {} training samples, {} steps per epoch, {} steps", config_.name,
               model_->NumParameters(), train_data_->size(), train_loader_->batches_per_epoch(), total_steps_);
  return absl::OkStatus();
}

absl::StatusOr<StepReport> Trainer::Step() {
  auto start = std::chrono::steady_clock::now();
  Batch batch = train_loader_->Next();
  StepReport report;
  report.epoch = batch.epoch;
  report.samples = batch.size();
  report.loss_scale = scaler_.scale();
  const Tensor& input = IsLanguageModel() ? batch.tokens : batch.images;
  if (IsLanguageModel()) report.tokens = batch.tokens.numel();

  // Dropout masks are keyed by the step, so a resumed run draws the same ones.
  model_->SetRngKey(static_cast<uint64_t>(step_));
  ASSIGN_OR_RETURN(Tensor logits, model_->Forward(input, /*training=*/true));
  ASSIGN_OR_RETURN(Tensor loss, loss_->Forward(logits, batch.targets, /*training=*/true, scaler_.scale()));
  ASSIGN_OR_RETURN(Tensor dlogits, loss_->Backward());
  RETURN_IF_ERROR(model_->Backward(dlogits).status());
  report.loss = loss.ToVector()[0];

  ParameterList params = model_->Parameters();
  float grad_scale = scaler_.inverse_scale();  // read before Update changes the scale
  bool overflow = false;
  if (scaler_.enabled()) {
    ASSIGN_OR_RETURN(overflow, optim::HasNonFiniteGrad(params));
  }
  report.skipped = scaler_.Update(overflow);
  report.skipped_total = scaler_.skipped_steps();
  report.lr = schedule_->LearningRate(optimizer_->step_count());
  if (!report.skipped) {
    ASSIGN_OR_RETURN(report.grad_norm, optim::GlobalGradNorm(params, grad_scale));
    float clip = config_.grad_clip_norm > 0 ? optim::ClipCoefficient(report.grad_norm, config_.grad_clip_norm) : 1.0f;
    RETURN_IF_ERROR(optimizer_->Step(report.lr, grad_scale * clip));
  }
  optimizer_->ZeroGrad();
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
      spdlog::info("resumed from step {} of {}", *resumed, total_steps_);
    } else if (resumed.status().code() != absl::StatusCode::kNotFound) {
      return resumed.status();
    }
  }
  int64_t run_steps = 0;
  bool evaluated_last = false;
  while (step_ < total_steps_) {
    if (options_.max_steps_this_run >= 0 && run_steps >= options_.max_steps_this_run) return absl::OkStatus();
    ASSIGN_OR_RETURN(StepReport report, Step());
    ++run_steps;
    if (options_.on_step) options_.on_step(report);
    evaluated_last = false;
    if (EvalDue() || step_ == total_steps_) {
      ASSIGN_OR_RETURN(EvalReport eval, Evaluate());
      if (options_.on_eval) options_.on_eval(eval);
      evaluated_last = true;
    }
    bool checkpoint_due = config_.checkpoint_interval_steps > 0 && step_ % config_.checkpoint_interval_steps == 0;
    if (!options_.checkpoint_dir.empty() && (checkpoint_due || step_ == total_steps_)) {
      RETURN_IF_ERROR(SaveCheckpoint().status());
    }
  }
  if (!evaluated_last) {  // resumed at the end: report the final evaluation again
    ASSIGN_OR_RETURN(EvalReport eval, Evaluate());
    if (options_.on_eval) options_.on_eval(eval);
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::engine
