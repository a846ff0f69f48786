#include "engine/optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/optim/update_rules.h"

namespace ringmaster::engine::optim {
namespace {

std::string TensorKind(const Tensor& t) { return absl::StrCat(DeviceName(t.device()), " ", DTypeName(t.dtype())); }

bool IsHostF32(const Tensor& t) { return t.defined() && t.device() == Device::kCpu && t.dtype() == DType::kF32; }
bool IsF32On(const Tensor& t, Device d) { return t.defined() && t.device() == d && t.dtype() == DType::kF32; }

absl::Status CheckConfig(const OptimizerConfig& c) {
  auto in_unit = [](double x) { return x >= 0.0f && x < 1.0f; };  // false for NaN
  if (!(std::isfinite(c.lr) && c.lr >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer lr must be finite and >= 0, got ", c.lr));
  }
  if (!(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer weight_decay must be finite and >= 0, got ", c.weight_decay));
  }
  const bool uses_momentum = c.kind == OptimizerKind::kSgd || c.kind == OptimizerKind::kLars;
  const bool uses_betas = c.kind == OptimizerKind::kAdamW || c.kind == OptimizerKind::kLamb;
  if (uses_momentum && !in_unit(c.momentum)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer momentum must be in [0, 1), got ", c.momentum));
  }
  if (c.nesterov && (c.kind != OptimizerKind::kSgd || c.momentum <= 0.0f)) {
    return absl::InvalidArgumentError("optimizer nesterov needs kind sgd and momentum > 0");
  }
  if (uses_betas && !in_unit(c.beta1)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer beta1 must be in [0, 1), got ", c.beta1));
  }
  if (uses_betas && !in_unit(c.beta2)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer beta2 must be in [0, 1), got ", c.beta2));
  }
  if (uses_betas && !(std::isfinite(c.eps) && c.eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer eps must be finite and > 0, got ", c.eps));
  }
  if (c.kind == OptimizerKind::kLars && !(std::isfinite(c.trust_coefficient) && c.trust_coefficient > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer trust_coefficient must be finite and > 0, got ", c.trust_coefficient));
  }
  return absl::OkStatus();
}

// Checks the parameters; they must all live on one device, returned in *device.
absl::Status CheckParams(const ParameterList& params, Device* device) {
  absl::flat_hash_set<std::string> names;
  *device = Device::kCpu;
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter* p = params[i];
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " is null"));
    if (p->name.empty()) return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " has an empty name"));
    if (!names.insert(p->name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate parameter name \"", p->name, "\""));
    }
    if (!p->value.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" has no value tensor"));
    }
    if (i == 0) *device = p->value.device();
    const char* where = *device == Device::kCpu ? "a host" : "a cuda";
    if (!IsF32On(p->value, *device)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" value must be ", where,
                                                     " f32 tensor like the first parameter's, got ",
                                                     TensorKind(p->value)));
    }
    if (!p->grad.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" has no grad tensor"));
    }
    if (!IsF32On(p->grad, *device)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" grad must be ", where,
                                                     " f32 tensor like its value, got ", TensorKind(p->grad)));
    }
    if (p->grad.shape() != p->value.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" grad has shape ",
                                                     ShapeString(p->grad.shape()), ", value has ",
                                                     ShapeString(p->value.shape())));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRanges(const ParameterList& params, const std::vector<ParamRange>& ranges) {
  if (ranges.size() != params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard has ", ranges.size(), " ranges for ", params.size(), " parameters"));
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ParamRange& r = ranges[i];
    const int64_t numel = params[i]->value.numel();
    if (r.offset < 0 || r.count < 0 || r.offset > numel || r.count > numel - r.offset) {
      return absl::InvalidArgumentError(absl::StrCat("shard range [", r.offset, ", +", r.count,
                                                     ") is outside parameter \"", params[i]->name, "\" of ", numel,
                                                     " elements"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kLars:
      return "lars";
    case OptimizerKind::kLamb:
      return "lamb";
  }
  return "unknown";
}

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kAdamW, OptimizerKind::kLars, OptimizerKind::kLamb}) {
    if (name == OptimizerKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", name, "\"; expected sgd, adamw, lars or lamb"));
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config,
                                                             const ParameterList& params,
                                                             DeviceZerosFn device_zeros) {
  RETURN_IF_ERROR(CheckConfig(config));
  Device device;
  RETURN_IF_ERROR(CheckParams(params, &device));
  ShardSpec whole;
  for (const Parameter* p : params) whole.ranges.push_back({0, p->value.numel()});
  if (device == Device::kCuda) {
    return CreateCudaUpdateRule(config, params, std::move(whole.ranges), nullptr, std::move(device_zeros));
  }
  return CreateUpdateRule(config, params, std::move(whole.ranges), nullptr);
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config, const ParameterList& params,
                                                             ShardSpec shard, DeviceZerosFn device_zeros) {
  RETURN_IF_ERROR(CheckConfig(config));
  Device device;
  RETURN_IF_ERROR(CheckParams(params, &device));
  RETURN_IF_ERROR(CheckRanges(params, shard.ranges));
  const bool needs_norms = config.kind == OptimizerKind::kLars || config.kind == OptimizerKind::kLamb;
  if (needs_norms && !shard.reduce_norms) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sharded ", OptimizerKindName(config.kind), " optimizer needs ShardSpec::reduce_norms"));
  }
  if (device == Device::kCuda) {
    return CreateCudaUpdateRule(config, params, std::move(shard.ranges), std::move(shard.reduce_norms),
                                std::move(device_zeros));
  }
  return CreateUpdateRule(config, params, std::move(shard.ranges), std::move(shard.reduce_norms));
}

