#ifndef RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_H_
#define RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_H_

// Fused optimizer updates on fp32 master weights, one launch over a whole
// multi-tensor table (optim_multi_tensor.h): the CUDA twins of
// engine/optim/cpu_update.h, with the same formulas (see there), the same
// fp64 bias corrections (formed on the host, rounded once), per-entry weight
// decay, and LARS/LAMB trust ratios from per-parameter norms reduced on the
// device (grad_norm.h, two-stage).
//
// The gradient factor is hyper.grad_scale times control->grad_scale when a
// DeviceStepControl is given (loss_scale.h), and then nothing is written when
// control->skip is set: the skip decision never leaves the device. With
// control == nullptr the host's grad_scale alone applies.
//
// Plain C++ header; launchers return the cudaError_t of the (last) launch as
// int. Every pointer is device memory; work is enqueued on `stream`.

#include <cstdint>

#include "engine/kernels/loss_scale.h"
#include "engine/kernels/optim_multi_tensor.h"

namespace ringmaster::kernels {

// SGD (momentum, Nesterov, L2 decay per entry). momentum == 0: s0 unused.
struct SgdHyper {
  float lr = 0.0f;
  float momentum = 0.0f;
  int32_t nesterov = 0;
  float grad_scale = 1.0f;
};

// AdamW (decoupled decay per entry); step >= 1 counts this update.
struct AdamHyper {
  float lr = 0.0f;
  double beta1 = 0.9;
  double beta2 = 0.999;
  float eps = 1e-8f;
  int64_t step = 1;
  float grad_scale = 1.0f;
};

// LARS: entries with trust = 1 scale their step by the trust ratio
// eta * ||w|| / (||g|| + wd ||w||); the others take plain SGD-momentum steps.
struct LarsHyper {
  float lr = 0.0f;
  float momentum = 0.9f;
  float trust_coefficient = 0.001f;
  float grad_scale = 1.0f;
};

// Device scratch for the norms: partials[table.num_chunks],
// w_sums[table.num_entries], u_sums[table.num_entries] (doubles).
struct OptimScratch {
  double* partials = nullptr;
  double* w_sums = nullptr;
  double* u_sums = nullptr;
};

int LaunchSgdUpdate(const MultiTensorTable& table, const SgdHyper& hyper, const DeviceStepControl* control,
                    void* stream);
int LaunchAdamWUpdate(const MultiTensorTable& table, const AdamHyper& hyper, const DeviceStepControl* control,
                      void* stream);
int LaunchLarsUpdate(const MultiTensorTable& table, const LarsHyper& hyper, const DeviceStepControl* control,
                     const OptimScratch& scratch, void* stream);
// LAMB with AdamHyper's fields (eps as configured, 1e-6 in the papers).
int LaunchLambUpdate(const MultiTensorTable& table, const AdamHyper& hyper, const DeviceStepControl* control,
                     const OptimScratch& scratch, void* stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_H_
