#ifndef RINGMASTER_ENGINE_CORE_BACKEND_H_
#define RINGMASTER_ENGINE_CORE_BACKEND_H_

// Backend: the seam between the layers (engine/nn) and a device. A backend
// allocates tensors on its device, copies between host and device, and runs
// every op the layers need, each as a forward and a backward entry point.
//
// Conventions for every op:
//  * Tensors are contiguous and row-major, on this backend's device. Integer
//    data (tokens, labels) is kI32.
//  * Storage. Activations -- what a layer computes and keeps for its backward
//    or hands to the next layer, and their gradients -- are stored in
//    activation_dtype(): the CPU backend stores f32 holding values rounded to
//    the compute dtype (the reference); a CUDA backend with a 16-bit compute
//    dtype stores them in that dtype (real mixed precision: half the bytes).
//    Parameters, parameter gradients, optimizer state, statistics (norm
//    means and rstds, BatchNorm's running and saved statistics, attention's
//    saved tensor), dropout masks and the loss are f32 everywhere. Below,
//    "act" marks an activation argument (dtype activation_dtype()); every
//    other float argument is f32. A wrong dtype is a caller bug (CHECK).
//  * Parameters that are GEMM or convolution operands (weights, and the biases
//    of GEMMs and convolutions) are passed as Parameter::operand(): a copy in
//    activation_dtype() made once per optimizer step (engine/nn/layer.h's
//    RefreshOperands), or the f32 value itself when activation_dtype() is f32.
//    So a device GEMM reads 16-bit weights without converting them per call.
//  * Outputs are preallocated by the caller and have the documented shapes.
//    A shape mismatch is a bug in the caller (the layers validate user input
//    and return absl::Status): ops CHECK and abort.
//  * "+=" outputs (parameter gradients: dw, dbias, dgamma, ...) accumulate in
//    f32; everything else is overwritten. Optional outputs are passed as
//    nullptr.
//  * Mixed precision: every value an op writes to an act tensor is rounded to
//    compute_dtype() (by the CPU explicitly, by 16-bit storage on a device);
//    the CPU also rounds GEMM operands and the new contribution of a "+="
//    output before adding it in f32 (a device backend adds it unrounded: more
//    exact, within the stated tolerances; the CUDA convolution's filter
//    gradient is the exception: cuDNN writes it in the filter's 16-bit type
//    before it is added). Reductions, norms, softmax and the loss accumulate
//    in fp32.
//  * Results are bitwise reproducible for the same inputs and thread count.
//  * Not thread-safe: one thread drives a backend at a time.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine {

// 2-D convolution geometry (square or not; no dilation, no groups).
struct Conv2dGeometry {
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  // Output size for an input of `in` pixels along one axis.
  static int64_t OutSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
    return (in + 2 * pad - kernel) / stride + 1;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // The precision ops compute in (kF32, kF16 or kBF16).
  virtual DType compute_dtype() const = 0;
  // The dtype activations are stored in (see the conventions above): kF32 on
  // the CPU, compute_dtype() on a CUDA device.
  virtual DType activation_dtype() const { return DType::kF32; }
  // An uninitialised activation tensor: Empty(shape, activation_dtype()).
  Tensor EmptyActivation(const Shape& shape) { return Empty(shape, activation_dtype()); }
  // Waits for the work this backend enqueued and returns the first device
  // error an op hit since the last call (ops are void; a device backend keeps
  // its first failure and turns later ops into no-ops). The CPU has nothing to
  // wait for. The trainer calls it once per step.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }

  // ---- Memory -------------------------------------------------------------
  virtual Tensor Empty(const Shape& shape, DType dtype = DType::kF32) = 0;
  virtual Tensor Zeros(const Shape& shape, DType dtype = DType::kF32) = 0;
  // dst (on this device) = src (a host tensor); same shape and dtype.
  virtual void CopyFromHost(const Tensor& host_src, const Tensor& dst) = 0;
  // host_dst = src (on this device); same shape and dtype.
  virtual void CopyToHost(const Tensor& src, const Tensor& host_dst) = 0;
  // dst = src, both on this device; same numel and dtype.
  virtual void Copy(const Tensor& src, const Tensor& dst) = 0;
  // Convenience: a device copy of a host tensor / a host copy of a device tensor.
  Tensor ToDevice(const Tensor& host);
  Tensor ToHost(const Tensor& src);

