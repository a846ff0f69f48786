#ifndef RINGMASTER_ENGINE_OPTIM_OPTIMIZER_H_
#define RINGMASTER_ENGINE_OPTIM_OPTIMIZER_H_

// Optimizers over fp32 parameters: SGD (momentum, Nesterov, L2 weight decay),
// AdamW, LARS and LAMB, with the update formulas of cpu_update.h.
//
// Host parameters are updated by cpu_update.h. CUDA parameters (all of them on
// the device; a build with CUDA) are updated by the fused multi-tensor kernels
// of engine/kernels/optim_update.h, one launch per step for SGD/AdamW, with
// the optimizer state on the device; StateTensors() then returns host copies
// and LoadState() copies to the device. See DeviceStepOptions for the loss
// scaler's device-side skip. On the device, sharded (ZeRO-1) LARS/LAMB is not
// supported (FAILED_PRECONDITION at Create).
//
// An Optimizer owns its state (momentum buffers, Adam moments, the step count)
// and updates the parameters of a ParameterList it does not own; the
// parameters must outlive it. It may own only a slice of each parameter (a
// ZeRO-1 shard, see ShardSpec): then it keeps state for, and writes, only those
// elements. Not thread-safe: one training thread calls it.
//
// Typical step, with the loss scaler and clipping folded into grad_scale:
//   float grad_scale = scaler.inverse_scale();           // before scaler.Update
//   ASSIGN_OR_RETURN(bool overflow, HasNonFiniteGrad(params));
//   if (!scaler.Update(overflow)) {                       // false: not skipped
//     ASSIGN_OR_RETURN(double norm, GlobalGradNorm(params, grad_scale));
//     RETURN_IF_ERROR(opt->Step(schedule.LearningRate(opt->step_count()),
//                               grad_scale * ClipCoefficient(norm, max_norm)));
//   }
//   opt->ZeroGrad();

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/parameter.h"
#include "engine/core/tensor.h"
#include "engine/optim/optimizer_config.h"

namespace ringmaster::kernels {
struct DeviceStepControl;  // engine/kernels/loss_scale.h
}  // namespace ringmaster::kernels

