// CudaBackend: convolution and batch norm through cuDNN, max pooling through
// our kernels (first-maximum routing, see engine/kernels/pooling.h).
//
// Mixed precision: operands are rounded to the compute dtype (into scratch)
// and convolved in fp32 on TF32 tensor cores. TF32 keeps 10 mantissa bits, as
// many as fp16 and more than bf16, so the products of rounded operands are
// exact and accumulate in fp32: the CPU's "round operands, accumulate fp32,
// round the output" semantics, on tensor cores.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/pooling.h"
#include "engine/kernels/reduce.h"

namespace ringmaster::engine {
namespace {

ConvKey MakeConvKey(const Tensor& x, const Tensor& w, const Conv2dGeometry& g, bool tensor_ops) {
  ENGINE_CHECK(x.rank() == 4 && w.rank() == 4 && w.dim(1) == x.dim(1) && w.dim(2) == g.kernel_h &&
                   w.dim(3) == g.kernel_w,
               "conv x {} w {}", ShapeString(x.shape()), ShapeString(w.shape()));
  return ConvKey{x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), g.kernel_h, g.kernel_w,
                 g.stride_h, g.stride_w, g.pad_h, g.pad_w, tensor_ops};
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
  CheckDeviceF32(x, "conv x");
  CheckDeviceF32(w, "conv w");
  CheckDeviceF32(y, "conv y");
  const ConvKey key = MakeConvKey(x, w, g, config_.tf32 || impl_->mixed());
  CheckConvOut(key, y, "conv y");
  if (bias != nullptr) {
    CheckDeviceF32(*bias, "conv bias");
    ENGINE_CHECK(bias->numel() == key.o, "conv bias {} for {} channels", ShapeString(bias->shape()), key.o);
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    ASSIGN_OR_RETURN(const ConvPlan* plan, impl_->conv_algos.Get(impl_->cudnn, key));
    const float* xp = F32(x);
    const float* wp = F32(w);
    Tensor rx, rw;
    if (impl_->mixed()) {
      ASSIGN_OR_RETURN(rx, impl_->Scratch(x.numel()));
      ASSIGN_OR_RETURN(rw, impl_->Scratch(w.numel()));
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(xp, F32(rx), x.numel(), impl_->round(), s));
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(wp, F32(rw), w.numel(), impl_->round(), s));
      xp = F32(rx);
      wp = F32(rw);
    }
    ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch((plan->fwd_workspace + 3) / 4));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(impl_->cudnn, &one, plan->x.get(), xp, plan->w.get(), wp,
                                                  plan->conv.get(), plan->fwd_algo, workspace.raw(),
                                                  plan->fwd_workspace, &zero, plan->y.get(), F32(y)));
    if (bias != nullptr) {
      const float* bp = F32(*bias);
      Tensor rb;
      if (impl_->mixed()) {
        ASSIGN_OR_RETURN(rb, impl_->Scratch(key.o));
        CUDA_RETURN_IF_ERROR(kernels::LaunchRound(bp, F32(rb), key.o, impl_->round(), s));
        bp = F32(rb);
      }
      CUDNN_RETURN_IF_ERROR(cudnnAddTensor(impl_->cudnn, &one, plan->bias.get(), bp, &one, plan->y.get(), F32(y)));
    }
    if (impl_->mixed()) CUDA_RETURN_IF_ERROR(kernels::LaunchRound(F32(y), F32(y), y.numel(), impl_->round(), s));
    return absl::OkStatus();
  });
}

