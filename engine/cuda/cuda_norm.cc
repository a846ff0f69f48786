// CudaBackend: BatchNorm2d through cuDNN (spatial mode), LayerNorm through our
// fused kernels (also with the residual add fused in: AddLayerNormForward and
// AddLayerNormBackward). Statistics are fp32; parameter gradients are not
// rounded and y/dx are rounded to the compute dtype, as on the CPU.
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
  CheckDeviceF32(x, "bn x");
  CheckDeviceF32(y, "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()),
               ShapeString(y.shape()));
  CheckChannelVecs({&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd}, x.dim(1));
  ENGINE_CHECK(x.dim(0) * x.dim(2) * x.dim(3) > 1, "batch norm needs more than one value per channel");
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationForwardTraining(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), F32(x), d.x.get(), F32(y), d.param.get(),
        F32(gamma), F32(beta), momentum, F32(running_mean), F32(running_var), eps, F32(save_mean),
        F32(save_invstd)));
    if (impl_->mixed()) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(F32(y), F32(y), y.numel(), impl_->round(), compute_stream()));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, float eps,
                                         const Tensor& y) {
  CheckDeviceF32(x, "bn x");
  CheckDeviceF32(y, "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()),
               ShapeString(y.shape()));
  CheckChannelVecs({&gamma, &beta, &running_mean, &running_var}, x.dim(1));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationForwardInference(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), F32(x), d.x.get(), F32(y), d.param.get(),
        F32(gamma), F32(beta), F32(running_mean), F32(running_var), eps));
    if (impl_->mixed()) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(F32(y), F32(y), y.numel(), impl_->round(), compute_stream()));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                                      const Tensor& dgamma, const Tensor& dbeta) {
  CheckDeviceF32(x, "bn x");
  CheckDeviceF32(dy, "bn dy");
  CheckDeviceF32(dx, "bn dx");
  ENGINE_CHECK(x.rank() == 4 && dy.shape() == x.shape() && dx.shape() == x.shape(), "bn backward shapes");
  CheckChannelVecs({&gamma, &save_mean, &save_invstd, &dgamma, &dbeta}, x.dim(1));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(BnDescs d, MakeBnDescs(x));
    const float one = 1.0f, zero = 0.0f;
    // The saved statistics carry eps already; cuDNN only checks its range.
    CUDNN_RETURN_IF_ERROR(cudnnBatchNormalizationBackward(
        impl_->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, d.x.get(), F32(x), d.x.get(), F32(dy),
        d.x.get(), F32(dx), d.param.get(), F32(gamma), F32(dgamma), F32(dbeta), CUDNN_BN_MIN_EPSILON,
        F32(save_mean), F32(save_invstd)));
    if (impl_->mixed()) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(F32(dx), F32(dx), dx.numel(), impl_->round(), compute_stream()));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                   const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  CheckDeviceF32(x, "ln x");
  CheckDeviceF32(y, "ln y");
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ENGINE_CHECK(y.numel() == x.numel(), "ln y");
  CheckChannelVecs({&gamma, &beta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
  RM_CUDA_OP(kernels::LaunchLayerNormForward(F32(x), F32(gamma), F32(beta), eps, rows, c, F32(y), F32(mean), F32(rstd),
                                             impl_->round(), compute_stream()));
}

void CudaBackend::AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                      float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                                      const Tensor& rstd) {
  CheckDeviceF32(a, "add-ln a");
  CheckDeviceF32(b, "add-ln b");
  CheckDeviceF32(sum, "add-ln sum");
  CheckDeviceF32(y, "add-ln y");
  const int64_t c = a.dim(-1), rows = c == 0 ? 0 : a.numel() / c;
  ENGINE_CHECK(b.numel() == a.numel() && sum.numel() == a.numel() && y.numel() == a.numel(), "add-ln shapes");
  CheckChannelVecs({&gamma, &beta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
  RM_CUDA_OP(kernels::LaunchAddLayerNormForward(F32(a), F32(b), F32(gamma), F32(beta), eps, rows, c, F32(sum), F32(y),
                                                F32(mean), F32(rstd), impl_->round(), compute_stream()));
}

namespace {

// LayerNormBackward's body, dx = residual + g when residual is not null.
// (A template so that it can take the backend's private Impl.)
template <typename Impl>
absl::Status LayerNormBackwardOn(Impl& impl, cudaStream_t s, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                 const Tensor& mean, const Tensor& rstd, const float* residual, const Tensor& dx,
                                 const Tensor& dgamma, const Tensor& dbeta) {
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ASSIGN_OR_RETURN(Tensor dy_xhat, impl.Scratch(rows * c));
  ASSIGN_OR_RETURN(Tensor partial, impl.Scratch(kernels::ColumnSumScratchFloats(rows, c)));
  // dbeta first: dx may alias dy.
  CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(F32(dy), rows, c, F32(partial), F32(dbeta), /*accumulate=*/true,
                                                kernels::FloatType::kF32, s));
  CUDA_RETURN_IF_ERROR(kernels::LaunchLayerNormBackward(F32(x), F32(dy), F32(gamma), F32(mean), F32(rstd), residual,
                                                        rows, c, F32(dx), F32(dy_xhat), impl.round(), s));
  CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(F32(dy_xhat), rows, c, F32(partial), F32(dgamma),
                                                /*accumulate=*/true, kernels::FloatType::kF32, s));
  return absl::OkStatus();
}

void CheckLnBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                     const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  CheckDeviceF32(x, "ln x");
  CheckDeviceF32(dy, "ln dy");
  CheckDeviceF32(dx, "ln dx");
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  ENGINE_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel(), "ln backward shapes");
  CheckChannelVecs({&gamma, &dgamma, &dbeta}, c);
  CheckChannelVecs({&mean, &rstd}, rows);
}

}  // namespace

void CudaBackend::LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                                    const Tensor& dbeta) {
  CheckLnBackward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  impl_->Run([&] {
    return LayerNormBackwardOn(*impl_, compute_stream(), x, dy, gamma, mean, rstd, nullptr, dx, dgamma, dbeta);
  });
}

void CudaBackend::AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& residual, const Tensor& dx,
                                       const Tensor& dgamma, const Tensor& dbeta) {
  CheckLnBackward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  CheckDeviceF32(residual, "ln residual");
  ENGINE_CHECK(residual.numel() == x.numel(), "ln residual {}", ShapeString(residual.shape()));
  ENGINE_CHECK(dx.raw() != x.raw() && dx.raw() != dy.raw(), "AddLayerNormBackward: dx aliases x or dy");
  impl_->Run([&] {
    return LayerNormBackwardOn(*impl_, compute_stream(), x, dy, gamma, mean, rstd, F32(residual), dx, dgamma, dbeta);
  });
}

}  // namespace ringmaster::engine