  // ---- Elementwise --------------------------------------------------------
  // Fill, Scale, Axpy, RoundInPlace and NonFiniteCheck are exact f32
  // utilities (parameters, gradients, statistics): they do not round to the
  // compute dtype. Copy and Convert take any float dtype.
  virtual void Fill(const Tensor& x, float value) = 0;           // x = value
  virtual void Scale(const Tensor& x, float alpha) = 0;          // x *= alpha
  virtual void Axpy(float alpha, const Tensor& x, const Tensor& y) = 0;     // y += alpha * x
  // out = a + b (the residual add), all act. out may alias a or b.
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // dst = src converted between f32, f16 and bf16 (round to nearest even).
  virtual void Convert(const Tensor& src, const Tensor& dst) = 0;
  // x (f32) = RoundTo(dtype, x), in place.
  virtual void RoundInPlace(const Tensor& x, DType dtype) = 0;
  // flag[0] = 1 if any element of any tensor is inf or NaN; flag[0] is left
  // unchanged otherwise (so several calls OR together). flag: f32 [1] on this
  // device, so the check needs no device-to-host copy.
  virtual void NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) = 0;

  // ---- GEMM ---------------------------------------------------------------
  // c[M, N] = alpha * op(a) @ op(b) + beta * c (+ bias[N] on every row).
  // op(a) is [M, K]: a is [M, K], or [K, M] with trans_a. op(b) is [K, N]: b
  // is [K, N], or [N, K] with trans_b. a and b may have any rank; they are
  // viewed as 2-D by merging all but the last dimension.
  // a, b: act (activations or parameter operands); bias: a parameter operand
  // (act); c: act, written with beta 0, or f32 for a parameter gradient
  // (beta 1: "+=").
  virtual void Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                    const Tensor& c, const Tensor* bias = nullptr) = 0;
  // The same for `batch` independent products: a [batch, ...], b [batch, ...],
  // c [batch, M, N], each a contiguous stride of the next.
  virtual void GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                           float beta, const Tensor& c) = 0;
  // dbias[N] += sum over rows of dy[M, N] (dy act).
  virtual void BiasGrad(const Tensor& dy, const Tensor& dbias) = 0;

  // ---- Activations (x, y, dy, dx act; masks f32) ----------------------------
  virtual void ReluForward(const Tensor& x, const Tensor& y) = 0;
  // dx = dy * (y > 0); y is the forward output. dx may alias dy.
  virtual void ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) = 0;
  // GPT-2's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  virtual void GeluForward(const Tensor& x, const Tensor& y) = 0;
  virtual void GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) = 0;
  // Inverted dropout: mask[i] = (HashUniform(key, i) >= p) / (1 - p); y = x * mask.
  // The mask is a pure function of (key, i), on every device.
  virtual void DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) = 0;
  // dx = dy * mask.
  virtual void DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) = 0;

  // ---- Convolution and pooling (NCHW) -------------------------------------
  // x [N, C, H, W], w [O, C, kh, kw], bias [O] or null, y [N, O, OH, OW]: x,
  // y, dy, dx act; w and bias parameter operands (act); dw, dbias f32.
  virtual void Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                             const Tensor& y) = 0;
  // dx (overwritten; null to skip), dw += , dbias += (null to skip).
  virtual void Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                              const Tensor* dx, const Tensor& dw, const Tensor* dbias) = 0;
  // Max pooling, kernel k x k, stride s, no padding: x [N, C, H, W] -> y [N, C, OH, OW].
  virtual void MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) = 0;
  // Routes dy to the first maximum of each window (recomputed from x). dx overwritten.
  virtual void MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) = 0;

  // ---- Normalisation (x, y, dy, dx, a, b, sum, residual act; gamma, beta:
  // the f32 parameter values, not operands; statistics f32) -----------------
  // BatchNorm2d in training: statistics of this batch (per rank: "ghost" BN).
  // x, y [N, C, H, W]; gamma, beta, running_mean, running_var [C];
  // save_mean, save_invstd [C] (outputs, for backward). running_* are updated
  // as in PyTorch: r = (1 - momentum) r + momentum * stat, the variance
  // unbiased (n / (n - 1)).
  virtual void BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float momentum,
                                       float eps, const Tensor& running_mean, const Tensor& running_var,
                                       const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) = 0;
  // Eval: normalises with the running statistics.
  virtual void BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& running_mean, const Tensor& running_var, float eps,
                                      const Tensor& y) = 0;
  // dx overwritten; dgamma, dbeta +=.
  virtual void BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                                   const Tensor& dgamma, const Tensor& dbeta) = 0;
  // LayerNorm over the last dimension C: x, y [..., C]; gamma, beta [C];
  // mean, rstd [rows] (outputs, for backward).
  virtual void LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                const Tensor& y, const Tensor& mean, const Tensor& rstd) = 0;
  virtual void LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                 const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                                 const Tensor& dbeta) = 0;

  // ---- Fused ops (a GPT block's MLP and residual stream) --------------------
  // Each equals the unfused sequence named beside it; a device backend may run
  // it as one pass (see the backend's header for how close it stays).
  // pre[M, N] = x[M, K] @ w[N, K]^T + bias[N] (kept for backward), y = gelu(pre)
  // (GeluForward's tanh approximation): Gemm(false, true, 1, x, w, 0, pre,
  // &bias), then GeluForward(pre, y). x may have any rank (rows merged).
  virtual void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                 const Tensor& y) = 0;
  // sum = a + b (the new residual stream), y = LayerNorm(sum), mean and rstd as
  // LayerNormForward: Add(a, b, sum), then LayerNormForward(sum, ...).
  virtual void AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                   float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                                   const Tensor& rstd) = 0;
  // dx = residual + the dx of LayerNormBackward(x, dy, ...) (the residual
  // stream's gradient; rounded as Add rounds); dgamma, dbeta +=. dx may alias
  // residual (updated in place), not x or dy.
  virtual void AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& residual, const Tensor& dx,
                                    const Tensor& dgamma, const Tensor& dbeta) = 0;

  // ---- Embedding ----------------------------------------------------------
  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. tokens i32 [B, T] (each in
  // [0, V)), wte [V, C], wpe [>= T, C] (f32 values), out act [B, T, C]; dout
  // act, dwte and dwpe f32.
  virtual void EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) = 0;
  // Scatter-add: dwte[tokens[b, t]] += dout[b, t]; dwpe[t] += sum_b dout[b, t].
  virtual void EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                 const Tensor& dwpe) = 0;

  // ---- Attention ----------------------------------------------------------
  // Causal multi-head self-attention on a fused projection (GPT-2's c_attn):
  // qkv act [B, T, 3C] holds q, k, v, each [B, T, n_head, C / n_head];
  // out act [B, T, C]. Scale 1 / sqrt(C / n_head). What forward saves for
  // backward is the backend's choice: `saved` (f32) has AttentionSavedShape(B,
  // n_head, T, head_size) (the CPU backend: the softmax probabilities
  // [B, n_head, T, T]; the CUDA backend's flash attention, cuDNN's or its own:
  // the per-row logsumexp of the scaled scores [B, n_head, T]). Its contents
  // are opaque to callers: only AttentionBackward reads them.
  virtual Shape AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const = 0;
  virtual void AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) = 0;
  // out is forward's output (the flash backward needs it). dout, dqkv act;
  // dqkv [B, T, 3C] overwritten.
  virtual void AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                                 int64_t n_head, const Tensor& dqkv) = 0;

  // ---- Loss ---------------------------------------------------------------
  // count (f32 [1]) = the number of targets (i32, any shape) not equal to
  // ignore_index: the divisor of a mean loss computed chunk by chunk.
  virtual void CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) = 0;
  // Fused softmax + cross-entropy of one chunk of rows, in one pass over each
  // row: logits act [M, ld] of which the first v <= ld columns are real (the
  // rest is vocabulary padding: never part of the softmax), targets i32 [M],
  // each in [0, v) or ignore_index; count: CountTargets over the whole batch.
  //   loss (f32 [1]) += sum over this chunk's counted rows of
  //                     -log softmax(row[0, v))[target] / count;
  //   dlogits (act [M, ld], or null for the loss alone) = grad_scale *
  //                     (softmax - onehot) / count on counted rows, 0 on ignored
  //                     rows and padded columns. dlogits may be the logits
  //                     tensor itself (computed in place).
  // count 0 adds 0 and gives zero dlogits. grad_scale carries the fp16 loss scale.
  virtual void SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets, int32_t ignore_index,
                                        const Tensor& count, float grad_scale, const Tensor& loss,
                                        const Tensor* dlogits) = 0;
  // The whole batch in one chunk: logits act [M, V], loss (f32 [1]) = the mean
  // over counted rows of -log softmax(logits)[target], dlogits act [M, V]
  // (CountTargets, then SoftmaxCrossEntropyChunk with v = ld = V).
  void SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index, float grad_scale,
                           const Tensor& loss, const Tensor& dlogits);
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_BACKEND_H_
