#include "engine/parallel/pipeline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/parallel/pipeline_p2p.h"

namespace ringmaster::engine::parallel {
namespace {

absl::Status CheckPartition(const StagePartition& stages, int num_blocks, int group_size) {
  if (static_cast<int>(stages.size()) != group_size)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: ", stages.size(), " stages for a pipeline group of ",
                                                   group_size, " ranks"));
  int begin = 0;
  for (const StageRange& r : stages) {
    if (r.begin != begin || r.end <= r.begin)
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline: stages ", PartitionString(stages), " are not contiguous non-empty ranges"));
    begin = r.end;
  }
  if (begin != num_blocks)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: stages ", PartitionString(stages), " do not cover the ",
                                                   num_blocks, " blocks of the model"));
  return absl::OkStatus();
}

}  // namespace

// What one Step keeps between actions, by micro-batch.
struct PipelineStage::StepState {
  const Batch* batch = nullptr;
  int m = 1;
  float grad_scale = 1.0f;  // loss_scale / m, applied to dlogits
  uint64_t rng_key = 0;
  std::map<int, Tensor> received;  // activations received, until their Forward
  std::map<int, Tensor> outputs;   // forward outputs, until sent
  // Activations sent, until their gradient arrives (its shape; and the send
  // buffer stays alive until the peer has certainly received it).
  std::map<int, Tensor> sent;
  std::map<int, Tensor> grads;       // gradients received (or dlogits), until Backward
  std::map<int, Tensor> input_grads; // backward outputs, until sent
  std::vector<Tensor> sent_grads;    // send buffers, alive until the step ends
  Tensor loss_sum;                   // last stage: sum over micro-batches of loss_i / m
  int in_flight = 0;
  int peak_in_flight = 0;
};

PipelineStage::PipelineStage(nn::Model& model, dist::ProcessGroup& group, PipelineConfig config,
                             std::vector<Action> actions)
    : model_(model),
      group_(group),
      config_(std::move(config)),
      stage_(group.rank()),
      actions_(std::move(actions)),
      clock_(config_.clock != nullptr ? config_.clock : Clock::Real()),
      loss_(model.backend()) {}

PipelineStage::~PipelineStage() = default;

absl::StatusOr<std::unique_ptr<PipelineStage>> PipelineStage::Create(nn::Model& model, dist::ProcessGroup& group,
                                                                     PipelineConfig config) {
  RETURN_IF_ERROR(CheckPartition(config.stages, model.num_blocks(), group.size()));
  if (config.micro_batches < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline: micro-batches must be >= 1, got ", config.micro_batches));
  ASSIGN_OR_RETURN(std::vector<Action> actions,
                   BuildSchedule(config.schedule, group.rank(), group.size(), config.micro_batches));
  std::unique_ptr<PipelineStage> stage(new PipelineStage(model, group, std::move(config), std::move(actions)));
  RETURN_IF_ERROR(stage->SetUpTiedParameters());
  return stage;
}

absl::Status PipelineStage::SetUpTiedParameters() {
  // The stages that hold each parameter, in order of first appearance (the
  // same on every rank: every rank has the whole model and the partition).
  std::vector<std::pair<Parameter*, std::vector<int>>> holders;
  for (int s = 0; s < num_stages(); ++s) {
    for (Parameter* p : model_.Parameters(config_.stages[s].begin, config_.stages[s].end)) {
      auto it = std::find_if(holders.begin(), holders.end(), [p](const auto& h) { return h.first == p; });
      if (it == holders.end()) {
        holders.push_back({p, {s}});
      } else {
        it->second.push_back(s);
      }
    }
  }
  // One sub-group per distinct set of holders.
  std::vector<std::pair<std::vector<int>, ParameterList>> sets;
  for (auto& [param, stages] : holders) {
    if (stages.size() < 2) continue;
    auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& s) { return s.first == stages; });
    if (it == sets.end()) {
      sets.push_back({stages, {param}});
    } else {
      it->second.push_back(param);
    }
  }
  for (auto& [stages, params] : sets) {
    ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> sub,
                     group_.NewGroup(stages, absl::StrCat("tied[stages ", absl::StrJoin(stages, ","), "]")));
    if (sub == nullptr) continue;  // not a holder
    for (Parameter* p : params) RETURN_IF_ERROR(sub->Broadcast(p->value, 0));
    tied_.push_back({std::move(sub), params});
  }
  return absl::OkStatus();
}

ParameterList PipelineStage::TiedParameters() const {
  ParameterList out;
  for (const TiedGroup& t : tied_) out.insert(out.end(), t.params.begin(), t.params.end());
  return out;
}

