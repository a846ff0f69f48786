#include "engine/plan/plan_time.h"

#include <algorithm>

namespace ringmaster::engine::plan::internal {
namespace {

constexpr double kF32 = 4.0;
// The shape the large-GEMM rates are measured at (n^3).
constexpr double kMeasuredGemmSize = 8192.0;

enum class GemmRole {
  kForward,      // writes an activation
  kForwardGelu,  // writes an activation and the pre-activation (the GELU epilogue)
  kWeightGrad,   // accumulates into an fp32 parameter gradient
  kInputGrad,    // writes an activation gradient
};

// The math rate that, with an n^3 GEMM's operand and output traffic at
// `bandwidth`, gives `large` FLOP/s (at least 10x large when the traffic
// alone would take longer).
double MathRate(double large, double element_bytes, double bandwidth) {
  const double traffic_per_flop = 3.0 * element_bytes / (2.0 * kMeasuredGemmSize * bandwidth);
  return 1.0 / std::max(1.0 / large - traffic_per_flop, 0.1 / large);
}

// The ops of one micro-batch, built up layer by layer.
class Ledger {
 public:
  Ledger(const Storage& s, const Rates& r) : s_(s), r_(r) {}

  void Memory(OpClass c, const std::string& name, double bytes) { Add({name, c, 0, bytes, bytes / r_.bandwidth}); }

  void Compute(OpClass c, const std::string& name, double flops, double rate, double bytes = 0) {
    Add({name, c, flops, bytes, flops / rate + bytes / r_.bandwidth});
  }

  // `calls` products of m x n x k; a, b, c: elements of the operands and the
  // result per call (a convolution's are its tensors, not the implicit GEMM's).
  void Gemm(const std::string& name, double m, double n, double k, double a, double b, double c, GemmRole role,
            double calls = 1, bool conv = false) {
    const bool rounded_f32 = conv && s_.per_gemm_conversions;  // the old design's convolutions
    const double in = rounded_f32 ? kF32 : r_.operand_bytes;
    double out = s_.per_gemm_conversions ? kF32 : s_.act;  // old: fp32 results, rounded afterwards
    if (role == GemmRole::kForwardGelu) out *= 2.0;
    if (role == GemmRole::kWeightGrad) out = s_.per_gemm_conversions ? kF32 : 2.0 * kF32;  // old: a scratch product
    const double flops = 2.0 * m * n * k * calls;
    const double traffic = calls * (in * (a + b) + out * c);
    Compute(OpClass::kGemm, name, flops, rounded_f32 ? r_.conv_math : r_.gemm_math, traffic);
    if (!s_.per_gemm_conversions) return;
    // Old design: both operands converted to 16 bits (read 4, write 2) -- a
    // convolution's rounded in fp32 (read 4, write 4) -- then the result
    // rounded in place (read 4, write 4), or a gradient's product rounded and
    // accumulated (read 4 + 4, write 4).
    const double operand = rounded_f32 ? 8.0 : 6.0;
    double result = 8.0;
    if (role == GemmRole::kForwardGelu) result = 16.0;
    if (role == GemmRole::kWeightGrad) result = 12.0;
    Memory(OpClass::kConversions, name + ": operand conversions and rounding",
           calls * (operand * (a + b) + result * c));
  }

  // A Linear of `rows` rows, in -> out features (with a bias): forward, both
  // backward GEMMs and the bias gradient.
  void Linear(const std::string& name, double rows, double in, double out, bool gelu = false) {
    Gemm(name + " forward GEMM", rows, out, in, rows * in, out * in, rows * out,
         gelu ? GemmRole::kForwardGelu : GemmRole::kForward);
    Gemm(name + " weight-gradient GEMM", out, in, rows, rows * out, rows * in, out * in, GemmRole::kWeightGrad);
    Gemm(name + " input-gradient GEMM", rows, in, out, rows * out, out * in, rows * in, GemmRole::kInputGrad);
    Memory(OpClass::kElementwise, name + " bias gradient", s_.act * rows * out);
  }

  // An extra pass over `elements` fp32 values that only the old 16-bit design runs.
  void RoundingPass(const std::string& name, double elements) {
    if (s_.per_gemm_conversions) Memory(OpClass::kConversions, name + ": rounding pass", 8.0 * elements);
  }

