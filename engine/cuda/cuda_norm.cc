// CudaBackend: BatchNorm2d through cuDNN (spatial mode), LayerNorm through our
// fused kernels (also with the residual add fused in: AddLayerNormForward and
// AddLayerNormBackward). Statistics and parameter gradients are fp32; x, y,
// dy and dx are activations (16-bit with a 16-bit compute dtype). cuDNN's
// batch norm runs in fp32 on widened copies of 16-bit activations (the CNN's
// small tensors; the LayerNorm kernels read and write 16 bits themselves).
//
// cuDNN's running statistics follow PyTorch's contract (PyTorch passes its
// momentum as cuDNN's exponentialAverageFactor): r = (1 - f) r + f stat, the
// variance unbiased (n / (n - 1)); resultSaveInvVariance is 1 / sqrt(var +
// eps) with the biased variance, our save_invstd. cuDNN rejects eps below
// CUDNN_BN_MIN_EPSILON (1e-5): such a call reports CUDNN_STATUS_BAD_PARAM.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/layernorm.h"
#include "engine/kernels/reduce.h"

namespace ringmaster::engine {
namespace {

struct BnDescs {
  CudnnTensorDesc x, param;
};

absl::StatusOr<BnDescs> MakeBnDescs(const Tensor& x) {
  ENGINE_CHECK(x.rank() == 4, "bn x must be NCHW, got {}", ShapeString(x.shape()));
  BnDescs d;
  ASSIGN_OR_RETURN(d.x, MakeTensorDesc(x.dim(0), x.dim(1), x.dim(2), x.dim(3)));
  ASSIGN_OR_RETURN(d.param, MakeTensorDesc(1, x.dim(1), 1, 1));
  return d;
}

// An activation as f32: the tensor itself (f32 compute), else a widened copy
// in scratch.
template <typename Impl>
absl::StatusOr<Tensor> Widened(Impl& impl, const Tensor& act, cudaStream_t s) {
  if (act.dtype() == DType::kF32) return act;
  ASSIGN_OR_RETURN(Tensor wide, impl.Scratch(act.numel()));
  CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(act.raw(), AsFloatType(act.dtype()), wide.raw(),
                                              kernels::FloatType::kF32, act.numel(), s));
  return wide.View(act.shape());
}

// Where an op writes an f32 result for the activation `act`: act itself, or
// scratch that Narrow then stores into act.
template <typename Impl>
absl::StatusOr<Tensor> WideOutput(Impl& impl, const Tensor& act) {
  if (act.dtype() == DType::kF32) return act;
  ASSIGN_OR_RETURN(Tensor wide, impl.Scratch(act.numel()));
  return wide.View(act.shape());
}

absl::Status Narrow(const Tensor& wide, const Tensor& act, cudaStream_t s) {
  if (wide.raw() == act.raw()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(wide.raw(), kernels::FloatType::kF32, act.raw(),
                                              AsFloatType(act.dtype()), act.numel(), s));
  return absl::OkStatus();
}

void CheckChannelVecs(std::initializer_list<const Tensor*> ts, int64_t c) {
  for (const Tensor* t : ts) {
    CheckDeviceF32(*t, "bn channel vector");
    ENGINE_CHECK(t->numel() == c, "bn channel vector {} for {} channels", ShapeString(t->shape()), c);
  }
}

}  // namespace

void CudaBackend::BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float momentum,
                                          float eps, const Tensor& running_mean, const Tensor& running_var,
                                          const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  CheckDeviceAct(x, impl_->act_dtype(), "bn x");
  CheckDeviceAct(y, impl_->act_dtype(), "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()),
               ShapeString(y.shape()));
  CheckChannelVecs({&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd}, x.dim(1));
  ENGINE_CHECK(x.dim(0) * x.dim(2) * x.dim(3) > 1, "batch norm needs more than one value per channel");
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    ASSIGN_OR_RETURN(Tensor wx, Widened(*impl_, x, s));
    ASSIGN_OR_RETURN(Tensor wy, WideOutput(*impl_, y));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationForwardTraining(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), wx.raw(), d.x.get(), wy.raw(), d.param.get(),
        F32(gamma), F32(beta), momentum, F32(running_mean), F32(running_var), eps, F32(save_mean),
        F32(save_invstd)));
    return Narrow(wy, y, s);
  });
}

void CudaBackend::BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, float eps,
                                         const Tensor& y) {
  CheckDeviceAct(x, impl_->act_dtype(), "bn x");
  CheckDeviceAct(y, impl_->act_dtype(), "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()),
               ShapeString(y.shape()));
  CheckChannelVecs({&gamma, &beta, &running_mean, &running_var}, x.dim(1));
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    ASSIGN_OR_RETURN(Tensor wx, Widened(*impl_, x, s));
    ASSIGN_OR_RETURN(Tensor wy, WideOutput(*impl_, y));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationForwardInference(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), wx.raw(), d.x.get(), wy.raw(), d.param.get(),
        F32(gamma), F32(beta), F32(running_mean), F32(running_var), eps));
    return Narrow(wy, y, s);
  });
}

