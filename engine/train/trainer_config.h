#ifndef RINGMASTER_ENGINE_TRAIN_TRAINER_CONFIG_H_
#define RINGMASTER_ENGINE_TRAIN_TRAINER_CONFIG_H_

// The trainer's typed configuration, and its mapping from a (defaulted,
// validated) ringmaster.v1.JobSpec. The engine libraries never see the proto:
// this file is the one place that reads it.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/dtype.h"
#include "engine/nn/model_factory.h"
#include "engine/optim/loss_scaler.h"
#include "engine/optim/lr_schedule.h"
#include "engine/optim/optimizer_config.h"
#include "engine/parallel/bucket.h"
#include "engine/parallel/schedule.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::engine {

enum class DatasetKind { kFashionMnist, kText, kSynthetic };

struct DataConfig {
  DatasetKind kind = DatasetKind::kFashionMnist;
  std::string path;           // Fashion-MNIST directory or text file
  // The worker's data root `path` lies beneath (RankContext.data_root): its
  // files are opened beneath it, never through a link out of it
  // (engine/data/data_file.h). Empty: opened as given (a rank started by hand).
  std::string root;
  int64_t global_batch = 64;  // samples per optimizer step, all ranks together
  uint64_t seed = 0;          // shuffling
  double holdout_fraction = 0.0;
  int64_t synthetic_samples = 65536;
};

// The data x pipeline layout of the job (ParallelismSpec).
struct ParallelConfig {
  int data = 1;           // D: data-parallel replicas
  int pipeline = 1;       // P: pipeline stages per replica
  int micro_batches = 1;  // m: per replica and step (pipelining, or accumulation when P = 1)
  parallel::ScheduleKind schedule = parallel::ScheduleKind::kOneFOneB;
  std::vector<int> stage_boundaries;  // empty: balanced by cost
  int64_t bucket_bytes = 25 * 1024 * 1024;
  parallel::GradCompression compression = parallel::GradCompression::kNone;
  bool zero1 = false;
};

// CUDA graphs of the training step (step_graph_runner.h). kAuto: on for one rank
// on CUDA (no pipeline, no ZeRO-1, one micro-batch, no dropout) whose model has
// at most kCudaGraphAutoMaxParameters parameters, where kernel launches are a
// large part of the step; kOn: the same jobs, any model size (an error names
// what rules a graph out); kOff: eager steps. A failed capture falls back to
// eager steps with a logged warning.
enum class CudaGraphMode { kAuto, kOn, kOff };
constexpr int64_t kCudaGraphAutoMaxParameters = 32 * 1000 * 1000;
// "auto" (or ""), "on", "off"; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(absl::string_view value, absl::string_view field);

struct TrainerConfig {
  std::string name;
  nn::ModelConfig model;
  DataConfig data;
  optim::OptimizerConfig optimizer;
  float grad_clip_norm = 0.0f;  // 0: no clipping
  // base_lr is the peak learning rate after the batch-scaling rule.
  optim::LrScheduleConfig schedule;
  optim::LossScalerConfig loss_scaler;
  DType compute_dtype = DType::kF32;
  ParallelConfig parallel;
  // Exactly one is > 0: a fixed number of optimizer steps, or of epochs
  // (converted to steps once the dataset size is known).
  int64_t steps = 0;
  int64_t epochs = 0;
  int64_t eval_interval_steps = 0;  // 0: at the end of every epoch
  int64_t log_interval_steps = 50;
  int64_t checkpoint_interval_steps = 0;  // 0: only at the end
  // checkpoint.interval_seconds (> 0), or interval auto (the Young-Daly
  // interval: TrainerOptions::auto_interval); either replaces the steps.
  double checkpoint_interval_seconds = 0;
  bool checkpoint_interval_auto = false;
  int checkpoint_keep = 3;
  int threads = 0;  // CPU backend threads; 0: all cores  // Where the rank trains: the CPU backend, or one CUDA device (resources.device).
  Device device = Device::kCpu;
  // CUDA: the device ordinal among the visible ones (trainer_main: 0 when the
  // worker pins one GPU through CUDA_VISIBLE_DEVICES, else the local rank).
  int device_index = 0;
  // CUDA: fp32 GEMMs and convolutions on TF32 tensor cores (precision.compute TF32).
  bool tf32 = false;
  CudaGraphMode cuda_graphs = CudaGraphMode::kAuto;
};

// Whether a CUDA job's steps run in graphs under config.cuda_graphs, for
// `ranks` ranks and a model of `parameters` trained parameters (the rule at
// CudaGraphMode); INVALID_ARGUMENT naming resources.cuda_graphs for "on" with
// what rules graphs out.
absl::StatusOr<bool> UseCudaGraphs(const TrainerConfig& config, int ranks, int64_t parameters);

// Maps a job spec (ApplyDefaults'd and ValidateJobSpec'd) onto the trainer's
// configuration. INVALID_ARGUMENT names the field for what the engine cannot do
// (e.g. a CNN with other than two conv stages).
absl::StatusOr<TrainerConfig> TrainerConfigFromSpec(const v1::JobSpec& spec);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_TRAINER_CONFIG_H_
