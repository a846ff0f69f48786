// Attention launchers (attention.h); the kernels are in attention_kernels.cuh.
#include "engine/kernels/attention.h"
#include "engine/kernels/kernel_util.cuh"
// After kernel_util.cuh and attention.h: the kernels use their CUDA built-ins
// and AttentionDims.
#include "engine/kernels/attention_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using attention::kAttnThreads;
using attention::kAttnWarps;

int64_t Items(AttentionDims d) { return d.b * d.nh * d.t * d.hd; }

// Calls f(U{}, units) with U the unit the head moves take: a 16-byte Pack of
// the storage type when hd is whole packs and `aligned`, else one element;
// units = d with hd counted in U.
template <typename F>
cudaError_t WithUnit(FloatType t, AttentionDims d, bool aligned, F&& f) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    constexpr int kPack = Pack<T>::kSize;
    if (aligned && d.hd % kPack == 0) {
      AttentionDims units = d;
      units.hd = d.hd / kPack;
      return f(Pack<T>{}, units);
    }
    return f(zero, d);
  });
}

}  // namespace

cudaError_t LaunchSplitHeads(const void* src, FloatType t, AttentionDims d, int parts, void* dst0, void* dst1,
                             void* dst2, cudaStream_t stream) {
  if (parts != 1 && parts != 3) return cudaErrorInvalidValue;
  if (Items(d) <= 0) return cudaSuccess;
  const bool aligned = parts == 3 ? Aligned16(src, dst0, dst1, dst2) : Aligned16(src, dst0);
  return WithUnit(t, d, aligned, [&](auto unit, AttentionDims u) {
    using U = decltype(unit);
    attention::SplitHeadsKernel<U><<<GridFor(Items(u)), kThreads, 0, stream>>>(
        static_cast<const U*>(src), u, parts, static_cast<U*>(dst0), static_cast<U*>(dst1), static_cast<U*>(dst2));
    return cudaGetLastError();
  });
}

cudaError_t LaunchMergeQkvGrads(const void* dq, const void* dk, const void* dv, FloatType t, AttentionDims d,
                                void* dqkv, cudaStream_t stream) {
  if (Items(d) <= 0) return cudaSuccess;
  return WithUnit(t, d, Aligned16(dq, dk, dv, dqkv), [&](auto unit, AttentionDims u) {
    using U = decltype(unit);
    attention::MergeQkvGradsKernel<U><<<GridFor(Items(u)), kThreads, 0, stream>>>(
        static_cast<const U*>(dq), static_cast<const U*>(dk), static_cast<const U*>(dv), u, static_cast<U*>(dqkv));
    return cudaGetLastError();
  });
}

cudaError_t LaunchMergeHeads(const void* y, FloatType t, AttentionDims d, void* out, cudaStream_t stream) {
  if (Items(d) <= 0) return cudaSuccess;
  return WithUnit(t, d, Aligned16(y, out), [&](auto unit, AttentionDims u) {
    using U = decltype(unit);
    attention::MergeHeadsKernel<U><<<GridFor(Items(u)), kThreads, 0, stream>>>(static_cast<const U*>(y), u,
                                                                               static_cast<U*>(out));
    return cudaGetLastError();
  });
}

cudaError_t LaunchCausalSoftmax(float* att, AttentionDims d, FloatType round, cudaStream_t stream) {
  const int64_t rows = d.b * d.nh * d.t;
  if (rows <= 0) return cudaSuccess;
  return WithStorage(round, [&](auto zero) {
    using R = decltype(zero);
    attention::CausalSoftmaxKernel<R><<<BlocksFor(rows, kAttnWarps), kAttnThreads, 0, stream>>>(att, rows, d.t);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCausalSoftmaxBackward(const float* att, float* datt, AttentionDims d, float scale,
                                        FloatType round, cudaStream_t stream) {
  const int64_t rows = d.b * d.nh * d.t;
  if (rows <= 0) return cudaSuccess;
  return WithStorage(round, [&](auto zero) {
    using R = decltype(zero);
    attention::CausalSoftmaxBackwardKernel<R><<<BlocksFor(rows, kAttnWarps), kAttnThreads, 0, stream>>>(
        att, datt, rows, d.t, scale);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
