#include "engine/train/trainer_config.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "common/status_macros.h"

namespace ringmaster::engine {
namespace {

using v1::JobSpec;

absl::Status MapModel(const v1::ModelSpec& spec, uint64_t seed, nn::ModelConfig* model) {
  model->seed = seed;
  switch (spec.kind_case()) {
    case v1::ModelSpec::kMlp:
      model->kind = nn::ModelKind::kMlp;
      model->hidden_sizes.assign(spec.mlp().hidden_sizes().begin(), spec.mlp().hidden_sizes().end());
      return absl::OkStatus();
    case v1::ModelSpec::kCnn: {
      const v1::CnnSpec& cnn = spec.cnn();
      model->kind = nn::ModelKind::kCnn;
      model->conv_channels.assign(cnn.channels().begin(), cnn.channels().end());
      model->cnn_hidden_sizes.assign(cnn.hidden_sizes().begin(), cnn.hidden_sizes().end());
      model->kernel_size = cnn.kernel_size();
      return absl::OkStatus();
    }
    case v1::ModelSpec::kGpt: {
      const v1::GptSpec& gpt = spec.gpt();
      model->kind = nn::ModelKind::kGpt;
      model->n_layer = gpt.layers();
      model->n_head = gpt.heads();
      model->n_embd = gpt.width();
      model->block_size = gpt.context();
      model->vocab_size = gpt.vocab_size();
      return absl::OkStatus();
    }
    case v1::ModelSpec::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("model: required");
}

absl::Status MapOptimizer(const v1::OptimizerSpec& spec, optim::OptimizerConfig* opt, float* clip) {
  switch (spec.type()) {
    case v1::OptimizerSpec::SGD: opt->kind = optim::OptimizerKind::kSgd; break;
    case v1::OptimizerSpec::LARS: opt->kind = optim::OptimizerKind::kLars; break;
    case v1::OptimizerSpec::LAMB: opt->kind = optim::OptimizerKind::kLamb; break;
    default: opt->kind = optim::OptimizerKind::kAdamW; break;
  }
  opt->lr = static_cast<float>(spec.lr());
  if (spec.has_momentum()) opt->momentum = static_cast<float>(spec.momentum());
  if (spec.has_nesterov()) opt->nesterov = spec.nesterov();
  if (spec.has_weight_decay()) opt->weight_decay = static_cast<float>(spec.weight_decay());
  if (spec.betas_size() == 2) {
    opt->beta1 = spec.betas(0);
    opt->beta2 = spec.betas(1);
  }
  if (spec.has_eps()) opt->eps = static_cast<float>(spec.eps());
  if (spec.has_trust_coefficient()) opt->trust_coefficient = static_cast<float>(spec.trust_coefficient());
  *clip = spec.has_grad_clip_norm() ? static_cast<float>(spec.grad_clip_norm()) : 0.0f;
  return absl::OkStatus();
}

absl::Status MapSchedule(const JobSpec& spec, float lr, optim::LrScheduleConfig* schedule) {
  const v1::LrScheduleSpec& s = spec.lr_schedule();
  optim::LrScalingRule rule = optim::LrScalingRule::kNone;
  if (s.scaling_rule() == v1::LrScheduleSpec::LINEAR) rule = optim::LrScalingRule::kLinear;
  if (s.scaling_rule() == v1::LrScheduleSpec::SQRT) rule = optim::LrScalingRule::kSqrt;
  int64_t reference = s.has_reference_batch_size() ? s.reference_batch_size() : spec.data().batch_size();
  ASSIGN_OR_RETURN(schedule->base_lr, optim::ScaleLearningRate(lr, spec.data().batch_size(), reference, rule));
  schedule->warmup_steps = s.warmup_steps();
  switch (s.type()) {
    case v1::LrScheduleSpec::COSINE: schedule->decay = optim::LrDecay::kCosine; break;
    case v1::LrScheduleSpec::STEP: schedule->decay = optim::LrDecay::kStep; break;
    default: schedule->decay = optim::LrDecay::kConstant; break;
  }
  schedule->decay_steps = s.decay_steps();
  schedule->step_size = s.step_size();
  if (s.has_gamma()) schedule->gamma = static_cast<float>(s.gamma());
  schedule->min_lr = static_cast<float>(s.min_lr());
  return absl::OkStatus();
}

void MapPrecision(const v1::PrecisionSpec& spec, DType* dtype, optim::LossScalerConfig* scaler) {
  *dtype = DType::kF32;
  scaler->enabled = false;
  if (spec.compute() == v1::PrecisionSpec::BF16) *dtype = DType::kBF16;
  if (spec.compute() != v1::PrecisionSpec::FP16) return;  // TF32 is f32 on the CPU
  *dtype = DType::kF16;
  const v1::LossScaleSpec& ls = spec.loss_scale();
  scaler->enabled = true;
  if (ls.has_initial_scale()) scaler->initial_scale = static_cast<float>(ls.initial_scale());
  if (ls.has_growth_interval()) scaler->growth_interval = ls.growth_interval();
  if (ls.has_growth_factor()) scaler->growth_factor = static_cast<float>(ls.growth_factor());
  if (ls.has_backoff_factor()) scaler->backoff_factor = static_cast<float>(ls.backoff_factor());
  if (ls.has_dynamic() && !ls.dynamic()) {
    // A static scale: overflowing steps are still skipped, the scale never moves.
    scaler->min_scale = scaler->max_scale = scaler->initial_scale;
  }
}

}  // namespace

absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(absl::string_view value, absl::string_view field) {
  if (value.empty() || value == "auto") return CudaGraphMode::kAuto;
  if (value == "on") return CudaGraphMode::kOn;
  if (value == "off") return CudaGraphMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": \"", value, "\" is not one of \"auto\", \"on\", \"off\""));
}

