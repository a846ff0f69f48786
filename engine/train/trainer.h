#ifndef RINGMASTER_ENGINE_TRAIN_TRAINER_H_
#define RINGMASTER_ENGINE_TRAIN_TRAINER_H_

// Trainer: one rank's training loop. It owns the backend, the model, the
// optimizer, the loss scaler, the data loaders and the checkpointing of a job;
// Run() resumes from the newest good checkpoint (if any) and trains to the
// configured number of steps, evaluating and checkpointing on the way.
//
// Determinism: for a fixed config and thread count, the losses and weights of a
// run do not depend on where it was stopped and resumed (the data-loader
// position, optimizer and loss-scaler state, BatchNorm statistics and the
// dropout key, which is the step number, are all in the checkpoint).
//
// Distributed (options.world with more than one rank): the ranks form the
// spec's data x pipeline grid (engine/parallel/grid.h). Each rank trains its
// pipeline stage of its data-parallel replica: gradients are averaged over the
// replicas (bucketed and overlapped, or ZeRO-1 sharded), activations flow
// between stages, and every rank steps with the same loss scale and skip
// decision. Evaluation and checkpoints gather the whole model and the whole
// (unsharded) optimizer state on rank 0, which evaluates and writes; so a
// checkpoint does not depend on the layout that wrote it, and every rank
// resumes from it by taking its own part. Every rank calls Run() (or Step,
// Evaluate, SaveCheckpoint) together: they are collective.
//
// Not thread-safe: one thread drives it. Rank 0 writes and commits its
// checkpoints on a background thread of its own (CheckpointWriter), from a
// host snapshot, at most one at a time; Run never returns while one is in
// flight.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint_files.h"
#include "engine/core/backend.h"
#include "engine/data/data_loader.h"
#include "engine/data/dataset.h"
#include "engine/nn/loss.h"
#include "engine/nn/model.h"
#include "engine/optim/device_loss_scaler.h"
#include "engine/optim/loss_scaler.h"
#include "engine/optim/lr_schedule.h"
#include "engine/dist/process_group.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/step_scaler.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/grad_spread.h"
#include "engine/parallel/grid.h"
#include "engine/parallel/pipeline.h"
#include "engine/parallel/zero.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/train/checkpoint_schedule.h"
#include "engine/train/checkpoint_writer.h"
#include "engine/train/device_step.h"
#include "engine/train/step_graph_runner.h"
#include "engine/train/trainer_config.h"

