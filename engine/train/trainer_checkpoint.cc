// Trainer: writing and resuming checkpoints.
//
// model.safetensors holds the parameters and buffers under their PyTorch
// names; optimizer.safetensors the optimizer's state tensors, unsharded and
// named as an optimizer over the whole model names them; state.json the
// step, the optimizer's step count, the loss scaler and the data-loader
// position. Distributed, rank 0 gathers all of it and writes; every rank
// resumes by reading the checkpoint and taking its own part, so a checkpoint
// does not depend on the data x pipeline layout that wrote it.
//
// Checkpoints do not stop training (Run, TakeCheckpoint): every rank takes
// part in the gathers, then rank 0 snapshots what it writes (CPU: a copy of
// each tensor; CUDA: a copy in pageable host memory, ToHost) and hands the
// snapshot to its one background writer (CheckpointWriter), which writes,
// fsyncs and commits (on_checkpoint) while the next steps run. The files are
// byte for byte what a synchronous save of that step writes, through the same
// WriteCheckpoint (its commit protocol and crash safety unchanged). At most
// one checkpoint is in flight: the next waits for the previous one's write
// and commit. A drain's checkpoint and the final one wait for their own
// commit; Run never returns while a write is in flight. A failed write or
// commit fails Run at the next step (or checkpoint, or the end) with its
// error. The training stall (gathers, snapshot, any wait for the previous
// one) is measured and sent with the commit (CheckpointReport). A
// synchronous SaveCheckpoint (and async_checkpoints false) writes the live
// CPU tensors without a copy: the write ends before the next step changes
// them.
// A parameter padded with rows of its own (Parameter::real_rows: the GPT's
// vocabulary) is written with its real rows alone, and so is its optimizer
// state: the checkpoint has PyTorch's shapes; resuming pads them again.
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/train/state_dump.h"
#include "engine/train/trainer.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

absl::StatusOr<int64_t> StateInt(const StateMap& state, const std::string& key, const std::string& path) {
  auto it = state.find(key);
  int64_t value = 0;
  if (it == state.end() || !absl::SimpleAtoi(it->second, &value)) {
    return absl::DataLossError(absl::StrCat(path, ": state.json has no integer \"", key, "\""));
  }
  return value;
}

absl::StatusOr<float> StateFloat(const StateMap& state, const std::string& key, const std::string& path) {
  auto it = state.find(key);
  float value = 0;
  if (it == state.end() || !absl::SimpleAtof(it->second, &value)) {
    return absl::DataLossError(absl::StrCat(path, ": state.json has no number \"", key, "\""));
  }
  return value;
}

// The parameter whose state tensor `name` ("<slot>.<parameter name>") is, or null.
const Parameter* StateOwner(const ParameterList& params, const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return nullptr;
  for (const Parameter* p : params)
    if (name.compare(dot + 1, std::string::npos, p->name) == 0) return p;
  return nullptr;
}

// A host copy of a padded parameter's state tensor grown back to its padded
// shape (zero rows appended); `t` itself for any other tensor.
Tensor Unpadded(const Parameter* p, const Tensor& t) {
  if (p == nullptr || p->real_rows < 0 || t.rank() == 0 || t.dim(0) != p->real_rows) return t;
  Tensor padded = Tensor::Zeros(p->value.shape(), t.dtype());
  std::memcpy(padded.raw(), t.raw(), t.bytes());
  return padded;
}