Optimizer::Optimizer(const OptimizerConfig& config, const ParameterList& params, std::vector<ParamRange> ranges,
                     std::vector<std::string> slot_names, PartialSumReducer reduce_norms)
    : Optimizer(config, params, std::move(ranges), std::move(slot_names), std::move(reduce_norms), Device::kCpu,
                [](const Shape& shape) { return Tensor::Zeros(shape); }) {}

Optimizer::Optimizer(const OptimizerConfig& config, const ParameterList& params, std::vector<ParamRange> ranges,
                     std::vector<std::string> slot_names, PartialSumReducer reduce_norms, Device device,
                     const std::function<Tensor(const Shape&)>& zeros)
    : config_(config), slot_names_(std::move(slot_names)), reduce_norms_(std::move(reduce_norms)), device_(device) {
  entries_.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Entry e;
    e.param = params[i];
    e.offset = ranges[i].offset;
    e.count = ranges[i].count;
    if (e.count > 0) {
      for (size_t k = 0; k < slot_names_.size(); ++k) e.slots.push_back(zeros(StateShape(e)));
    }
    entries_.push_back(std::move(e));
  }
}

absl::Status Optimizer::Step(float lr, float grad_scale) {
  if (!(std::isfinite(lr) && lr >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be finite and >= 0, got ", lr));
  }
  if (!(std::isfinite(grad_scale) && grad_scale > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("grad_scale must be finite and > 0, got ", grad_scale));
  }
  for (const Entry& e : entries_) {
    // The layer owns the tensors and could have replaced them since Create.
    const Parameter& p = *e.param;
    if (!IsF32On(p.value, device_) || !IsF32On(p.grad, device_) || p.value.numel() < e.offset + e.count ||
        p.grad.numel() != p.value.numel()) {
      return absl::FailedPreconditionError(absl::StrCat("parameter \"", p.name, "\" no longer has ",
                                                        DeviceName(device_), " f32 value and grad of ",
                                                        e.offset + e.count, "+ elements"));
    }
  }
  RETURN_IF_ERROR(Update(lr, grad_scale, step_count_ + 1));
  ++step_count_;
  return absl::OkStatus();
}

void Optimizer::ZeroGrad() {
  for (const Entry& e : entries_) {
    const Tensor& g = e.param->grad;
    if (g.defined()) ZeroTensor(g);
  }
}

void Optimizer::ZeroTensor(const Tensor& t) { std::memset(t.raw(), 0, t.bytes()); }

void Optimizer::ExportSlot(const Tensor& slot, const Tensor& host_dst) const {
  std::memcpy(host_dst.raw(), slot.raw(), slot.bytes());
}

void Optimizer::ImportSlot(const Tensor& host_src, const Tensor& slot) {
  std::memmove(slot.raw(), host_src.raw(), slot.bytes());  // the source may be our own state
}

std::string Optimizer::StateName(size_t slot, const Entry& entry) const {
  return absl::StrCat(slot_names_[slot], ".", entry.param->name);
}

Shape Optimizer::StateShape(const Entry& entry) const {
  const Tensor& v = entry.param->value;
  if (entry.offset == 0 && entry.count == v.numel()) return v.shape();
  return {entry.count};
}

NamedTensors Optimizer::StateTensors() const {
  if (device_ == Device::kCpu) {
    NamedTensors out;
    for (const Entry& e : entries_) {
      for (size_t k = 0; k < e.slots.size(); ++k) out.emplace_back(StateName(k, e), e.slots[k]);
    }
    return out;
  }
  return CopyStateTensors([](const Tensor& slot) { return Tensor::Empty(slot.shape()); });
}

NamedTensors Optimizer::CopyStateTensors(const std::function<Tensor(const Tensor& slot)>& host_buffer) const {
  NamedTensors out;
  for (const Entry& e : entries_) {
    for (size_t k = 0; k < e.slots.size(); ++k) {
      Tensor host = host_buffer(e.slots[k]);
      ExportSlot(e.slots[k], host);
      out.emplace_back(StateName(k, e), std::move(host));
    }
  }
  return out;
}

absl::Status Optimizer::LoadState(const NamedTensors& tensors, int64_t step_count) {
  if (step_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer step count must be >= 0, got ", step_count));
  }
  absl::flat_hash_map<std::string, const Tensor*> expected;  // the names only: no copy of the state
  for (const Entry& e : entries_) {
    for (size_t k = 0; k < e.slots.size(); ++k) expected[StateName(k, e)] = nullptr;
  }
  // `found` maps each expected name to the tensor supplied for it.
  absl::flat_hash_map<std::string, const Tensor*> found;
  for (const auto& [name, tensor] : tensors) {
    if (!expected.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected optimizer state \"", name, "\""));
    }
    if (!found.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate optimizer state \"", name, "\""));
    }
    if (!IsHostF32(tensor)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer state \"", name, "\" must be a host f32 tensor, got ",
                                                     tensor.defined() ? TensorKind(tensor) : "undefined"));
    }
  }
  for (const Entry& e : entries_) {
    for (size_t k = 0; k < e.slots.size(); ++k) {
      const std::string name = StateName(k, e);
      auto it = found.find(name);
      if (it == found.end()) {
        return absl::InvalidArgumentError(absl::StrCat("missing optimizer state \"", name, "\""));
      }
      if (it->second->shape() != e.slots[k].shape()) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer state \"", name, "\" has shape ",
                                                       ShapeString(it->second->shape()), ", expected ",
                                                       ShapeString(e.slots[k].shape())));
      }
    }
  }
  // Everything checked: copy.
  for (Entry& e : entries_) {
    for (size_t k = 0; k < e.slots.size(); ++k) ImportSlot(*found.at(StateName(k, e)), e.slots[k]);
  }
  step_count_ = step_count;
  return absl::OkStatus();
}

size_t Optimizer::StateBytes() const {
  size_t bytes = 0;
  for (const Entry& e : entries_) {
    for (const Tensor& t : e.slots) bytes += t.bytes();
  }
  return bytes;
}

absl::Status Optimizer::ReduceNorms(std::vector<double>& partial) const {
  const size_t size = partial.size();
  if (reduce_norms_) {
    RETURN_IF_ERROR(reduce_norms_(partial));
    if (partial.size() != size) {
      return absl::InternalError(
          absl::StrCat("reduce_norms changed the vector size from ", size, " to ", partial.size()));
    }
  }
  for (double& x : partial) x = std::sqrt(x);
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::optim