absl::StatusOr<PipelineStepResult> PipelineStage::Step(const Batch& batch, const PipelineStepOptions& options) {
  const int m = config_.micro_batches;
  const Tensor& input = batch.tokens.defined() ? batch.tokens : batch.images;
  if (first() && !input.defined())
    return absl::InvalidArgumentError("pipeline: the first stage's batch has no images or tokens");
  if (last() && !batch.targets.defined())
    return absl::InvalidArgumentError("pipeline: the last stage's batch has no targets");
  for (const Tensor* t : {first() ? &input : nullptr, last() ? &batch.targets : nullptr}) {
    if (t != nullptr && (t->rank() == 0 || t->dim(0) % m != 0))
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", m, " micro-batches do not divide a batch of ",
                                                     t->rank() == 0 ? 0 : t->dim(0), " samples"));
  }
  if (first() && last() && input.dim(0) != batch.targets.dim(0))
    return absl::InvalidArgumentError("pipeline: the batch has different numbers of inputs and targets");

  Backend& backend = model_.backend();
  StepState state;
  state.batch = &batch;
  state.m = m;
  state.grad_scale = options.loss_scale / static_cast<float>(m);
  state.rng_key = options.rng_key;
  if (last()) state.loss_sum = backend.Zeros({1});

  PipelineStepResult result;
  const absl::Time start = clock_->Now();
  for (const Action& action : actions_) {
    const absl::Time t0 = clock_->Now();
    RETURN_IF_ERROR(RunAction(action, state));
    const double seconds = absl::ToDoubleSeconds(clock_->Now() - t0);
    const bool compute = action.type == ActionType::kForward || action.type == ActionType::kBackward;
    (compute ? result.compute_seconds : result.comm_seconds) += seconds;
  }
  const absl::Time t0 = clock_->Now();
  for (TiedGroup& tied : tied_) {
    for (Parameter* p : tied.params) RETURN_IF_ERROR(tied.group->AllReduce(p->grad, dist::ReduceOp::kSum));
  }
  Tensor loss = last() ? state.loss_sum : backend.Zeros({1});
  if (num_stages() > 1) RETURN_IF_ERROR(group_.Broadcast(loss, num_stages() - 1));
  result.loss = backend.ToHost(loss).ToVector()[0];
  const absl::Time end = clock_->Now();
  result.comm_seconds += absl::ToDoubleSeconds(end - t0);
  result.step_seconds = absl::ToDoubleSeconds(end - start);
  result.peak_in_flight = state.peak_in_flight;
  return result;
}

absl::Status PipelineStage::RunAction(const Action& action, StepState& state) {
  const int i = action.micro_batch;
  switch (action.type) {
    case ActionType::kRecvActivation: {
      ASSIGN_OR_RETURN(state.received[i], RecvActivation(group_, model_.backend(), stage_ - 1, i));
      return absl::OkStatus();
    }
    case ActionType::kForward: return Forward(i, state);
    case ActionType::kSendActivation: {
      auto it = state.outputs.find(i);
      if (it == state.outputs.end())
        return absl::InternalError(absl::StrCat("pipeline: no output of micro-batch ", i, " to send"));
      RETURN_IF_ERROR(SendActivation(group_, model_.backend(), it->second, stage_ + 1, i));
      state.sent[i] = std::move(it->second);
      state.outputs.erase(it);
      return absl::OkStatus();
    }
    case ActionType::kRecvGrad: {
      auto it = state.sent.find(i);
      if (it == state.sent.end())
        return absl::InternalError(absl::StrCat("pipeline: gradient of micro-batch ", i, " before its activation"));
      Tensor grad = model_.backend().Empty(it->second.shape(), it->second.dtype());
      state.sent.erase(it);
      RETURN_IF_ERROR(RecvGrad(group_, grad, stage_ + 1, i));
      state.grads[i] = std::move(grad);
      return absl::OkStatus();
    }
    case ActionType::kBackward: return Backward(i, state);
    case ActionType::kSendGrad: {
      auto it = state.input_grads.find(i);
      if (it == state.input_grads.end())
        return absl::InternalError(absl::StrCat("pipeline: no input gradient of micro-batch ", i, " to send"));
      RETURN_IF_ERROR(SendGrad(group_, it->second, stage_ - 1, i));
      state.sent_grads.push_back(std::move(it->second));
      state.input_grads.erase(it);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("pipeline: unknown action");
}

absl::Status PipelineStage::Forward(int i, StepState& state) {
  Backend& backend = model_.backend();
  auto on_device = [&](const Tensor& host) { return backend.device() == Device::kCpu ? host : backend.ToDevice(host); };
  Tensor x;
  if (first()) {
    const Tensor& input = state.batch->tokens.defined() ? state.batch->tokens : state.batch->images;
    const int64_t rows = input.dim(0) / state.m;
    x = nn::AsActivation(backend, on_device(input.Rows(i * rows, (i + 1) * rows)));
  } else {
    auto it = state.received.find(i);
    if (it == state.received.end())
      return absl::InternalError(absl::StrCat("pipeline: forward of micro-batch ", i, " before its input arrived"));
    x = std::move(it->second);
    state.received.erase(it);
  }
  const StageRange& r = range();
  const uint64_t key = state.rng_key * static_cast<uint64_t>(state.m) + static_cast<uint64_t>(i);
  for (int b = r.begin; b < r.end; ++b) model_.block(b).SetRngKey(key);
  state.peak_in_flight = std::max(state.peak_in_flight, ++state.in_flight);
  if (!last()) {
    ASSIGN_OR_RETURN(state.outputs[i], model_.Forward(x, /*training=*/true, r.begin, r.end, i));
    return absl::OkStatus();
  }
  // The last stage's blocks and the loss (fused with the GPT's classifier).
  const Tensor& targets = state.batch->targets;
  const int64_t rows = targets.dim(0) / state.m;
  ASSIGN_OR_RETURN(Tensor loss, loss_.ForwardModel(model_, x, on_device(targets.Rows(i * rows, (i + 1) * rows)),
                                                   /*training=*/true, state.grad_scale, r.begin, r.end, i));
  backend.Axpy(1.0f / static_cast<float>(state.m), loss, state.loss_sum);
  return absl::OkStatus();
}

absl::Status PipelineStage::Backward(int i, StepState& state) {
  Tensor dy;
  if (last()) {
    ASSIGN_OR_RETURN(dy, loss_.Backward(i));
  } else {
    auto it = state.grads.find(i);
    if (it == state.grads.end())
      return absl::InternalError(absl::StrCat("pipeline: backward of micro-batch ", i, " before its gradient"));
    dy = std::move(it->second);
    state.grads.erase(it);
  }
  ASSIGN_OR_RETURN(Tensor dx, model_.Backward(dy, range().begin, range().end, i));
  --state.in_flight;
  if (!first()) state.input_grads[i] = std::move(dx);
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::parallel