// OK when the saved tensor `src` can replace the live tensor `dst`.
absl::Status CheckSameLayout(const std::string& name, const Tensor& src, const Tensor& dst, const std::string& path) {
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor \"", name, "\" is ", ShapeString(src.shape()),
                                                   " ", DTypeName(src.dtype()), ", the model expects ",
                                                   ShapeString(dst.shape()), " ", DTypeName(dst.dtype())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointContents> Trainer::SnapshotCheckpoint(bool copy) {
  RETURN_IF_ERROR(GatherModel());
  CheckpointContents contents;
  // A copy goes into the snapshot buffers: the optimizer state first, then
  // the model (on a device the gathered model is a host copy already, on the
  // CPU it is the live tensors).
  size_t slot = 0;
  const SnapshotBufferFn buffer = [&](const Tensor& like) { return SnapshotBuffer(like, slot++); };
  ASSIGN_OR_RETURN(contents.optimizer, GatherOptimizerState(copy && rank() == 0 ? &buffer : nullptr));
  if (rank() != 0) return contents;
  auto host = [&](const Tensor& t) { return copy ? SnapshotCopy(t, slot++) : HostCopy(t); };
  const ParameterList params = model_->Parameters();
  for (Parameter* p : params) contents.model.emplace_back(p->name, host(RealRows(*p, p->value)));
  for (Buffer* b : model_->Buffers()) contents.model.emplace_back(b->name, host(b->value));
  for (auto& [name, t] : contents.optimizer) {
    const Parameter* owner = StateOwner(params, name);
    if (owner != nullptr && owner->real_rows >= 0 && t.shape() == owner->value.shape()) t = t.Rows(0, owner->real_rows);
  }
  optim::LossScalerState scaler = scaler_.State();
  contents.state = {
      {"job", config_.name},
      {"step", absl::StrCat(step_)},
      {"optimizer_step", absl::StrCat(OptimizerStepCount())},
      {"loss_scale", absl::StrCat(scaler.scale)},
      {"loss_scale_clean_steps", absl::StrCat(scaler.clean_steps)},
      {"skipped_steps", absl::StrCat(scaler.skipped_steps)},
      {"data_loader", train_loader_->State().Encode()},
  };
  return contents;
}

absl::StatusOr<std::string> Trainer::WriteSnapshot(int64_t step, const CheckpointContents& contents) const {
  const int keep = options_.resume_from.has_value() ? 0 : config_.checkpoint_keep;
  ASSIGN_OR_RETURN(std::string root, CheckpointRootFor(options_.checkpoint_dir, options_.checkpoint_roots));
  return WriteCheckpoint(options_.checkpoint_dir, step, contents, keep, root);
}

absl::StatusOr<std::string> Trainer::SaveCheckpoint() {
  ASSIGN_OR_RETURN(CheckpointContents contents, SnapshotCheckpoint(/*copy=*/false));
  if (rank() != 0) return std::string();
  ASSIGN_OR_RETURN(std::string path, WriteSnapshot(step_, contents));
  spdlog::info("checkpoint step {} written to {}", step_, path);
  return path;
}

absl::Status Trainer::WriteAndCommit(CheckpointReport report, const CheckpointContents& contents,
                                     bool synchronous) const {
  if (options_.before_checkpoint_write) options_.before_checkpoint_write(report.step);
  const absl::Time began = absl::Now();
  ASSIGN_OR_RETURN(report.path, WriteSnapshot(report.step, contents));
  report.write_seconds = absl::ToDoubleSeconds(absl::Now() - began);
  // Synchronous: training waited for the write too (the commit, made inside
  // on_checkpoint, cannot count itself).
  if (synchronous) report.stall_seconds += report.write_seconds;
  spdlog::info("checkpoint step {} written to {} ({:.3f} s writing, {:.3f} s training stall)", report.step,
               report.path, report.write_seconds, report.stall_seconds);
  if (options_.on_checkpoint) RETURN_IF_ERROR(options_.on_checkpoint(report));
  return absl::OkStatus();
}

absl::Status Trainer::TakeCheckpoint(bool wait) {
  ScopedTrainingPhase phase("checkpoint snapshot");
  const absl::Time began = absl::Now();
  const bool async = options_.async_checkpoints && rank() == 0;
  last_checkpoint_allocated_ = false;  // SnapshotBuffer sets it
  if (async && writer_ == nullptr) writer_ = std::make_unique<CheckpointWriter>();
  // The newer checkpoint waits for the older one's write and commit.
  if (async) RETURN_IF_ERROR(writer_->Wait());
  ASSIGN_OR_RETURN(CheckpointContents contents, SnapshotCheckpoint(/*copy=*/async));
  last_checkpoint_stall_seconds_ = absl::ToDoubleSeconds(absl::Now() - began);  // the other ranks: the gathers
  if (rank() != 0) return absl::OkStatus();
  CheckpointReport report;
  report.step = step_;
  report.stall_seconds = last_checkpoint_stall_seconds_;
  if (!async) {
    ScopedTrainingPhase writing("checkpoint save and commit");
    RETURN_IF_ERROR(WriteAndCommit(report, contents, /*synchronous=*/true));
    last_checkpoint_stall_seconds_ = absl::ToDoubleSeconds(absl::Now() - began);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(writer_->Start([this, report, contents = std::move(contents)] {
    return WriteAndCommit(report, contents, /*synchronous=*/false);
  }));
  if (wait) {
    ScopedTrainingPhase committing("checkpoint commit (waited for)");
    RETURN_IF_ERROR(writer_->Wait());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Trainer::Resume() {
  LoadedCheckpoint loaded;
  if (!options_.resume_from.has_value()) {
    ASSIGN_OR_RETURN(std::string root, CheckpointRootFor(options_.checkpoint_dir, options_.checkpoint_roots));
    ASSIGN_OR_RETURN(loaded, LoadNewestCheckpoint(options_.checkpoint_dir, root));
  } else if (options_.resume_from->empty()) {
    return absl::NotFoundError("the coordinator has no committed checkpoint of this job");
  } else {
    // Verified against its manifest and the coordinator's record of its
    // files, read beneath its root without following a link; a damaged,
    // altered or missing committed checkpoint is DATA_LOSS (never NOT_FOUND,
    // which would start from step 0) and is never silently replaced by
    // another.
    const std::vector<ManifestEntry>* recorded =
        options_.resume_recorded_files.has_value() ? &*options_.resume_recorded_files : nullptr;
    absl::StatusOr<std::string> root = CheckpointRootFor(*options_.resume_from, options_.checkpoint_roots);
    absl::StatusOr<LoadedCheckpoint> committed =
        root.ok() ? LoadCheckpoint(*options_.resume_from, *root, recorded) : root.status();
    if (!committed.ok()) {
      absl::Status damaged = absl::DataLossError(
          absl::StrCat("the committed checkpoint cannot be resumed from: ", committed.status().message()));
      if (options_.on_resume_damaged) options_.on_resume_damaged(damaged);
      return damaged;
    }
    loaded = *std::move(committed);
  }
  for (const std::string& skipped : loaded.skipped) spdlog::warn("skipped damaged checkpoint {}", skipped);
  const std::string& path = loaded.path;
  const StateMap& state = loaded.contents.state;

  // Check everything first, then change the live state.
  std::map<std::string, Tensor> saved(loaded.contents.model.begin(), loaded.contents.model.end());
  std::vector<std::pair<std::string, Tensor>> live;
  const ParameterList params = model_->Parameters();
  for (Parameter* p : params) live.emplace_back(p->name, RealRows(*p, p->value));
  for (Buffer* b : model_->Buffers()) live.emplace_back(b->name, b->value);
  if (saved.size() != live.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the checkpoint holds ", saved.size(),
                                                   " model tensors, the model has ", live.size()));
  }
  for (const auto& [name, tensor] : live) {
    auto it = saved.find(name);
    if (it == saved.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no tensor \"", name, "\" in the checkpoint"));
    }
    RETURN_IF_ERROR(CheckSameLayout(name, it->second, tensor, path));
  }
  ASSIGN_OR_RETURN(int64_t step, StateInt(state, "step", path));
  ASSIGN_OR_RETURN(int64_t optimizer_step, StateInt(state, "optimizer_step", path));
  optim::LossScalerState scaler;
  ASSIGN_OR_RETURN(scaler.scale, StateFloat(state, "loss_scale", path));
  ASSIGN_OR_RETURN(scaler.clean_steps, StateInt(state, "loss_scale_clean_steps", path));
  ASSIGN_OR_RETURN(scaler.skipped_steps, StateInt(state, "skipped_steps", path));
  auto loader_it = state.find("data_loader");
  if (loader_it == state.end()) return absl::DataLossError(absl::StrCat(path, ": state.json has no data_loader"));
  ASSIGN_OR_RETURN(LoaderState loader, LoaderState::Decode(loader_it->second));

  // The optimizer and the scaler check their state before changing anything;
  // the loader's position is checked here, so that Restore cannot fail.
  if (loader.batch < 0 || loader.batch >= train_loader_->batches_per_epoch()) {
    return absl::DataLossError(absl::StrCat(path, ": data loader position \"", loader.Encode(),
                                            "\" is outside this dataset's ", train_loader_->batches_per_epoch(),
                                            " batches per epoch"));
  }
  optim::NamedTensors optimizer_state;
  for (const auto& [name, t] : loaded.contents.optimizer)
    optimizer_state.emplace_back(name, Unpadded(StateOwner(params, name), t));
  RETURN_IF_ERROR(LoadOptimizerState(optimizer_state, optimizer_step));
  RETURN_IF_ERROR(scaler_.LoadState(scaler));
  RETURN_IF_ERROR(step_scaler_->LoadState(scaler, optimizer_step));
  RETURN_IF_ERROR(train_loader_->Restore(loader));
  for (const auto& [name, tensor] : live) CopyIntoLive(saved[name], tensor);
  RefreshWeightOperands(model_->Parameters());
  step_ = step;
  return step;
}

}  // namespace ringmaster::engine
