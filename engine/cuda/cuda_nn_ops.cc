// CudaBackend: activations, dropout, embedding and the fused softmax
// cross-entropy (our kernels), activations in the activation dtype.
// Attention: cuda_attention.cc.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/softmax_ce.h"

namespace ringmaster::engine {

// ------------------------------------------------------------- activations

void CudaBackend::ReluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceAct(x, impl_->act_dtype(), "Relu x");
  CheckDeviceAct(y, impl_->act_dtype(), "Relu y");
  CheckSameNumelCuda(x, y, "Relu");
  RM_CUDA_OP(kernels::LaunchRelu(x.raw(), y.raw(), x.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CheckDeviceAct(y, impl_->act_dtype(), "ReluBackward y");
  CheckDeviceAct(dy, impl_->act_dtype(), "ReluBackward dy");
  CheckDeviceAct(dx, impl_->act_dtype(), "ReluBackward dx");
  CheckSameNumelCuda(y, dy, "ReluBackward");
  CheckSameNumelCuda(y, dx, "ReluBackward");
  RM_CUDA_OP(kernels::LaunchReluBackward(y.raw(), dy.raw(), dx.raw(), y.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::GeluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceAct(x, impl_->act_dtype(), "Gelu x");
  CheckDeviceAct(y, impl_->act_dtype(), "Gelu y");
  CheckSameNumelCuda(x, y, "Gelu");
  RM_CUDA_OP(kernels::LaunchGelu(x.raw(), y.raw(), x.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  CheckDeviceAct(x, impl_->act_dtype(), "GeluBackward x");
  CheckDeviceAct(dy, impl_->act_dtype(), "GeluBackward dy");
  CheckDeviceAct(dx, impl_->act_dtype(), "GeluBackward dx");
  CheckSameNumelCuda(x, dy, "GeluBackward");
  CheckSameNumelCuda(x, dx, "GeluBackward");
  RM_CUDA_OP(kernels::LaunchGeluBackward(x.raw(), dy.raw(), dx.raw(), x.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  CheckDeviceAct(x, impl_->act_dtype(), "Dropout x");
  CheckDeviceF32(mask, "Dropout mask");
  CheckDeviceAct(y, impl_->act_dtype(), "Dropout y");
  CheckSameNumelCuda(x, mask, "Dropout");
  CheckSameNumelCuda(x, y, "Dropout");
  ENGINE_CHECK(p >= 0.0f && p < 1.0f, "dropout p = {}", p);
  RM_CUDA_OP(kernels::LaunchDropout(x.raw(), p, key, F32(mask), y.raw(), x.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  CheckDeviceAct(dy, impl_->act_dtype(), "DropoutBackward dy");
  CheckDeviceF32(mask, "DropoutBackward mask");
  CheckDeviceAct(dx, impl_->act_dtype(), "DropoutBackward dx");
  CheckSameNumelCuda(dy, mask, "DropoutBackward");
  CheckSameNumelCuda(dy, dx, "DropoutBackward");
  RM_CUDA_OP(kernels::LaunchMul(dy.raw(), F32(mask), dx.raw(), dy.numel(), impl_->act(), compute_stream()));
}

// --------------------------------------------------------------- embedding

void CudaBackend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceF32(wte, "wte");
  CheckDeviceF32(wpe, "wpe");
  CheckDeviceAct(out, impl_->act_dtype(), "embedding out");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = wte.dim(0), c = wte.dim(1);
  ENGINE_CHECK(wpe.dim(1) == c && wpe.dim(0) >= t && out.numel() == b * t * c, "embedding shapes");
  RM_CUDA_OP(kernels::LaunchEmbeddingForward(I32(tokens), F32(wte), F32(wpe), b, t, v, c, out.raw(), impl_->act(),
                                             compute_stream()));
}

void CudaBackend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                    const Tensor& dwpe) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceAct(dout, impl_->act_dtype(), "embedding dout");
  CheckDeviceF32(dwte, "dwte");
  CheckDeviceF32(dwpe, "dwpe");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = dwte.dim(0), c = dwte.dim(1);
  ENGINE_CHECK(dwpe.dim(1) == c && dwpe.dim(0) >= t && dout.numel() == b * t * c, "embedding backward shapes");
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::EmbeddingBackwardScratchFloats(b * t, c)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchEmbeddingBackward(I32(tokens), dout.raw(), impl_->act(), b, t, v, c,
                                                          F32(dwte), F32(dwpe), F32(scratch), compute_stream()));
    return absl::OkStatus();
  });
}

// -------------------------------------------------------------------- loss

void CudaBackend::CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) {
  ENGINE_CHECK(targets.dtype() == DType::kI32 && targets.device() == Device::kCuda, "targets must be i32 on the device");
  CheckDeviceF32(count, "count");
  ENGINE_CHECK(count.numel() == 1, "count must have one element");
  RM_CUDA_OP(kernels::LaunchCountTargets(I32(targets), targets.numel(), ignore_index, F32(count), compute_stream()));
}

void CudaBackend::SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets,
                                           int32_t ignore_index, const Tensor& count, float grad_scale,
                                           const Tensor& loss, const Tensor* dlogits) {
  CheckDeviceAct(logits, impl_->act_dtype(), "logits");
  CheckDeviceF32(loss, "loss");
  CheckDeviceF32(count, "count");
  ENGINE_CHECK(targets.dtype() == DType::kI32 && targets.device() == Device::kCuda, "targets must be i32 on the device");
  const int64_t ld = logits.dim(-1), m = ld == 0 ? 0 : logits.numel() / ld;
  ENGINE_CHECK(v > 0 && v <= ld && targets.numel() == m && loss.numel() == 1 && count.numel() == 1,
               "softmax xent: logits {} with {} real columns, targets {}", ShapeString(logits.shape()), v,
               ShapeString(targets.shape()));
  if (dlogits != nullptr) {
    CheckDeviceAct(*dlogits, impl_->act_dtype(), "dlogits");
    ENGINE_CHECK(dlogits->numel() == logits.numel(), "dlogits {}", ShapeString(dlogits->shape()));
  }
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::SoftmaxCrossEntropyScratchFloats(m)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSoftmaxCrossEntropy(
        logits.raw(), impl_->act(), m, v, ld, I32(targets), ignore_index, F32(count), grad_scale, F32(scratch),
        F32(loss), dlogits != nullptr ? dlogits->raw() : nullptr, compute_stream()));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