namespace ringmaster::engine {

// What one optimizer step did.
struct StepReport {
  int64_t step = 0;         // 1-based: steps completed, this one included
  int64_t total_steps = 0;
  int64_t epoch = 0;
  // Mean training loss of the step's global batch. CUDA: read back only at
  // log intervals (and before evaluations): the mean over the steps since the
  // last read; the steps in between repeat the last value read.
  float loss = 0.0f;
  float lr = 0.0f;
  float loss_scale = 1.0f;  // the scale this step's backward used
  bool skipped = false;     // inf/NaN gradients: the update was skipped
  int64_t skipped_total = 0;
  double grad_norm = 0.0;   // global L2 norm of the (unscaled) gradients
  double seconds = 0.0;     // wall time of the step
  double comm_seconds = 0.0;  // time in gradient and pipeline communication
  double data_wait_seconds = 0;  // waiting for the input batch (the loader's queue was empty)
  double model_flops = 0;   // this rank's FLOPs in the step (forward and backward of its blocks)
  double peak_flops = 0;    // its device's dense peak FLOP/s for the precision; 0: unknown
  int64_t samples = 0;      // samples in the step (global batch)
  int64_t tokens = 0;       // tokens in the step (language models; else 0)
  // CUDA: bytes held by the caching device allocator now, and at its peak; else 0.
  int64_t device_memory_bytes = 0;
  int64_t device_memory_peak_bytes = 0;
  // The checkpoint interval in force in seconds (interval_seconds or auto);
  // 0 when it is in steps.
  double checkpoint_interval_seconds = 0;
};

struct EvalReport {
  int64_t step = 0;
  double loss = 0.0;      // mean cross-entropy over the evaluated samples
  double accuracy = -1;   // classifiers: fraction correct; language models: -1
  int64_t samples = 0;
};

// A checkpoint rank 0 wrote (TrainerOptions::on_checkpoint).
struct CheckpointReport {
  int64_t step = 0;
  std::string path;
  // Seconds the background writer took to write and fsync the files (not
  // the commit); the training thread did not wait for them.
  double write_seconds = 0;
  // Seconds the training thread was blocked for this checkpoint: the
  // gathers, the host snapshot and any wait for the previous checkpoint's
  // write and commit.
  double stall_seconds = 0;
};

// A job's training and held-out data sets.
struct TrainingData {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> eval;
};

// Loads the data sets config.data names (beneath config.data.root). Input
// that is missing or malformed is INVALID_ARGUMENT naming data.path (the
// job's mistake: no restart can fix it). Needs no world: a rank loads while
// it joins (TrainerOptions::preloaded_data).
absl::StatusOr<TrainingData> LoadTrainingData(const TrainerConfig& config);

struct TrainerOptions {
  // Where checkpoints are written and resumed from; empty: no checkpoints.
  std::string checkpoint_dir;
  // Set when a coordinator records the checkpoints (started by a worker):
  // resume from exactly this checkpoint, the newest one the coordinator
  // recorded as committed, after verifying it ("": start from step 0, even if
  // checkpoint_dir holds uncommitted ones); write with no local retention
  // (the coordinator's commit answer says what to prune). Unset: resume from
  // the newest good checkpoint of checkpoint_dir, keep checkpoint.keep.
  std::optional<std::string> resume_from;
  // resume_from's files as the coordinator recorded them at commit (name,
  // size, SHA-256: CheckpointInfo.shards[].files). Set: the resume is refused
  // (DATA_LOSS, on_resume_damaged) when a file differs from its record or
  // the manifest lists other files, whatever the manifest says. Unset: the
  // manifest alone vouches for the files.
  std::optional<std::vector<ManifestEntry>> resume_recorded_files;
  // The operator's checkpoint roots checkpoint_dir and resume_from lie
  // beneath (RankContext.checkpoint_roots): nothing below a root is followed
  // if it is a symbolic link (engine/checkpoint/checkpoint.h). Empty: each
  // directory is its own root (a rank started by hand).
  std::vector<std::string> checkpoint_roots;
  // Called (before Run fails with DATA_LOSS) when resume_from cannot be read
  // back: a file missing or not matching the manifest. E.g. tell the
  // coordinator, so that the next generation resumes from another checkpoint.
  std::function<void(const absl::Status&)> on_resume_damaged;
  // Called after every step and every evaluation (progress, metrics).
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalReport&)> on_eval;
  // Stop Run() after this many steps of this process (as a stop or crash
  // would), without the final evaluation; < 0: run to the end. For tests and
  // for time-boxed runs.
  int64_t max_steps_this_run = -1;
  // Language models: evaluate on at most this many held-out sequences.
  int64_t max_eval_sequences = 1024;
  // All the ranks of the job (not owned; must outlive the trainer). Null or
  // one rank: train in this process alone.
  dist::ProcessGroup* world = nullptr;
  // This rank's place in the data x pipeline grid, as its rank context says
  // (the coordinator assigned it; common/rank_layout.h). Distributed only.
  parallel::GridCoord coord;
  // Rank 0, after each checkpoint is written (e.g. commit it to the
  // coordinator). Called on the checkpoint writer's thread while training
  // goes on (async_checkpoints), one checkpoint at a time, in step order; an
  // error stops Run with it.
  std::function<absl::Status(const CheckpointReport&)> on_checkpoint;
  // Rank 0 writes and commits checkpoints in the background, from a host
  // snapshot, while training goes on (trainer_checkpoint.cc). false: the
  // training thread writes and commits each one itself (the synchronous
  // save the benchmark compares with).
  bool async_checkpoints = true;
  // Tests: called on the writer's thread before it writes a checkpoint (e.g.
  // blocked on a latch, to make a write slow).
  std::function<void(int64_t step)> before_checkpoint_write;
  // Checked after every step; true stops Run with CANCELLED (the coordinator
  // asked the job to stop).
  std::function<bool()> should_stop;
  // Asked every control_interval_steps steps, collectively (any rank's true
  // is every rank's, so they all write at the same step): true writes a
  // checkpoint at that step, once per process (the coordinator drains a
  // node of the job and moves it once the checkpoint is committed). Unset:
  // no collective. Every rank must set it, or none.
  std::function<bool()> checkpoint_requested;
  // Every this many steps the ranks agree (one all-reduce) on a requested
  // checkpoint and on a timed one (checkpoint.interval_seconds or auto: rank
  // 0's clock and stall decide).
  int64_t control_interval_steps = 10;
  // checkpoint.interval auto: the coordinator's failure estimate and bounds
  // (RankContext.auto_interval); unset: the defaults of
  // common/checkpoint_interval.h.
  v1::AutoIntervalInputs auto_interval;
  // LoadTrainingData(config) started earlier (e.g. while the rank joins its
  // world, which takes as long as the slowest rank's start); invalid: Create
  // loads the data itself.
  std::shared_future<absl::StatusOr<TrainingData>> preloaded_data;
  // Tests: makes the backend instead of CreateBackend(config) (e.g. a
  // Storage16Backend, which holds activations in 16 bits on the host).
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(const TrainerConfig&)> make_backend;
};

