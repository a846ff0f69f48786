// CudaBackend: convolution and batch norm through cuDNN, max pooling through
// our kernels (first-maximum routing, see engine/kernels/pooling.h).
//
// Mixed precision: x, y, dy and dx are 16-bit activations and the weights
// arrive as their 16-bit operand copies; cuDNN convolves them on tensor cores
// with fp32 accumulation. The filter gradient comes out in 16 bits (cuDNN
// wants the filter's type) into scratch, then is added into the f32 dw.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/pooling.h"
#include "engine/kernels/reduce.h"

namespace ringmaster::engine {
namespace {

cudnnDataType_t CudnnType(DType t) {
  return t == DType::kF16 ? CUDNN_DATA_HALF : t == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

ConvKey MakeConvKey(const Tensor& x, const Tensor& w, const Conv2dGeometry& g, bool tf32) {
  ENGINE_CHECK(x.rank() == 4 && w.rank() == 4 && w.dim(1) == x.dim(1) && w.dim(2) == g.kernel_h &&
                   w.dim(3) == g.kernel_w,
               "conv x {} w {}", ShapeString(x.shape()), ShapeString(w.shape()));
  const bool half = x.dtype() != DType::kF32;
  return ConvKey{x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0),  g.kernel_h, g.kernel_w,
                 g.stride_h, g.stride_w, g.pad_h, g.pad_w, tf32 || half, CudnnType(x.dtype())};
}

void CheckConvOut(const ConvKey& k, const Tensor& y, const char* what) {
  const int64_t oh = Conv2dGeometry::OutSize(k.h, k.kh, k.sh, k.ph);
  const int64_t ow = Conv2dGeometry::OutSize(k.w, k.kw, k.sw, k.pw);
  ENGINE_CHECK(y.rank() == 4 && y.dim(0) == k.n && y.dim(1) == k.o && y.dim(2) == oh && y.dim(3) == ow,
               "{} {} for [{}, {}, {}, {}]", what, ShapeString(y.shape()), k.n, k.o, oh, ow);
}

}  // namespace

void CudaBackend::Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                                const Tensor& y) {
  const DType act = impl_->act_dtype();
  CheckDeviceAct(x, act, "conv x");
  CheckDeviceAct(w, act, "conv w (its operand copy)");
  CheckDeviceAct(y, act, "conv y");
  const ConvKey key = MakeConvKey(x, w, g, config_.tf32);
  CheckConvOut(key, y, "conv y");
  if (bias != nullptr) {
    CheckDeviceAct(*bias, act, "conv bias (its operand copy)");
    ENGINE_CHECK(bias->numel() == key.o, "conv bias {} for {} channels", ShapeString(bias->shape()), key.o);
  }
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const ConvPlan* plan, impl_->conv_algos.Get(impl_->cudnn, key));
    ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch((plan->fwd_workspace + 3) / 4));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(impl_->cudnn, &one, plan->x.get(), x.raw(), plan->w.get(), w.raw(),
                                                  plan->conv.get(), plan->fwd_algo, workspace.raw(),
                                                  plan->fwd_workspace, &zero, plan->y.get(), y.raw()));
    if (bias != nullptr) {
      CUDNN_RETURN_IF_ERROR(
          cudnnAddTensor(impl_->cudnn, &one, plan->bias.get(), bias->raw(), &one, plan->y.get(), y.raw()));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                                 const Tensor* dx, const Tensor& dw, const Tensor* dbias) {
  const DType act = impl_->act_dtype();
  CheckDeviceAct(x, act, "conv x");
  CheckDeviceAct(w, act, "conv w (its operand copy)");
  CheckDeviceAct(dy, act, "conv dy");
  CheckDeviceF32(dw, "conv dw");
  const ConvKey key = MakeConvKey(x, w, g, config_.tf32);
  CheckConvOut(key, dy, "conv dy");
  ENGINE_CHECK(dw.shape() == w.shape(), "conv dw {}", ShapeString(dw.shape()));
  if (dx != nullptr) {
    CheckDeviceAct(*dx, act, "conv dx");
    ENGINE_CHECK(dx->shape() == x.shape(), "conv dx {}", ShapeString(dx->shape()));
  }
  if (dbias != nullptr) {
    CheckDeviceF32(*dbias, "conv dbias");
    ENGINE_CHECK(dbias->numel() == key.o, "conv dbias {}", ShapeString(dbias->shape()));
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    ASSIGN_OR_RETURN(const ConvPlan* plan, impl_->conv_algos.Get(impl_->cudnn, key));
    const float one = 1.0f, zero = 0.0f;
    const size_t ws_bytes = std::max(plan->bwd_data_workspace, plan->bwd_filter_workspace);
    ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch((ws_bytes + 3) / 4));
    if (dx != nullptr) {
      CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(impl_->cudnn, &one, plan->w.get(), w.raw(), plan->y.get(),
                                                         dy.raw(), plan->conv.get(), plan->bwd_data_algo,
                                                         workspace.raw(), plan->bwd_data_workspace, &zero,
                                                         plan->x.get(), dx->raw()));
    }
    if (act == DType::kF32) {  // dw += the new gradient, accumulated by cuDNN (beta = 1)
      CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(impl_->cudnn, &one, plan->x.get(), x.raw(), plan->y.get(),
                                                           dy.raw(), plan->conv.get(), plan->bwd_filter_algo,
                                                           workspace.raw(), plan->bwd_filter_workspace, &one,
                                                           plan->w.get(), dw.raw()));
    } else {  // the filter's type: 16-bit scratch, then added into the f32 dw
      ASSIGN_OR_RETURN(Tensor dw_new, impl_->NewTensor(dw.shape(), act));
      CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(impl_->cudnn, &one, plan->x.get(), x.raw(), plan->y.get(),
                                                           dy.raw(), plan->conv.get(), plan->bwd_filter_algo,
                                                           workspace.raw(), plan->bwd_filter_workspace, &zero,
                                                           plan->w.get(), dw_new.raw()));
      CUDA_RETURN_IF_ERROR(kernels::LaunchAccumulate(dw_new.raw(), impl_->act(), F32(dw), dw.numel(), s));
    }
    if (dbias != nullptr) {
      const int64_t ohw = dy.dim(2) * dy.dim(3);
      CUDA_RETURN_IF_ERROR(kernels::LaunchChannelSum(dy.raw(), impl_->act(), key.n, key.o, ohw, F32(*dbias), s));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) {
  CheckDeviceAct(x, impl_->act_dtype(), "maxpool x");
  CheckDeviceAct(y, impl_->act_dtype(), "maxpool y");
  ENGINE_CHECK(x.rank() == 4 && y.rank() == 4 && k >= 1 && s >= 1, "maxpool shapes");
  const int64_t h = x.dim(2), w = x.dim(3);
  ENGINE_CHECK(x.dim(0) == y.dim(0) && x.dim(1) == y.dim(1) && y.dim(2) == (h - k) / s + 1 &&
                   y.dim(3) == (w - k) / s + 1,
               "maxpool y {} for x {}", ShapeString(y.shape()), ShapeString(x.shape()));
  RM_CUDA_OP(kernels::LaunchMaxPoolForward(x.raw(), impl_->act(), x.dim(0) * x.dim(1), h, w, k, s, y.raw(),
                                           compute_stream()));
}

void CudaBackend::MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) {
  CheckDeviceAct(x, impl_->act_dtype(), "maxpool x");
  CheckDeviceAct(dy, impl_->act_dtype(), "maxpool dy");
  CheckDeviceAct(dx, impl_->act_dtype(), "maxpool dx");
  ENGINE_CHECK(dx.shape() == x.shape() && dy.rank() == 4 && k >= 1 && s >= 1, "maxpool backward shapes");
  const int64_t h = x.dim(2), w = x.dim(3);
  ENGINE_CHECK(dy.dim(2) == (h - k) / s + 1 && dy.dim(3) == (w - k) / s + 1, "maxpool dy {}",
               ShapeString(dy.shape()));
  RM_CUDA_OP(kernels::LaunchMaxPoolBackward(x.raw(), dy.raw(), impl_->act(), x.dim(0) * x.dim(1), h, w, k, s,
                                            dx.raw(), compute_stream()));
}

}  // namespace ringmaster::engine