absl::StatusOr<bool> UseCudaGraphs(const TrainerConfig& config, int ranks, int64_t parameters) {
  if (config.cuda_graphs == CudaGraphMode::kOff) return false;
  // What rules a graph out: collectives in the step, host data between
  // micro-batches, or a dropout key that changes every step (a launch argument).
  std::string why_not;
  if (ranks > 1) {
    why_not = "more than one rank (collectives in the step)";
  } else if (config.parallel.micro_batches > 1) {
    why_not = "parallelism.micro_batches > 1";
  } else if (config.model.dropout > 0.0f) {
    why_not = "model dropout > 0 (its key changes every step)";
  }
  if (config.cuda_graphs == CudaGraphMode::kOn) {
    if (!why_not.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("resources.cuda_graphs: \"on\" is not possible with ", why_not));
    }
    return true;
  }
  return why_not.empty() && parameters <= kCudaGraphAutoMaxParameters;
}

absl::StatusOr<TrainerConfig> TrainerConfigFromSpec(const JobSpec& spec) {
  TrainerConfig config;
  config.name = spec.name();
  RETURN_IF_ERROR(MapModel(spec.model(), spec.seed(), &config.model));

  const v1::DataSpec& data = spec.data();
  switch (data.dataset()) {
    case v1::DataSpec::FASHION_MNIST: config.data.kind = DatasetKind::kFashionMnist; break;
    case v1::DataSpec::TEXT: config.data.kind = DatasetKind::kText; break;
    case v1::DataSpec::SYNTHETIC: config.data.kind = DatasetKind::kSynthetic; break;
    default: return absl::InvalidArgumentError("data.dataset: required");
  }
  config.data.path = data.path();
  config.data.global_batch = data.batch_size();
  config.data.seed = data.has_seed() ? data.seed() : spec.seed();
  config.data.holdout_fraction = data.holdout_fraction();
  config.data.synthetic_samples = data.synthetic_samples();

  RETURN_IF_ERROR(MapOptimizer(spec.optimizer(), &config.optimizer, &config.grad_clip_norm));
  RETURN_IF_ERROR(MapSchedule(spec, config.optimizer.lr, &config.schedule));
  MapPrecision(spec.precision(), &config.compute_dtype, &config.loss_scaler);

  const v1::ParallelismSpec& par = spec.parallelism();
  config.parallel.data = par.data();
  config.parallel.pipeline = par.pipeline();
  config.parallel.micro_batches = par.micro_batches();
  config.parallel.schedule =
      par.schedule() == v1::ParallelismSpec::GPIPE ? parallel::ScheduleKind::kGpipe : parallel::ScheduleKind::kOneFOneB;
  config.parallel.stage_boundaries.assign(par.stage_boundaries().begin(), par.stage_boundaries().end());
  config.parallel.bucket_bytes = static_cast<int64_t>(par.bucket_size_mb() * 1024 * 1024);
  if (par.gradient_compression() == v1::ParallelismSpec::FP16) config.parallel.compression = parallel::GradCompression::kFp16;
  if (par.gradient_compression() == v1::ParallelismSpec::BF16) config.parallel.compression = parallel::GradCompression::kBf16;
  config.parallel.zero1 = par.zero1();

  const v1::TrainingSpec& training = spec.training();
  if (training.length_case() == v1::TrainingSpec::kSteps) {
    config.steps = training.steps();
  } else {
    config.epochs = training.epochs();
  }
  config.eval_interval_steps = training.eval_interval_steps();
  config.log_interval_steps = training.log_interval_steps();
  config.checkpoint_interval_steps = spec.checkpoint().interval_steps();
  config.checkpoint_interval_seconds = spec.checkpoint().interval_seconds();
  config.checkpoint_interval_auto = spec.checkpoint().interval() == kCheckpointIntervalAuto;
  config.checkpoint_keep = spec.checkpoint().keep();
  config.threads = spec.resources().cpus_per_rank();
  config.device = spec.resources().device() == v1::ResourceSpec::CUDA ? Device::kCuda : Device::kCpu;
  config.tf32 = spec.precision().compute() == v1::PrecisionSpec::TF32;
  ASSIGN_OR_RETURN(config.cuda_graphs, ParseCudaGraphMode(spec.resources().cuda_graphs(), "resources.cuda_graphs"));
  return config;
}

}  // namespace ringmaster::engine