namespace ringmaster::engine::optim {

const char* OptimizerKindName(OptimizerKind kind);  // "sgd", "adamw", "lars", "lamb"
// Parses "sgd" | "adamw" | "lars" | "lamb"; INVALID_ARGUMENT otherwise.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Elements [offset, offset + count) of a parameter's flattened value.
struct ParamRange {
  int64_t offset = 0;
  int64_t count = 0;
};

// Sums `partial` element-wise over every rank that holds a shard of the same
// parameters (an allreduce-sum of fp64 values), in place. Every rank must call
// it with a vector of the same length, even a rank holding none of a parameter.
using PartialSumReducer = std::function<absl::Status(std::vector<double>& partial)>;

// A ZeRO-1 shard: this optimizer owns ranges[i] of params[i] (count may be 0).
//
// LARS and LAMB need whole-parameter norms. Each Step of a sharded LARS/LAMB
// optimizer computes, over its own elements, a vector of 2 * params.size()
// partial sums of squares: [2i] = sum w^2 and [2i+1] = sum g^2 (LARS, the true
// gradient) or sum u^2 (LAMB, the update direction) for parameter i (zero where
// the parameter is excluded from decay or not held here), calls `reduce_norms`
// once, and takes the square roots of the reduced sums. Nothing is written
// before the reduction, so a reducer error leaves parameters and state as they
// were. SGD and AdamW never call it.
struct ShardSpec {
  std::vector<ParamRange> ranges;
  PartialSumReducer reduce_norms;
};

// Zeroed f32 device tensors of a shape for the state of CUDA parameters; the
// trainer passes its backend's Zeros, so that the state comes from the caching
// allocator and counts in its statistics (and the memory reported). Null: a
// cudaMalloc per tensor, outside any allocator's books.
using DeviceZerosFn = std::function<Tensor(const Shape&)>;

// How CUDA parameters are stepped (ignored for host parameters).
struct DeviceStepOptions {
  // The cudaStream_t the update kernels are enqueued on (the backend's compute
  // stream, so they follow backward without a host synchronisation).
  void* stream = nullptr;
  // Optional (device memory): when set, the kernels multiply grad_scale by
  // control->grad_scale and write nothing when control->skip is set. Whether
  // a Step applied is then known only on the device: Step still counts it,
  // and the caller corrects the count with SetStepCount from
  // control->optimizer_steps once it has read the control block back.
  const kernels::DeviceStepControl* control = nullptr;
};

class Optimizer {
 public:
  // Checks the config and the parameters (unique names; f32 values with
  // grads of the same shape, all on the host or all on CUDA) and returns the
  // optimizer for config.kind. INVALID_ARGUMENT names the offending field or
  // parameter; FAILED_PRECONDITION for CUDA parameters in a build without CUDA.
  // `device_zeros`: see DeviceZerosFn (used for CUDA parameters only).
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config, const ParameterList& params,
                                                           DeviceZerosFn device_zeros = nullptr);
  // The same over a shard: ranges.size() == params.size(), each range within
  // its parameter; reduce_norms is required for LARS and LAMB.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config, const ParameterList& params,
                                                           ShardSpec shard, DeviceZerosFn device_zeros = nullptr);

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every owned element with learning rate `lr` (>= 0, finite),
  // reading grads as grad_scale * grad (grad_scale > 0, finite: the inverse
  // loss scale times any clipping coefficient). Increments step_count() on
  // success. INVALID_ARGUMENT (nothing changed) for a bad lr or grad_scale; a
  // reducer error is returned as is (nothing changed).
  absl::Status Step(float lr, float grad_scale);

  // Sets every gradient of every parameter in the list to zero (whole
  // tensors, also outside a shard: the grads are full on every rank).
  void ZeroGrad();

  // CUDA parameters: where and how Step enqueues its kernels.
  void SetDeviceStep(const DeviceStepOptions& options) { device_step_ = options; }
  // CUDA parameters with a DeviceStepControl: the number of updates the device
  // applied (control->optimizer_steps), read back by the caller.
  void SetStepCount(int64_t step_count) { step_count_ = step_count; }
  // Where the parameters (and the state) live.
  Device device() const { return device_; }

  // The state tensors, named "<slot>.<parameter name>", slot "momentum_buffer"
  // (SGD, LARS; none when momentum == 0) or "exp_avg" and "exp_avg_sq" (AdamW,
  // LAMB), in parameter order. Shape: the parameter's shape, or [count] for a
  // partial shard; parameters with no elements here have no entries. The
  // tensors share storage with the live state: copy them before the next Step
  // if they must stay as they are.
  NamedTensors StateTensors() const;
  // The same names and shapes, each copied into host_buffer(slot): a host f32
  // tensor of the slot's shape the caller owns and may reuse from one call to
  // the next (a checkpoint's snapshot: on the device, page-locked buffers
  // filled at the full copy rate). Host and device state alike.
  NamedTensors CopyStateTensors(const std::function<Tensor(const Tensor& slot)>& host_buffer) const;
  // Scalar state: the number of successful Steps (Adam bias corrections use it).
  int64_t step_count() const { return step_count_; }

  // Replaces the state with `tensors` (exactly the names StateTensors() gives,
  // in any order, same shapes, host f32) and the step count. CUDA: copied to
  // the device. On error nothing
  // changes and INVALID_ARGUMENT names the first mismatch, e.g.
  //   optimizer state "exp_avg.fc.weight" has shape [3, 4], expected [4, 3]
  absl::Status LoadState(const NamedTensors& tensors, int64_t step_count);

  // Bytes of optimizer state held (state tensors only).
  size_t StateBytes() const;

  const OptimizerConfig& config() const { return config_; }

 protected:
  // One parameter (or its shard) and its state slots.
  struct Entry {
    Parameter* param = nullptr;
    int64_t offset = 0;
    int64_t count = 0;
    std::vector<Tensor> slots;  // one per slot name; empty when count == 0
    float* w() const { return param->value.f32() + offset; }
    const float* g() const { return param->grad.f32() + offset; }
  };

  // Allocates zeroed state: one tensor per slot name for every non-empty range.
  // `ranges` and `params` are checked by Create; reduce_norms null = not sharded.
  Optimizer(const OptimizerConfig& config, const ParameterList& params, std::vector<ParamRange> ranges,
            std::vector<std::string> slot_names, PartialSumReducer reduce_norms);
  // The same with state allocated by `zeros` (zeroed tensors of a shape, on
  // the parameters' device `device`).
  Optimizer(const OptimizerConfig& config, const ParameterList& params, std::vector<ParamRange> ranges,
            std::vector<std::string> slot_names, PartialSumReducer reduce_norms, Device device,
            const std::function<Tensor(const Shape&)>& zeros);

  // Device hooks (host parameters: memset, memcpy, memmove).
  virtual void ZeroTensor(const Tensor& t);
  virtual void ExportSlot(const Tensor& slot, const Tensor& host_dst) const;
  virtual void ImportSlot(const Tensor& host_src, const Tensor& slot);

  // Applies one update; `step` counts it (first update: 1). Must not write
  // anything before it knows it will succeed.
  virtual absl::Status Update(float lr, float grad_scale, int64_t step) = 0;

  // For LARS/LAMB: sums partial[2i], partial[2i+1] across shards (identity
  // when not sharded) and returns their square roots in place.
  absl::Status ReduceNorms(std::vector<double>& partial) const;

  const OptimizerConfig config_;
  std::vector<Entry> entries_;
  DeviceStepOptions device_step_;

 private:
  std::string StateName(size_t slot, const Entry& entry) const;
  Shape StateShape(const Entry& entry) const;

  const std::vector<std::string> slot_names_;
  const PartialSumReducer reduce_norms_;  // null when not sharded
  const Device device_ = Device::kCpu;
  int64_t step_count_ = 0;
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_OPTIMIZER_H_