void CudaBackend::BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                                      const Tensor& dgamma, const Tensor& dbeta) {
  CheckDeviceAct(x, impl_->act_dtype(), "bn x");
  CheckDeviceAct(dy, impl_->act_dtype(), "bn dy");
  CheckDeviceAct(dx, impl_->act_dtype(), "bn dx");
  ENGINE_CHECK(x.rank() == 4 && dy.shape() == x.shape() && dx.shape() == x.shape(), "bn backward shapes");
  CheckChannelVecs({&gamma, &save_mean, &save_invstd, &dgamma, &dbeta}, x.dim(1));
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    ASSIGN_OR_RETURN(Tensor wx, Widened(*impl_, x, s));
    ASSIGN_OR_RETURN(Tensor wdy, Widened(*impl_, dy, s));
    ASSIGN_OR_RETURN(Tensor wdx, WideOutput(*impl_, dx));
    const float one = 1.0f, zero = 0.0f;
    // The saved statistics carry eps already; cuDNN only checks its range.
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationBackward(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, d.x.get(), wx.raw(), d.x.get(), wdy.raw(),
        d.x.get(), wdx.raw(), d.param.get(), F32(gamma), F32(dgamma), F32(dbeta), CUDNN_BN_MIN_EPSILON,
        F32(save_mean), F32(save_invstd)));
    return Narrow(wdx, dx, s);
  });
}

void CudaBackend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                   const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  CheckDeviceAct(x, impl_->act_dtype(), "ln x");
  CheckDeviceAct(y, impl_->act_dtype(), "ln y");
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ENGINE_CHECK(y.numel() == x.numel(), "ln y");
  CheckChannelVecs({&gamma, &beta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
  RM_CUDA_OP(kernels::LaunchLayerNormForward(x.raw(), F32(gamma), F32(beta), eps, rows, c, y.raw(), F32(mean),
                                             F32(rstd), impl_->act(), compute_stream()));
}

void CudaBackend::AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                      float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                                      const Tensor& rstd) {
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&a, "add-ln a"}, {&b, "add-ln b"},
                                {&sum, "add-ln sum"}, {&y, "add-ln y"}}) {
    CheckDeviceAct(*t, impl_->act_dtype(), what);
  }
  const int64_t c = a.dim(-1), rows = c == 0 ? 0 : a.numel() / c;
  ENGINE_CHECK(b.numel() == a.numel() && sum.numel() == a.numel() && y.numel() == a.numel(), "add-ln shapes");
  CheckChannelVecs({&gamma, &beta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
  RM_CUDA_OP(kernels::LaunchAddLayerNormForward(a.raw(), b.raw(), F32(gamma), F32(beta), eps, rows, c, sum.raw(),
                                                y.raw(), F32(mean), F32(rstd), impl_->act(), compute_stream()));
}

namespace {

// LayerNormBackward's body, dx = residual + g when residual is not null.
// (A template so that it can take the backend's private Impl.)
template <typename Impl>
absl::Status LayerNormBackwardOn(Impl& impl, cudaStream_t s, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                 const Tensor& mean, const Tensor& rstd, const void* residual, const Tensor& dx,
                                 const Tensor& dgamma, const Tensor& dbeta) {
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ASSIGN_OR_RETURN(Tensor dy_xhat, impl.Scratch(rows * c));
  ASSIGN_OR_RETURN(Tensor partial, impl.Scratch(kernels::ColumnSumScratchFloats(rows, c)));
  // dbeta first: dx may alias dy.
  CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(dy.raw(), impl.act(), rows, c, F32(partial), F32(dbeta),
                                                /*accumulate=*/true, s));
  CUDA_RETURN_IF_ERROR(kernels::LaunchLayerNormBackward(x.raw(), dy.raw(), F32(gamma), F32(mean), F32(rstd),
                                                        residual, rows, c, dx.raw(), F32(dy_xhat), impl.act(), s));
  CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(dy_xhat.raw(), kernels::FloatType::kF32, rows, c, F32(partial),
                                                F32(dgamma), /*accumulate=*/true, s));
  return absl::OkStatus();
}

void CheckLnBackward(DType act, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                     const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  CheckDeviceAct(x, act, "ln x");
  CheckDeviceAct(dy, act, "ln dy");
  CheckDeviceAct(dx, act, "ln dx");
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ENGINE_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel(), "ln backward shapes");
  CheckChannelVecs({&gamma, &dgamma, &dbeta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
}

}  // namespace

void CudaBackend::LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                                    const Tensor& dbeta) {
  CheckLnBackward(impl_->act_dtype(), x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  impl_->Run([&] {
    return LayerNormBackwardOn(*impl_, compute_stream(), x, dy, gamma, mean, rstd, nullptr, dx, dgamma, dbeta);
  });
}

void CudaBackend::AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& residual, const Tensor& dx,
                                       const Tensor& dgamma, const Tensor& dbeta) {
  CheckLnBackward(impl_->act_dtype(), x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  CheckDeviceAct(residual, impl_->act_dtype(), "ln residual");
  ENGINE_CHECK(residual.numel() == x.numel(), "ln residual {}", ShapeString(residual.shape()));
  ENGINE_CHECK(dx.raw() != x.raw() && dx.raw() != dy.raw(), "AddLayerNormBackward: dx aliases x or dy");
  impl_->Run([&] {
    return LayerNormBackwardOn(*impl_, compute_stream(), x, dy, gamma, mean, rstd, residual.raw(), dx, dgamma,
                               dbeta);
  });
}

}  // namespace ringmaster::engine
