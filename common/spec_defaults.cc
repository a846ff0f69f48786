// ApplyDefaults and ModelBlockCount (see spec.h). Every default here is the
// one documented on its field in proto/job_spec.proto or
// proto/model_spec.proto; change both together.

#include <algorithm>
#include <cstdint>

#include "common/spec.h"

namespace ringmaster {
namespace {

using v1::DataSpec;
using v1::JobSpec;
using v1::LrScheduleSpec;
using v1::ModelSpec;
using v1::OptimizerSpec;
using v1::PrecisionSpec;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
// The King James Bible as plain text, written by scripts/install-deps.sh from
// Debian's bible-kjv (whose own data file is in a compressed format).
constexpr char kKjvTextFile[] = "/usr/local/share/ringmaster/kjv.txt";

void DefaultModel(ModelSpec* model) {
  switch (model->kind_case()) {
    case ModelSpec::kMlp:
      if (model->mlp().hidden_sizes_size() == 0) {
        model->mutable_mlp()->add_hidden_sizes(256);
        model->mutable_mlp()->add_hidden_sizes(128);
      }
      break;
    case ModelSpec::kCnn: {
      v1::CnnSpec* cnn = model->mutable_cnn();
      if (cnn->channels_size() == 0) {
        cnn->add_channels(32);
        cnn->add_channels(64);
      }
      if (!cnn->has_kernel_size()) cnn->set_kernel_size(3);
      if (cnn->hidden_sizes_size() == 0) cnn->add_hidden_sizes(128);
      break;
    }
    case ModelSpec::kGpt: {
      v1::GptSpec* gpt = model->mutable_gpt();
      if (!gpt->has_layers()) gpt->set_layers(6);
      if (!gpt->has_heads()) gpt->set_heads(6);
      if (!gpt->has_width()) gpt->set_width(384);
      if (!gpt->has_context()) gpt->set_context(256);
      if (!gpt->has_vocab_size()) gpt->set_vocab_size(256);
      break;
    }
    case ModelSpec::KIND_NOT_SET:
      break;
  }
}

void DefaultData(uint64_t job_seed, DataSpec* data) {
  if (data->path().empty()) {
    if (data->dataset() == DataSpec::FASHION_MNIST) data->set_path(kFashionMnistDir);
    if (data->dataset() == DataSpec::TEXT) data->set_path(kKjvTextFile);
  }
  if (!data->has_batch_size()) data->set_batch_size(64);
  if (!data->has_seed()) data->set_seed(job_seed);
  if (!data->has_holdout_fraction()) {
    data->set_holdout_fraction(data->dataset() == DataSpec::TEXT ? 0.1 : 0.0);
  }
  if (data->dataset() == DataSpec::SYNTHETIC && !data->has_synthetic_samples()) {
    data->set_synthetic_samples(65536);
  }
}

void DefaultTraining(v1::TrainingSpec* training) {
  if (training->length_case() == v1::TrainingSpec::LENGTH_NOT_SET) training->set_epochs(1);
  if (!training->has_eval_interval_steps()) training->set_eval_interval_steps(0);
  if (!training->has_log_interval_steps()) training->set_log_interval_steps(10);
}

void DefaultOptimizer(OptimizerSpec* optimizer) {
  if (optimizer->type() == OptimizerSpec::TYPE_UNSPECIFIED)
    optimizer->set_type(OptimizerSpec::ADAMW);
  const OptimizerSpec::Type type = optimizer->type();
  const bool sgd = type == OptimizerSpec::SGD;
  const bool lars = type == OptimizerSpec::LARS;
  const bool adam_like = type == OptimizerSpec::ADAMW || type == OptimizerSpec::LAMB;
  if (!optimizer->has_lr()) optimizer->set_lr(sgd ? 0.01 : lars ? 0.1 : 0.001);
  if ((sgd || lars) && !optimizer->has_momentum()) optimizer->set_momentum(0.9);
  if (sgd && !optimizer->has_nesterov()) optimizer->set_nesterov(false);
  if (!optimizer->has_weight_decay()) optimizer->set_weight_decay(adam_like ? 0.01 : 0.0);
  if (adam_like && optimizer->betas_size() == 0) {
    optimizer->add_betas(0.9);
    optimizer->add_betas(0.999);
  }
  if (!sgd && !optimizer->has_eps()) {
    optimizer->set_eps(type == OptimizerSpec::ADAMW ? 1e-8 : lars ? 1e-9 : 1e-6);
  }
  if (lars && !optimizer->has_trust_coefficient()) optimizer->set_trust_coefficient(0.001);
  if (!optimizer->has_grad_clip_norm()) optimizer->set_grad_clip_norm(0.0);
}

void DefaultLrSchedule(LrScheduleSpec* schedule) {
  if (schedule->type() == LrScheduleSpec::TYPE_UNSPECIFIED)
    schedule->set_type(LrScheduleSpec::CONSTANT);
  if (!schedule->has_warmup_steps()) schedule->set_warmup_steps(0);
  if (schedule->type() == LrScheduleSpec::COSINE) {
    if (!schedule->has_decay_steps()) schedule->set_decay_steps(0);
    if (!schedule->has_min_lr()) schedule->set_min_lr(0.0);
  }
  if (schedule->type() == LrScheduleSpec::STEP && !schedule->has_gamma()) schedule->set_gamma(0.1);
  if (schedule->scaling_rule() == LrScheduleSpec::SCALING_RULE_UNSPECIFIED) {
    schedule->set_scaling_rule(LrScheduleSpec::NONE);
  }
}

void DefaultPrecision(PrecisionSpec* precision) {
  if (precision->compute() == PrecisionSpec::COMPUTE_UNSPECIFIED) {
    precision->set_compute(PrecisionSpec::FP32);
  }
  if (precision->compute() != PrecisionSpec::FP16) return;
  v1::LossScaleSpec* scale = precision->mutable_loss_scale();
  if (!scale->has_initial_scale()) scale->set_initial_scale(65536.0);
  if (!scale->has_growth_interval()) scale->set_growth_interval(2000);
  if (!scale->has_growth_factor()) scale->set_growth_factor(2.0);
  if (!scale->has_backoff_factor()) scale->set_backoff_factor(0.5);
  if (!scale->has_dynamic()) scale->set_dynamic(true);
}

// nodes, ranks_per_node, data and pipeline default from each other; invalid
// values (0, negative) are left for validation to report.
void DefaultLayout(JobSpec* spec) {
  v1::ResourceSpec* resources = spec->mutable_resources();
  v1::ParallelismSpec* parallelism = spec->mutable_parallelism();
  if (!resources->has_nodes()) resources->set_nodes(1);
  if (!parallelism->has_pipeline()) parallelism->set_pipeline(1);
  const int64_t nodes = resources->nodes();
  const int64_t pipeline = parallelism->pipeline();
  if (!resources->has_ranks_per_node()) {
    int64_t ranks_per_node = 1;
    if (nodes >= 1 && pipeline >= 1) {
      const int64_t data = parallelism->has_data() ? parallelism->data() : 1;
      const int64_t world = data * pipeline;
      if (world >= nodes && world % nodes == 0 && world / nodes <= INT32_MAX) {
        ranks_per_node = world / nodes;
      }
    }
    resources->set_ranks_per_node(static_cast<int32_t>(ranks_per_node));
  }
  if (!parallelism->has_data()) {
    const int64_t world = nodes * resources->ranks_per_node();
    const int64_t data = pipeline >= 1 ? world / pipeline : 1;
    parallelism->set_data(static_cast<int32_t>(std::clamp<int64_t>(data, 1, INT32_MAX)));
  }
  if (!parallelism->has_micro_batches()) {
    parallelism->set_micro_batches(static_cast<int32_t>(std::max<int64_t>(pipeline, 1)));
  }
  if (parallelism->schedule() == v1::ParallelismSpec::SCHEDULE_UNSPECIFIED) {
    parallelism->set_schedule(v1::ParallelismSpec::ONE_F_ONE_B);
  }
  if (!parallelism->has_bucket_size_mb()) parallelism->set_bucket_size_mb(25.0);
  if (!parallelism->has_zero1()) parallelism->set_zero1(false);
  if (parallelism->gradient_compression() ==
      v1::ParallelismSpec::GRADIENT_COMPRESSION_UNSPECIFIED) {
    parallelism->set_gradient_compression(v1::ParallelismSpec::NONE);
  }
  if (resources->device() == v1::ResourceSpec::DEVICE_UNSPECIFIED) {
    resources->set_device(v1::ResourceSpec::CUDA);
  }
  if (!resources->has_cpus_per_rank()) resources->set_cpus_per_rank(1);
}

void DefaultPolicies(JobSpec* spec) {
  v1::CheckpointPolicy* checkpoint = spec->mutable_checkpoint();
  if (!checkpoint->has_interval_steps() && !checkpoint->has_interval_seconds() && checkpoint->interval().empty()) {
    checkpoint->set_interval(kCheckpointIntervalAuto);
  }
  if (!checkpoint->has_keep()) checkpoint->set_keep(3);
  v1::RestartPolicy* restart = spec->mutable_restart();
  if (!restart->has_max_restarts()) restart->set_max_restarts(3);
  if (!restart->has_progress_timeout_seconds()) restart->set_progress_timeout_seconds(600);
  if (restart->has_elastic()) {
    v1::ElasticPolicy* elastic = restart->mutable_elastic();
    if (!elastic->has_min_nodes()) elastic->set_min_nodes(spec->resources().nodes());
    if (!elastic->has_max_nodes()) elastic->set_max_nodes(spec->resources().nodes());
  }
}

}  // namespace

void ApplyDefaults(JobSpec* spec) {
  if (!spec->has_seed()) spec->set_seed(0);
  if (!spec->has_program()) {  // a program job has none of the built-in trainer's sections
    DefaultModel(spec->mutable_model());
    DefaultData(spec->seed(), spec->mutable_data());
    DefaultTraining(spec->mutable_training());
    DefaultOptimizer(spec->mutable_optimizer());
    DefaultLrSchedule(spec->mutable_lr_schedule());
    DefaultPrecision(spec->mutable_precision());
  }
  DefaultLayout(spec);
  DefaultPolicies(spec);
}

int ModelBlockCount(const ModelSpec& model) {
  ModelSpec completed = model;
  DefaultModel(&completed);
  switch (completed.kind_case()) {
    case ModelSpec::kMlp:
      return completed.mlp().hidden_sizes_size() + 1;
    case ModelSpec::kCnn:
      return completed.cnn().channels_size() + completed.cnn().hidden_sizes_size() + 1;
    case ModelSpec::kGpt:
      return std::clamp(completed.gpt().layers(), 0, INT32_MAX - 2) + 2;
    case ModelSpec::KIND_NOT_SET:
      break;
  }
  return 0;
}

}  // namespace ringmaster
