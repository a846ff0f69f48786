// Prints the speed of the CudaBackend's heavy ops in each compute mode:
// GEMM TFLOP/s (GPT-2-small-sized matmuls), attention forward + backward, and
// the fused LayerNorm / softmax cross-entropy, and the fused ops of the GPT
// block against their unfused sequences. Operands as the model passes them
// (engine/core/backend.h): activations in the activation dtype (16-bit in the
// bf16/fp16 rows: half the bytes of the fp32 rows), weights as their operand
// copies, norm parameters, statistics, weight gradients and the loss f32.
// Without a device it says so and exits 0 (nothing to measure). Numbers, not
// assertions: see #7 for the validation runs on an H100.
//
//   bazel run //engine/cuda:cuda_backend_bench

#include <chrono>
#include <cstdio>
#include <functional>

#include "engine/core/test_util.h"
#include "engine/cuda/cuda_backend.h"

namespace ringmaster::engine {
namespace {

struct Mode {
  DType dtype;
  bool tf32;
  const char* name;
};

// Random values in [-1, 1) as an activation (or a weight's operand copy):
// uploaded f32, converted into the activation dtype.
Tensor Act(CudaBackend& be, const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor wide = be.ToDevice(testing::RandomTensor(shape, seed, lo, hi));
  if (be.activation_dtype() == DType::kF32) return wide;
  Tensor t = be.EmptyActivation(shape);
  be.Convert(wide, t);
  return t;
}

// Mean milliseconds per call of `op` over `iters` calls after 3 warm-up calls.
double TimeMs(CudaBackend& be, int iters, const std::function<void()>& op) {
  for (int i = 0; i < 3; ++i) op();
  if (!be.Synchronize().ok()) return -1.0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) op();
  const absl::Status status = be.Synchronize();
  const auto end = std::chrono::steady_clock::now();
  if (!status.ok()) {
    std::printf("  error: %s\n", status.ToString().c_str());
    return -1.0;
  }
  return std::chrono::duration<double, std::milli>(end - start).count() / iters;
}

// The fused ops against the unfused sequences they replace in the GPT block.
// x [8192, 768] (768-wide inputs, activations), bias [3072] (operand copy).
void BenchFused(CudaBackend& be, const Tensor& x, const Tensor& bias, const Tensor& x2, const Tensor& gamma,
                const Tensor& beta) {
  const int64_t m = x.dim(0), k = x.dim(1), n = bias.numel();
  Tensor w = Act(be, {n, k}, 11, -0.05f, 0.05f);
  Tensor pre = be.EmptyActivation({m, n}), y = be.EmptyActivation({m, n});
  const double fused = TimeMs(be, 20, [&] { be.LinearGeluForward(x, w, bias, pre, y); });
  const double unfused = TimeMs(be, 20, [&] {
    be.Gemm(false, true, 1.0f, x, w, 0.0f, pre, &bias);
    be.GeluForward(pre, y);
  });
  std::printf("  linear+gelu [%ld x %ld] -> %ld: fused (GELU epilogue) %.3f ms, gemm + gelu %.3f ms\n",
              static_cast<long>(m), static_cast<long>(k), static_cast<long>(n), fused, unfused);

  const int64_t rows = x2.dim(0), c = x2.dim(1);
  Tensor r = Act(be, {rows, c}, 12);
  Tensor sum = be.EmptyActivation({rows, c}), out = be.EmptyActivation({rows, c});
  Tensor mean = be.Empty({rows}), rstd = be.Empty({rows});
  const double add_ln =
      TimeMs(be, 50, [&] { be.AddLayerNormForward(x2, r, gamma, beta, 1e-5f, sum, out, mean, rstd); });
  const double add_then_ln = TimeMs(be, 50, [&] {
    be.Add(x2, r, sum);
    be.LayerNormForward(sum, gamma, beta, 1e-5f, out, mean, rstd);
  });
  std::printf("  add+layernorm [%ld x %ld] forward: fused %.3f ms, add + layernorm %.3f ms\n",
              static_cast<long>(rows), static_cast<long>(c), add_ln, add_then_ln);
  Tensor dgamma = be.Zeros({c}), dbeta = be.Zeros({c}), dx = be.EmptyActivation({rows, c});
  Tensor g = be.EmptyActivation({rows, c});
  const double bwd =
      TimeMs(be, 50, [&] { be.AddLayerNormBackward(sum, out, gamma, mean, rstd, r, dx, dgamma, dbeta); });
  const double bwd_then_add = TimeMs(be, 50, [&] {
    be.LayerNormBackward(sum, out, gamma, mean, rstd, g, dgamma, dbeta);
    be.Add(r, g, dx);
  });
  std::printf("  layernorm backward + residual: fused %.3f ms, backward + add %.3f ms\n", bwd, bwd_then_add);
}

void BenchMode(const Mode& mode) {
  auto created = CudaBackend::Create({0, mode.dtype, mode.tf32});
  if (!created.ok()) {
    std::printf("%s: %s\n", mode.name, created.status().ToString().c_str());
    return;
  }
  CudaBackend& be = **created;
  std::printf("%s\n", mode.name);
  // GPT-2 small, B*T = 8192 tokens: the MLP's up projection and its weight gradient.
  const int64_t m = 8192, k = 768, n = 3072;
  Tensor a = Act(be, {m, k}, 1);
  Tensor w = Act(be, {k, n}, 2);     // the weight's operand copy
  Tensor bias = Act(be, {n}, 3);     // the bias's operand copy
  Tensor c = be.EmptyActivation({m, n});
  Tensor dw = be.Zeros({k, n});      // the f32 weight gradient
  const double flops = 2.0 * m * n * k;
  const double fwd = TimeMs(be, 20, [&] { be.Gemm(false, false, 1.0f, a, w, 0.0f, c, &bias); });
  const double wgrad = TimeMs(be, 20, [&] { be.Gemm(true, false, 1.0f, a, c, 1.0f, dw); });
  std::printf("  gemm [%ld x %ld] @ [%ld x %ld] + bias: %.3f ms, %.1f TFLOP/s\n", static_cast<long>(m),
              static_cast<long>(k), static_cast<long>(k), static_cast<long>(n), fwd, flops / fwd / 1e9);
  std::printf("  gemm weight gradient (+=):        %.3f ms, %.1f TFLOP/s\n", wgrad, flops / wgrad / 1e9);

  // Attention: B = 8, T = 1024, 12 heads of 64.
  const int64_t b = 8, t = 1024, nh = 12, c_model = 768;
  Tensor qkv = Act(be, {b, t, 3 * c_model}, 4);
  Tensor saved = be.Empty(be.AttentionSavedShape(b, nh, t, c_model / nh));  // flash: logsumexp [B, H, T]
  Tensor out = be.EmptyActivation({b, t, c_model});
  Tensor dout = Act(be, {b, t, c_model}, 8);
  Tensor dqkv = be.EmptyActivation({b, t, 3 * c_model});
  const double att_fwd = TimeMs(be, 10, [&] { be.AttentionForward(qkv, nh, saved, out); });
  const double att_bwd = TimeMs(be, 10, [&] { be.AttentionBackward(qkv, saved, out, dout, nh, dqkv); });
  std::printf("  attention B=8 T=1024 H=12 D=64: forward %.3f ms, backward %.3f ms\n", att_fwd, att_bwd);

  Tensor x = Act(be, {b * t, c_model}, 5);
  Tensor gamma = be.ToDevice(testing::RandomTensor({c_model}, 6));
  Tensor beta = be.ToDevice(testing::RandomTensor({c_model}, 7));
  Tensor y = be.EmptyActivation({b * t, c_model}), mean = be.Empty({b * t}), rstd = be.Empty({b * t});
  const double ln = TimeMs(be, 50, [&] { be.LayerNormForward(x, gamma, beta, 1e-5f, y, mean, rstd); });
  std::printf("  layernorm [8192 x 768] forward: %.3f ms (%.0f GB/s)\n", ln, 2.0 * x.bytes() / ln / 1e6);
  BenchFused(be, a, bias, x, gamma, beta);

  const int64_t rows = 2048, vocab = 50257;
  Tensor logits = Act(be, {rows, vocab}, 8);
  std::vector<int32_t> ids(rows);
  for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>((i * 7919) % vocab);
  Tensor targets = be.ToDevice(Tensor::FromInts({rows}, ids));
  Tensor loss = be.Empty({1}), dlogits = be.EmptyActivation({rows, vocab});
  const double ce = TimeMs(be, 20, [&] { be.SoftmaxCrossEntropy(logits, targets, -1, 1.0f, loss, dlogits); });
  std::printf("  softmax cross-entropy [2048 x 50257]: %.3f ms (%.0f GB/s)\n", ce, 2.0 * logits.bytes() / ce / 1e6);
  // The GPT classifier's form: the vocabulary padded to 50,304 columns, the
  // gradient written over the logits (the same bytes read and written).
  const int64_t padded = 50304;
  Tensor chunk = Act(be, {rows, padded}, 9);
  Tensor count = be.Empty({1});
  be.CountTargets(targets, -1, count);
  const double ce_chunk = TimeMs(be, 20, [&] {
    be.SoftmaxCrossEntropyChunk(chunk, vocab, targets, -1, count, 1.0f, loss, &chunk);
  });
  std::printf("  softmax cross-entropy chunk in place [2048 x %ld], v = %ld: %.3f ms (%.0f GB/s)\n",
              static_cast<long>(padded), static_cast<long>(vocab), ce_chunk, 2.0 * chunk.bytes() / ce_chunk / 1e6);
}

}  // namespace
}  // namespace ringmaster::engine

int main() {
  using ringmaster::engine::DType;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device present: nothing to benchmark\n");
    return 0;
  }
  for (const auto& mode : {ringmaster::engine::Mode{DType::kF32, false, "fp32"},
                           ringmaster::engine::Mode{DType::kF32, true, "tf32"},
                           ringmaster::engine::Mode{DType::kBF16, false, "bf16"},
                           ringmaster::engine::Mode{DType::kF16, false, "fp16"}}) {
    ringmaster::engine::BenchMode(mode);
  }
  return 0;
}
