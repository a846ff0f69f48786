// CudaBackend: activations, dropout, embedding and the fused softmax
// cross-entropy (our kernels). Attention: cuda_attention.cc.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/softmax_ce.h"

namespace ringmaster::engine {

// ------------------------------------------------------------- activations

void CudaBackend::ReluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceF32(x, "Relu x");
  CheckDeviceF32(y, "Relu y");
  CheckSameNumelCuda(x, y, "Relu");
  RM_CUDA_OP(kernels::LaunchRelu(F32(x), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CheckDeviceF32(y, "ReluBackward y");
  CheckDeviceF32(dy, "ReluBackward dy");
  CheckDeviceF32(dx, "ReluBackward dx");
  CheckSameNumelCuda(y, dy, "ReluBackward");
  CheckSameNumelCuda(y, dx, "ReluBackward");
  RM_CUDA_OP(kernels::LaunchReluBackward(F32(y), F32(dy), F32(dx), y.numel(), compute_stream()));
}

void CudaBackend::GeluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceF32(x, "Gelu x");
  CheckDeviceF32(y, "Gelu y");
  CheckSameNumelCuda(x, y, "Gelu");
  RM_CUDA_OP(kernels::LaunchGelu(F32(x), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  CheckDeviceF32(x, "GeluBackward x");
  CheckDeviceF32(dy, "GeluBackward dy");
  CheckDeviceF32(dx, "GeluBackward dx");
  CheckSameNumelCuda(x, dy, "GeluBackward");
  CheckSameNumelCuda(x, dx, "GeluBackward");
  RM_CUDA_OP(kernels::LaunchGeluBackward(F32(x), F32(dy), F32(dx), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  CheckDeviceF32(x, "Dropout x");
  CheckDeviceF32(mask, "Dropout mask");
  CheckDeviceF32(y, "Dropout y");
  CheckSameNumelCuda(x, mask, "Dropout");
  CheckSameNumelCuda(x, y, "Dropout");
  ENGINE_CHECK(p >= 0.0f && p < 1.0f, "dropout p = {}", p);
  RM_CUDA_OP(kernels::LaunchDropout(F32(x), p, key, F32(mask), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  CheckDeviceF32(dy, "DropoutBackward dy");
  CheckDeviceF32(mask, "DropoutBackward mask");
  CheckDeviceF32(dx, "DropoutBackward dx");
  CheckSameNumelCuda(dy, mask, "DropoutBackward");
  CheckSameNumelCuda(dy, dx, "DropoutBackward");
  RM_CUDA_OP(kernels::LaunchMul(F32(dy), F32(mask), F32(dx), dy.numel(), impl_->round(), compute_stream()));
}

// --------------------------------------------------------------- embedding

void CudaBackend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceF32(wte, "wte");
  CheckDeviceF32(wpe, "wpe");
  CheckDeviceF32(out, "embedding out");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = wte.dim(0), c = wte.dim(1);
  ENGINE_CHECK(wpe.dim(1) == c && wpe.dim(0) >= t && out.numel() == b * t * c, "embedding shapes");
  RM_CUDA_OP(kernels::LaunchEmbeddingForward(I32(tokens), F32(wte), F32(wpe), b, t, v, c, F32(out), impl_->round(),
                                             compute_stream()));
}

void CudaBackend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                    const Tensor& dwpe) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceF32(dout, "embedding dout");
  CheckDeviceF32(dwte, "dwte");
  CheckDeviceF32(dwpe, "dwpe");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = dwte.dim(0), c = dwte.dim(1);
  ENGINE_CHECK(dwpe.dim(1) == c && dwpe.dim(0) >= t && dout.numel() == b * t * c, "embedding backward shapes");
  RM_CUDA_OP(
      kernels::LaunchEmbeddingBackward(I32(tokens), F32(dout), b, t, v, c, F32(dwte), F32(dwpe), compute_stream()));
}

// -------------------------------------------------------------------- loss

void CudaBackend::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                      float grad_scale, const Tensor& loss, const Tensor& dlogits) {
  CheckDeviceF32(logits, "logits");
  CheckDeviceF32(loss, "loss");
  CheckDeviceF32(dlogits, "dlogits");
  ENGINE_CHECK(targets.dtype() == DType::kI32 && targets.device() == Device::kCuda, "targets must be i32 on the device");
  const int64_t v = logits.dim(-1), m = v == 0 ? 0 : logits.numel() / v;
  ENGINE_CHECK(targets.numel() == m && dlogits.numel() == logits.numel() && loss.numel() == 1,
               "softmax xent: logits {} targets {}", ShapeString(logits.shape()), ShapeString(targets.shape()));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::SoftmaxCrossEntropyScratchFloats(m)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSoftmaxCrossEntropy(F32(logits), I32(targets), m, v, ignore_index,
                                                            grad_scale, F32(scratch), F32(loss), F32(dlogits),
                                                            impl_->round(), compute_stream()));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