void CudaBackend::Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                                 const Tensor* dx, const Tensor& dw, const Tensor* dbias) {
  CheckDeviceF32(x, "conv x");
  CheckDeviceF32(w, "conv w");
  CheckDeviceF32(dy, "conv dy");
  CheckDeviceF32(dw, "conv dw");
  const ConvKey key = MakeConvKey(x, w, g, config_.tf32 || impl_->mixed());
  CheckConvOut(key, dy, "conv dy");
  ENGINE_CHECK(dw.shape() == w.shape(), "conv dw {}", ShapeString(dw.shape()));
  if (dx != nullptr) {
    CheckDeviceF32(*dx, "conv dx");
    ENGINE_CHECK(dx->shape() == x.shape(), "conv dx {}", ShapeString(dx->shape()));
  }
  if (dbias != nullptr) {
    CheckDeviceF32(*dbias, "conv dbias");
    ENGINE_CHECK(dbias->numel() == key.o, "conv dbias {}", ShapeString(dbias->shape()));
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const kernels::FloatType rt = impl_->round();
    ASSIGN_OR_RETURN(const ConvPlan* plan, impl_->conv_algos.Get(impl_->cudnn, key));
    const float* xp = F32(x);
    const float* wp = F32(w);
    const float* dyp = F32(dy);
    Tensor rx, rw, rdy;
    if (impl_->mixed()) {
      ASSIGN_OR_RETURN(rx, impl_->Scratch(x.numel()));
      ASSIGN_OR_RETURN(rw, impl_->Scratch(w.numel()));
      ASSIGN_OR_RETURN(rdy, impl_->Scratch(dy.numel()));
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(xp, F32(rx), x.numel(), rt, s));
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(wp, F32(rw), w.numel(), rt, s));
      CUDA_RETURN_IF_ERROR(kernels::LaunchRound(dyp, F32(rdy), dy.numel(), rt, s));
      xp = F32(rx);
      wp = F32(rw);
      dyp = F32(rdy);
    }
    const float one = 1.0f, zero = 0.0f;
    const size_t ws_bytes = std::max(plan->bwd_data_workspace, plan->bwd_filter_workspace);
    ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch((ws_bytes + 3) / 4));
    if (dx != nullptr) {
      CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(impl_->cudnn, &one, plan->w.get(), wp, plan->y.get(), dyp,
                                                         plan->conv.get(), plan->bwd_data_algo, workspace.raw(),
                                                         plan->bwd_data_workspace, &zero, plan->x.get(), F32(*dx)));
      if (impl_->mixed()) CUDA_RETURN_IF_ERROR(kernels::LaunchRound(F32(*dx), F32(*dx), dx->numel(), rt, s));
    }
    // dw += round(new gradient): with f32 cuDNN accumulates (beta = 1)
    // directly; otherwise the new part is computed, rounded and added.
    Tensor dw_new;
    float* dw_target = F32(dw);
    float dw_beta = 1.0f;
    if (impl_->mixed()) {
      ASSIGN_OR_RETURN(dw_new, impl_->Scratch(dw.numel()));
      dw_target = F32(dw_new);
      dw_beta = 0.0f;
    }
    CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(impl_->cudnn, &one, plan->x.get(), xp, plan->y.get(), dyp,
                                                         plan->conv.get(), plan->bwd_filter_algo, workspace.raw(),
                                                         plan->bwd_filter_workspace, &dw_beta, plan->w.get(),
                                                         dw_target));
    if (impl_->mixed()) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchAccumulateRounded(dw_target, F32(dw), dw.numel(), rt, s));
    }
    if (dbias != nullptr) {
      const int64_t ohw = dy.dim(2) * dy.dim(3);
      CUDA_RETURN_IF_ERROR(kernels::LaunchChannelSum(dyp, key.n, key.o, ohw, F32(*dbias), rt, s));
    }
    return absl::OkStatus();
  });
}

void CudaBackend::MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) {
  CheckDeviceF32(x, "maxpool x");
  CheckDeviceF32(y, "maxpool y");
  ENGINE_CHECK(x.rank() == 4 && y.rank() == 4 && k >= 1 && s >= 1, "maxpool shapes");
  const int64_t h = x.dim(2), w = x.dim(3);
  ENGINE_CHECK(x.dim(0) == y.dim(0) && x.dim(1) == y.dim(1) && y.dim(2) == (h - k) / s + 1 &&
                   y.dim(3) == (w - k) / s + 1,
               "maxpool y {} for x {}", ShapeString(y.shape()), ShapeString(x.shape()));
  RM_CUDA_OP(kernels::LaunchMaxPoolForward(F32(x), x.dim(0) * x.dim(1), h, w, k, s, F32(y), compute_stream()));
}

void CudaBackend::MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) {
  CheckDeviceF32(x, "maxpool x");
  CheckDeviceF32(dy, "maxpool dy");
  CheckDeviceF32(dx, "maxpool dx");
  ENGINE_CHECK(dx.shape() == x.shape() && dy.rank() == 4 && k >= 1 && s >= 1, "maxpool backward shapes");
  const int64_t h = x.dim(2), w = x.dim(3);
  ENGINE_CHECK(dy.dim(2) == (h - k) / s + 1 && dy.dim(3) == (w - k) / s + 1, "maxpool dy {}",
               ShapeString(dy.shape()));
  RM_CUDA_OP(kernels::LaunchMaxPoolBackward(F32(x), F32(dy), x.dim(0) * x.dim(1), h, w, k, s, F32(dx), impl_->round(),
                                            compute_stream()));
}

}  // namespace ringmaster::engine
