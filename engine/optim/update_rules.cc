#include "engine/optim/update_rules.h"

#include <string>
#include <utility>

#include "common/status_macros.h"
#include "engine/optim/cpu_update.h"

namespace ringmaster::engine::optim {
namespace {

// Weight decay of one parameter: the configured value, or 0 when excluded.
float DecayOf(const Parameter& p, float weight_decay) { return p.decay ? weight_decay : 0.0f; }

// SGD: momentum_buffer slot (absent when momentum == 0), L2 weight decay.
class SgdOptimizer final : public Optimizer {
 public:
  SgdOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges)
      : Optimizer(c, params, std::move(ranges), StateSlotNames(c), nullptr) {}

 private:

  absl::Status Update(float lr, float grad_scale, int64_t /*step*/) override {
    for (const Entry& e : entries_) {
      if (e.count == 0) continue;
      SgdArgs args{lr, config_.momentum, DecayOf(*e.param, config_.weight_decay), config_.nesterov, grad_scale};
      SgdUpdate(e.w(), e.g(), e.slots.empty() ? nullptr : e.slots[0].f32(), e.count, args);
    }
    return absl::OkStatus();
  }
};

// AdamW: exp_avg and exp_avg_sq slots, decoupled weight decay.
class AdamWOptimizer final : public Optimizer {
 public:
  AdamWOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges)
      : Optimizer(c, params, std::move(ranges), StateSlotNames(c), nullptr) {}

 private:
  absl::Status Update(float lr, float grad_scale, int64_t step) override {
    for (const Entry& e : entries_) {
      if (e.count == 0) continue;
      AdamWArgs args{lr,   config_.beta1, config_.beta2, config_.eps, DecayOf(*e.param, config_.weight_decay),
                     step, grad_scale};
      AdamWUpdate(e.w(), e.g(), e.slots[0].f32(), e.slots[1].f32(), e.count, args);
    }
    return absl::OkStatus();
  }
};

// LARS: momentum_buffer slot (absent when momentum == 0). Parameters with
// decay == false take plain SGD-momentum steps (SgdUpdate without decay).
class LarsOptimizer final : public Optimizer {
 public:
  LarsOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges,
                PartialSumReducer reduce)
      : Optimizer(c, params, std::move(ranges), StateSlotNames(c), std::move(reduce)) {}

 private:

  absl::Status Update(float lr, float grad_scale, int64_t /*step*/) override {
    // norms[2i] = ||w_i||, norms[2i+1] = ||grad_scale * grad_i|| (decayed parameters only).
    std::vector<double> norms(2 * entries_.size(), 0.0);
    const double scale_sq = static_cast<double>(grad_scale) * grad_scale;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.count == 0 || !e.param->decay) continue;
      norms[2 * i] = SumSquares(e.w(), e.count);
      norms[2 * i + 1] = SumSquares(e.g(), e.count) * scale_sq;
    }
    RETURN_IF_ERROR(ReduceNorms(norms));
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.count == 0) continue;
      float* buf = e.slots.empty() ? nullptr : e.slots[0].f32();
      if (!e.param->decay) {
        SgdUpdate(e.w(), e.g(), buf, e.count, SgdArgs{lr, config_.momentum, 0.0f, false, grad_scale});
        continue;
      }
      const float trust =
          LarsTrustRatio(norms[2 * i], norms[2 * i + 1], config_.trust_coefficient, config_.weight_decay);
      LarsUpdate(e.w(), e.g(), buf, e.count, LarsArgs{lr, config_.momentum, config_.weight_decay, trust, grad_scale});
    }
    return absl::OkStatus();
  }
};

// LAMB: exp_avg and exp_avg_sq slots. Parameters with decay == false take
// bias-corrected Adam steps (trust ratio 1, no decay).
class LambOptimizer final : public Optimizer {
 public:
  LambOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges,
                PartialSumReducer reduce)
      : Optimizer(c, params, std::move(ranges), StateSlotNames(c), std::move(reduce)) {}

 private:
  LambArgs ArgsFor(const Entry& e, float lr, float grad_scale, int64_t step) const {
    return LambArgs{lr,   config_.beta1, config_.beta2, config_.eps, DecayOf(*e.param, config_.weight_decay),
                    step, 1.0f,          grad_scale};
  }

  absl::Status Update(float lr, float grad_scale, int64_t step) override {
    // norms[2i] = ||w_i||, norms[2i+1] = ||u_i|| (decayed parameters only); reads only.
    std::vector<double> norms(2 * entries_.size(), 0.0);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.count == 0 || !e.param->decay) continue;
      norms[2 * i] = SumSquares(e.w(), e.count);
      norms[2 * i + 1] = LambUpdateSumSquares(e.w(), e.g(), e.slots[0].f32(), e.slots[1].f32(), e.count,
                                              ArgsFor(e, lr, grad_scale, step));
    }
    RETURN_IF_ERROR(ReduceNorms(norms));
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.count == 0) continue;
      LambArgs args = ArgsFor(e, lr, grad_scale, step);
      if (e.param->decay) args.trust_ratio = LambTrustRatio(norms[2 * i], norms[2 * i + 1]);
      LambUpdate(e.w(), e.g(), e.slots[0].f32(), e.slots[1].f32(), e.count, args);
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateUpdateRule(const OptimizerConfig& config, const ParameterList& params,
                                                            std::vector<ParamRange> ranges,
                                                            PartialSumReducer reduce_norms) {
  switch (config.kind) {
    case OptimizerKind::kSgd:
      return std::unique_ptr<Optimizer>(new SgdOptimizer(config, params, std::move(ranges)));
    case OptimizerKind::kAdamW:
      return std::unique_ptr<Optimizer>(new AdamWOptimizer(config, params, std::move(ranges)));
    case OptimizerKind::kLars:
      return std::unique_ptr<Optimizer>(new LarsOptimizer(config, params, std::move(ranges), std::move(reduce_norms)));
    case OptimizerKind::kLamb:
      return std::unique_ptr<Optimizer>(new LambOptimizer(config, params, std::move(ranges), std::move(reduce_norms)));
  }
  return absl::InvalidArgumentError("unknown optimizer kind");
}

}  // namespace ringmaster::engine::optim