  const Storage& storage() const { return s_; }
  const Rates& rates() const { return r_; }
  std::vector<OpCost> Take() { return std::move(ops_); }

 private:
  void Add(const OpCost& op) { AddOps({op}, 1.0, &ops_); }
  const Storage& s_;
  const Rates& r_;
  std::vector<OpCost> ops_;
};

void GptLayerOps(const nn::ModelConfig& m, double b, Ledger& l) {
  const Storage& s = l.storage();
  const double a = s.act, c = static_cast<double>(m.n_embd), t = static_cast<double>(m.block_size);
  const double rows = b * t;
  l.Memory(OpClass::kNormalization, "ln_1 forward", rows * (2.0 * a * c + 2.0 * kF32));
  l.Linear("c_attn", rows, c, 3.0 * c);
  // One T x T x head-size product over every head: 2 b T^2 C FLOPs.
  const double product = 2.0 * b * t * t * c;
  const double bht2 = b * m.n_head * t * t;
  switch (s.attention) {
    case AttentionPath::kCudnnFlash:  // QK^T, PV; backward: S again, dP, dV, dQ, dK; causal halves each
      l.Compute(OpClass::kAttention, "attention forward", 0.5 * 2.0 * product, l.rates().attention);
      l.Compute(OpClass::kAttention, "attention backward", 0.5 * 5.0 * product, l.rates().attention);
      break;
    case AttentionPath::kOwnFlash:  // backward: dK/dV pass (S, dP, dV, dK) and dQ pass (S, dP, dQ)
      l.Compute(OpClass::kAttention, "attention forward", 0.5 * 2.0 * product, l.rates().attention);
      l.Compute(OpClass::kAttention, "attention backward", 0.5 * 7.0 * product, l.rates().attention);
      break;
    case AttentionPath::kUnfused:  // full batched GEMMs; fp32 scores/probabilities through HBM
      l.Compute(OpClass::kAttention, "attention forward", 2.0 * product, l.rates().attention, 16.0 * bht2);
      l.Compute(OpClass::kAttention, "attention backward", 4.0 * product, l.rates().attention, 28.0 * bht2);
      break;
  }
  l.Linear("attn.c_proj", rows, c, c);
  l.Memory(OpClass::kNormalization, "ln_2 forward (with the residual add)", rows * (4.0 * a * c + 2.0 * kF32));
  l.Linear("c_fc (GELU epilogue)", rows, c, 4.0 * c, /*gelu=*/true);
  l.Linear("mlp.c_proj", rows, 4.0 * c, c);
  l.Memory(OpClass::kElementwise, "residual add", rows * 3.0 * a * c);
  l.Memory(OpClass::kElementwise, "GELU backward", rows * 12.0 * a * c);
  // dbeta's column sum reads dy; the kernel reads x, dy, the residual and
  // writes dx and dy * xhat (fp32), whose column sum reads it back.
  const double ln_backward = rows * ((5.0 * a + 2.0 * kF32) * c + 2.0 * kF32);
  l.Memory(OpClass::kNormalization, "ln_2 backward (with the residual)", ln_backward);
  l.Memory(OpClass::kNormalization, "ln_1 backward (with the residual)", ln_backward);
}

void GptHeadOps(const nn::ModelConfig& m, double b, Ledger& l) {
  const Storage& s = l.storage();
  const double a = s.act, c = static_cast<double>(m.n_embd), rows = b * m.block_size;
  const double v = static_cast<double>(s.classes);
  l.Memory(OpClass::kNormalization, "ln_f forward", rows * (2.0 * a * c + 2.0 * kF32));
  // The fused classifier runs chunk by chunk (its weight read by every
  // chunk's GEMMs, its fp32 gradient accumulated by each); the old one once.
  const double chunk = s.fused_classifier
                           ? static_cast<double>(ClassifierChunkRowsFor(m, s, static_cast<int64_t>(b)))
                           : rows;
  const double calls = rows / chunk;
  l.Gemm("classifier forward GEMM", chunk, v, c, chunk * c, v * c, chunk * v, GemmRole::kForward, calls);
  l.Memory(OpClass::kLoss, "softmax cross-entropy", rows * (2.0 * a * v + kF32));
  l.Gemm("classifier input-gradient GEMM", chunk, c, v, chunk * v, v * c, chunk * c, GemmRole::kInputGrad, calls);
  l.Gemm("classifier weight-gradient GEMM", v, c, chunk, chunk * v, chunk * c, v * c, GemmRole::kWeightGrad, calls);
  l.Memory(OpClass::kNormalization, "ln_f backward", rows * ((4.0 * a + 2.0 * kF32) * c + 2.0 * kF32));
}

void GptOps(const nn::ModelConfig& m, int begin, int end, double b, Ledger& l) {
  const int last = static_cast<int>(m.n_layer) + 1;
  const double a = l.storage().act, c = static_cast<double>(m.n_embd), rows = b * m.block_size;
  for (int i = begin; i < end; ++i) {
    if (i == 0) {
      // Reads fp32 table rows (token and position), writes the activation;
      // the backward adds into both fp32 gradients (read + write).
      l.Memory(OpClass::kEmbedding, "embedding forward", rows * (2.0 * kF32 * c + a * c + kF32));
      l.Memory(OpClass::kEmbedding, "embedding backward", rows * (a * c + 4.0 * kF32 * c + kF32));
    } else if (i == last) {
      GptHeadOps(m, b, l);
    } else {
      GptLayerOps(m, b, l);
    }
  }
}

void ImageOps(const nn::ModelConfig& m, int begin, int end, double b, Ledger& l) {
  const double a = l.storage().act;
  int block = 0;
  double features = static_cast<double>(m.input_channels * m.input_height * m.input_width);
  if (m.kind == nn::ModelKind::kCnn) {
    int64_t ch = m.input_channels, h = m.input_height, w = m.input_width;
    for (int64_t out : m.conv_channels) {
      if (block >= begin && block < end) {
        const double hw = static_cast<double>(h * w), k = static_cast<double>(ch * m.kernel_size * m.kernel_size);
        const double x = b * ch * hw, y = b * out * hw, wt = out * k, pooled = b * out * (h / 2) * (w / 2);
        l.Gemm("conv forward", b * hw, out, k, x, wt, y, GemmRole::kForward, 1, /*conv=*/true);
        l.Gemm("conv weight gradient", out, k, b * hw, y, x, wt, GemmRole::kWeightGrad, 1, true);
        l.Gemm("conv input gradient", b * hw, k, out, y, wt, x, GemmRole::kInputGrad, 1, true);
        l.Memory(OpClass::kNormalization, "batch norm forward", 2.0 * a * y);
        l.RoundingPass("batch norm forward", y);
        l.Memory(OpClass::kNormalization, "batch norm backward", 3.0 * a * y);
        l.RoundingPass("batch norm backward", y);
        l.Memory(OpClass::kElementwise, "ReLU", 5.0 * a * y);  // forward 2, backward 3
        l.Memory(OpClass::kElementwise, "max-pool", a * (3.0 * y + 2.0 * pooled));
      }
      ++block;
      ch = out;
      h /= 2;
      w /= 2;
    }
    features = static_cast<double>(ch * h * w);
  }
  const std::vector<int64_t>& hidden = m.kind == nn::ModelKind::kCnn ? m.cnn_hidden_sizes : m.hidden_sizes;
  for (int64_t size : hidden) {
    if (block >= begin && block < end) {
      const double h = static_cast<double>(size);
      l.Linear("hidden Linear", b, features, h);
      l.Memory(OpClass::kElementwise, "ReLU", 5.0 * a * b * h);
      // Forward: read x, write the fp32 mask and y; backward: read dy and the mask, write dx.
      if (m.dropout > 0.0f) l.Memory(OpClass::kElementwise, "dropout", 2.0 * b * h * (2.0 * a + kF32));
    }
    ++block;
    features = static_cast<double>(size);
  }
  if (block >= begin && block < end) {
    l.Linear("output Linear", b, features, static_cast<double>(m.num_classes));
    l.Memory(OpClass::kLoss, "softmax cross-entropy", b * (2.0 * a * m.num_classes + kF32));
  }
}

}  // namespace

Rates RatesFor(const DeviceProfile& d, const TrainerConfig& config, const Storage& s) {
  Rates r;
  if (d.large_gemm_bf16 <= 0 || d.memory_bytes_per_second <= 0 || d.peak_bf16 <= 0) return r;
  const double fraction = d.large_gemm_bf16 / d.peak_bf16;  // the measured large GEMM against the dense peak
  const double tf32 = d.peak_tf32 * fraction;
  r.bandwidth = d.memory_bytes_per_second;
  if (s.sixteen_bit) {
    r.large_gemm = d.large_gemm_bf16 * (config.compute_dtype == DType::kF16 ? d.peak_fp16 / d.peak_bf16 : 1.0);
    r.operand_bytes = 2.0;
  } else {
    r.large_gemm = config.device == Device::kCuda && config.tf32 ? tf32 : d.peak_fp32 * fraction;
    r.operand_bytes = kF32;
  }
  r.gemm_math = MathRate(r.large_gemm, r.operand_bytes, r.bandwidth);
  // The old 16-bit design ran convolutions on rounded fp32 with TF32 math.
  r.conv_math = s.per_gemm_conversions ? MathRate(tf32, kF32, r.bandwidth) : r.gemm_math;
  switch (s.attention) {
    case AttentionPath::kCudnnFlash: r.attention = d.cudnn_attention_fraction * r.large_gemm; break;
    case AttentionPath::kOwnFlash: r.attention = d.fp32_flash_efficiency * d.peak_fp32; break;
    case AttentionPath::kUnfused: r.attention = r.gemm_math; break;
  }
  return r;
}

std::vector<OpCost> MicroBatchOps(const nn::ModelConfig& model, const Storage& storage, const Rates& rates,
                                  int begin, int end, int64_t b) {
  Ledger ledger(storage, rates);
  if (model.kind == nn::ModelKind::kGpt) {
    GptOps(model, begin, end, static_cast<double>(b), ledger);
  } else {
    ImageOps(model, begin, end, static_cast<double>(b), ledger);
  }
  return ledger.Take();
}

std::vector<OpCost> OptimizerOps(const TrainerConfig& config, const Storage& storage, const Rates& rates,
                                 int64_t optimized, int64_t trained, int64_t operands) {
  Ledger l(storage, rates);
  const double slots = static_cast<double>(optim::StateSlotNames(config.optimizer).size());
  const double opt = static_cast<double>(optimized);
  // Reads the weight, gradient and state; writes the weight and state.
  l.Memory(OpClass::kOptimizer, "update", kF32 * (3.0 + 2.0 * slots) * opt);
  const optim::OptimizerKind kind = config.optimizer.kind;
  if (kind == optim::OptimizerKind::kLars || kind == optim::OptimizerKind::kLamb)
    l.Memory(OpClass::kOptimizer, "trust-ratio norms", 2.0 * kF32 * opt);
  if (config.grad_clip_norm > 0.0f) l.Memory(OpClass::kOptimizer, "gradient norm (clipping)", kF32 * opt);
  if (config.compute_dtype == DType::kF16 && config.loss_scaler.enabled)
    l.Memory(OpClass::kOptimizer, "non-finite check (loss scaling)", kF32 * static_cast<double>(trained));
  l.Memory(OpClass::kOptimizer, "zero gradients", kF32 * static_cast<double>(trained));
  // Read the fp32 value, write the 16-bit copy.
  if (storage.operand_copies)
    l.Memory(OpClass::kWeightCopies, "16-bit operand copies", (kF32 + 2.0) * static_cast<double>(operands));
  return l.Take();
}

void AddOps(const std::vector<OpCost>& ops, double times, std::vector<OpCost>* into) {
  for (const OpCost& op : ops) {
    auto it = std::find_if(into->begin(), into->end(), [&](const OpCost& o) {
      return o.name == op.name && o.op_class == op.op_class;
    });
    if (it == into->end()) {
      into->push_back({op.name, op.op_class, 0, 0, 0});
      it = into->end() - 1;
    }
    it->flops += times * op.flops;
    it->bytes += times * op.bytes;
    it->seconds += times * op.seconds;
  }
}

}  // namespace ringmaster::engine::plan::internal
