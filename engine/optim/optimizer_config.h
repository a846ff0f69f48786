#ifndef RINGMASTER_ENGINE_OPTIM_OPTIMIZER_CONFIG_H_
#define RINGMASTER_ENGINE_OPTIM_OPTIMIZER_CONFIG_H_

// The optimizer's configuration alone (optimizer.h has the optimizers), so
// that code which only reads a spec (the trainer config, `ringmaster plan`)
// does not link the CUDA update kernels.

#include <string>
#include <vector>

namespace ringmaster::engine::optim {

enum class OptimizerKind { kSgd, kAdamW, kLars, kLamb };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  // Base learning rate of the run (what the schedule starts from). The
  // optimizer itself uses the lr passed to each Step.
  float lr = 0.01f;
  float momentum = 0.9f;             // SGD, LARS; in [0, 1)
  bool nesterov = false;             // SGD only; needs momentum > 0
  float weight_decay = 0.0f;         // >= 0. SGD/LARS: L2 term in the gradient; AdamW/LAMB: decoupled
  double beta1 = 0.9;                // AdamW, LAMB; in [0, 1) (fp64: see AdamWArgs)
  double beta2 = 0.999;              // AdamW, LAMB; in [0, 1)
  float eps = 1e-8f;                 // AdamW, LAMB; > 0 (LAMB papers use 1e-6)
  float trust_coefficient = 0.001f;  // LARS eta; > 0
};

// The state slots of config.kind: "momentum_buffer" (SGD, LARS; none when
// momentum == 0), or "exp_avg" and "exp_avg_sq" (AdamW, LAMB).
inline std::vector<std::string> StateSlotNames(const OptimizerConfig& config) {
  switch (config.kind) {
    case OptimizerKind::kSgd:
    case OptimizerKind::kLars:
      if (config.momentum == 0.0f) return {};
      return {"momentum_buffer"};
    case OptimizerKind::kAdamW:
    case OptimizerKind::kLamb:
      return {"exp_avg", "exp_avg_sq"};
  }
  return {};
}

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_OPTIMIZER_CONFIG_H_