class Trainer {
 public:
  // Loads the data, builds the model and the optimizer. Errors name what is
  // wrong (a missing dataset file, an inconsistent config).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainerConfig& config, TrainerOptions options);
  ~Trainer();

  // Resumes from options.checkpoint_dir when it holds a good checkpoint, then
  // trains until total_steps(), evaluating every eval interval and at the end,
  // and checkpointing every checkpoint interval and at the end.
  absl::Status Run();
  // One step on the next batch of the training loader.
  absl::StatusOr<StepReport> Step();
  // Evaluates on the held-out data (no state changes). Distributed: collective;
  // rank 0 evaluates, the others return a report with samples == 0.
  absl::StatusOr<EvalReport> Evaluate();
  // Writes a checkpoint of the current step and returns its path (rank 0; the
  // others ""), synchronously, without on_checkpoint. Collective.
  absl::StatusOr<std::string> SaveCheckpoint();
  // Loads options.resume_from, else the newest good checkpoint of
  // options.checkpoint_dir; returns its step, or NOT_FOUND when there is none.
  absl::StatusOr<int64_t> Resume();

  int64_t step() const { return step_; }
  int rank() const { return distributed() ? world_->rank() : 0; }
  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return train_loader_->batches_per_epoch(); }
  const TrainerConfig& config() const { return config_; }
  nn::Model& model() { return *model_; }
  const optim::LossScaler& loss_scaler() const { return scaler_; }
  // CUDA: whether the steps now replay a captured graph (StepGraphRunner).
  bool step_graphed() const { return step_graphs_ != nullptr && step_graphs_->captured(); }
  // Seconds the training thread was blocked by the last checkpoint Run took
  // (rank 0: CheckpointReport::stall_seconds, and with async_checkpoints
  // false the commit too; the other ranks: the gathers); 0 before the first.
  double last_checkpoint_stall_seconds() const { return last_checkpoint_stall_seconds_; }
  // Whether the last checkpoint allocated its snapshot buffers (the first
  // one, or one whose shapes changed): its stall paid a one-time cost
  // (faulting in or pinning a checkpoint's worth of host memory) that the
  // next ones do not, so it does not choose the auto interval.
  bool last_checkpoint_allocated() const { return last_checkpoint_allocated_; }
  // When periodic checkpoints are due, and the interval in force with why.
  const CheckpointSchedule& checkpoint_schedule() const { return checkpoint_schedule_; }

 private:
  Trainer(const TrainerConfig& config, TrainerOptions options);
  absl::Status Init();
  // train_data_ and eval_data_: options.preloaded_data, else LoadTrainingData.
  absl::Status LoadData();
  // The data x pipeline layout for the world, and the BatchNorm ghost batch.
  absl::Status ResolveLayout();
  // Grid, pipeline stage, data parallelism and the optimizer (trainer_dist.cc).
  absl::Status SetUpParallelism();
  bool IsLanguageModel() const { return config_.model.kind == nn::ModelKind::kGpt; }
  bool distributed() const { return world_ != nullptr && world_->size() > 1; }
  bool EvalDue() const;
  // Whether the checkpoint interval calls for a checkpoint at this step.
  bool CheckpointDue() const;
  // Run's loop; Run waits for the checkpoint writer after it.
  absl::Status TrainLoop();
  // Run's checkpoint at this step (trainer_checkpoint.cc): snapshot, then
  // written and committed in the background (or here, synchronously);
  // `wait` also waits for its commit (a drain's, the final one).
  absl::Status TakeCheckpoint(bool wait);
  // The collective gathers, then (rank 0) a host snapshot of the state to
  // write: nothing in it is shared with the live tensors.
  // `copy` false: the live CPU tensors themselves (a synchronous save).
  absl::StatusOr<CheckpointContents> SnapshotCheckpoint(bool copy);
  // Writes `contents` of step `step` (rank 0); returns the path. Reads only
  // what Create set: safe on the writer's thread.
  absl::StatusOr<std::string> WriteSnapshot(int64_t step, const CheckpointContents& contents) const;
  // Writes, then calls on_checkpoint with `report` completed (the writer's
  // thread, or the training thread when `synchronous`).
  absl::Status WriteAndCommit(CheckpointReport report, const CheckpointContents& contents, bool synchronous) const;
  // rank_flops_per_step_ and peak_flops_, for the MFU the step reports carry.
  void SetUpFlopAccounting();
  // What the ranks agree on every control_interval_steps steps (one
  // collective): a checkpoint options.checkpoint_requested asked for (a
  // drain), and a timed one due by rank 0's schedule.
  struct ControlDecision {
    bool requested = false;
    bool timed = false;
  };
  absl::StatusOr<ControlDecision> ControlNow();
  // The step (trainer_step.cc). StepScaler over this rank's part of the
  // gradients (host or device); Spread says which part and over which groups.
  absl::Status InitStepScaler();
  parallel::GradSpread Spread();
  // Forward and backward of this rank's part of `batch`, gradients
  // accumulated with the loss scale folded in; the mean loss of the local
  // batch added to step_loss_.
  absl::Status ForwardBackward(const Batch& batch, float loss_scale, double* comm_seconds);
  // Averages the gradients over the data-parallel replicas.
  absl::Status ReduceGradients(double* comm_seconds);
  // What a CUDA graph captures: forward, backward, reduction, the scaler's
  // decision, the update, zeroing the grads.
  absl::Status StepBody(const Batch& batch, StepReport& report);
  // Whether this step reads the loss back (the host: always; CUDA: at log
  // intervals and before evaluations).
  bool LossReadDue() const;
  absl::Status OptimizerStep(float lr, float grad_scale);
  // The 16-bit operand copies of `params` from their values (Parameter::
  // operand_copy): after every change of the values (Init, Resume, each
  // optimizer step, GatherModel before an evaluation).
  void RefreshWeightOperands(const ParameterList& params);
  // Distributed: every stage's parameters and buffers on every rank of the
  // replica (for evaluation and checkpoints).
  absl::Status GatherModel();
  // The whole optimizer state (every stage, unsharded), named as an unsharded
  // optimizer over the whole model names it; complete on rank 0 (without
  // ZeRO-1 or a pipeline, whose collectives every rank joins, other ranks
  // return nothing: no copy to throw away). With `snapshot`, every tensor is
  // the caller's own copy, never the live state (the plain state copied
  // into snapshot(like) buffers); without, they may be the live state.
  using SnapshotBufferFn = std::function<Tensor(const Tensor& like)>;
  absl::StatusOr<optim::NamedTensors> GatherOptimizerState(const SnapshotBufferFn* snapshot = nullptr);
  // This rank's optimizer state taken from a whole (gathered) state.
  absl::Status LoadOptimizerState(const optim::NamedTensors& whole, int64_t step_count);
  int64_t OptimizerStepCount() const;
  // The optimizer this rank steps: ZeRO-1's over its shard, else the model's.
  optim::Optimizer& LocalOptimizer() const;
  // Zeroes the gradients (and ZeRO-1's shard of them) for the next step.
  void ZeroGradients();
  ParameterList TrainedParameters();

  // CUDA (trainer_device.cc): pinned staging, the choice of step graphs;
  // host copies of tensors for evaluation and checkpoints.
  bool on_device() const { return backend_->device() == Device::kCuda; }
  absl::Status InitDevice();
  // The batch on the backend's device (CUDA: through pinned staging_).
  absl::StatusOr<Batch> ToBackend(const Batch& batch);
  optim::DeviceZerosFn DeviceZeros();
  Tensor HostCopy(const Tensor& t);
  // Snapshot buffer `slot`: host memory of like's shape and dtype, reused
  // from one checkpoint to the next (only while no write of the previous
  // snapshot is in flight); page-locked on a device (PinnedHostTensor, or
  // pageable when that fails).
  Tensor SnapshotBuffer(const Tensor& like, size_t slot);
  // A host copy of `t` in snapshot buffer `slot`.
  Tensor SnapshotCopy(const Tensor& t, size_t slot);
  void CopyIntoLive(const Tensor& host, const Tensor& live);

  TrainerConfig config_;
  TrainerOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::optional<optim::LrSchedule> schedule_;
  // The step's control (step_scaler.h); scaler_ mirrors its state after
  // every step (reports, checkpoints). CUDA: its control block.
  std::unique_ptr<optim::StepScaler> step_scaler_;
  optim::LossScaler scaler_ = optim::LossScaler::Disabled();
  const kernels::DeviceStepControl* device_control_ = nullptr;
  // The training loss summed on the backend's device since it was last read,
  // and how many steps' losses that is.
  Tensor step_loss_;
  int64_t losses_since_read_ = 0;
  float last_loss_ = 0.0f;
  // CUDA: pinned host staging of batches; the step's graphs (null: eager).
  std::unique_ptr<HostStaging> staging_;
  std::unique_ptr<StepGraphRunner> step_graphs_;
  std::shared_ptr<const Dataset> train_data_;
  std::shared_ptr<const Dataset> eval_data_;
  std::unique_ptr<DataLoader> train_loader_;
  dist::ProcessGroup* world_ = nullptr;
  std::unique_ptr<parallel::Grid> grid_;
  std::unique_ptr<parallel::PipelineStage> pipeline_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
  parallel::StagePartition stages_;  // empty without a pipeline
  double rank_flops_per_step_ = 0;    // this rank's blocks, forward and backward (engine/plan)
  double peak_flops_ = 0;             // its device's dense peak; 0: unknown
  int64_t step_ = 0;
  int64_t total_steps_ = 0;
  Tensor control_flag_;             // two f32 on the backend: the request and the timed due, summed
  CheckpointSchedule checkpoint_schedule_;  // periodic checkpoints (Init, from the config)
  bool checkpoint_request_done_ = false;
  double last_checkpoint_stall_seconds_ = 0;
  bool last_checkpoint_allocated_ = false;
  // Rank 0: the host memory of the last snapshot (checkpoint-sized), reused.
  std::vector<Tensor> snapshot_buffers_;
  bool pinned_snapshot_failed_ = false;  // warned once: the rest stay pageable
  // Rank 0 with async_checkpoints: the background writer. Last, so that it
  // is destroyed (waiting for its write) before what the write uses.
  std::unique_ptr<CheckpointWriter> writer_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_TRAINER_H_
