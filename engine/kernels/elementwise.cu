// Elementwise launchers (elementwise.h); the kernels are in elementwise_kernels.cuh.
#include "engine/kernels/elementwise.h"
#include "engine/kernels/kernel_util.cuh"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/elementwise_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using namespace elementwise;  // NOLINT: the kernels and ops of this file

// Runs `op` over n elements, in packs of K when every pointer is aligned.
template <int K, typename Op>
cudaError_t Map(const Op& op, int64_t n, bool aligned, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MapKernel<K><<<GridFor(MapWork(n, K, aligned)), kThreads, 0, stream>>>(op, n, aligned);
  return cudaGetLastError();
}

template <typename T>
const T* As(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* As(void* p) {
  return static_cast<T*>(p);
}

constexpr int kF32Pack = 4;

}  // namespace

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream) {
  return Map<kF32Pack>(FillOp{x, value}, n, Aligned16(x), stream);
}

cudaError_t LaunchScale(float* x, int64_t n, float alpha, cudaStream_t stream) {
  return Map<kF32Pack>(ScaleOp{x, alpha}, n, Aligned16(x), stream);
}

cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  return Map<kF32Pack>(AxpyOp{alpha, x, y}, n, Aligned16(x, y), stream);
}

cudaError_t LaunchAdd(const void* a, const void* b, void* out, int64_t n, FloatType t, cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(AddOp<T>{As<T>(a), As<T>(b), As<T>(out)}, n, Aligned16(a, b, out), stream);
  });
}

cudaError_t LaunchMul(const void* dy, const float* mask, void* dx, int64_t n, FloatType t, cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(MulOp<T>{As<T>(dy), mask, As<T>(dx)}, n, Aligned16(dy, mask, dx), stream);
  });
}

cudaError_t LaunchConvert(const void* src, FloatType src_type, void* dst, FloatType dst_type, int64_t n,
                          cudaStream_t stream) {
  return WithStorage(src_type, [&](auto src_zero) {
    using S = decltype(src_zero);
    return WithStorage(dst_type, [&](auto dst_zero) {
      using D = decltype(dst_zero);
      constexpr int kPack = Pack<S>::kSize > Pack<D>::kSize ? Pack<S>::kSize : Pack<D>::kSize;
      return Map<kPack>(ConvertOp<S, D>{As<S>(src), As<D>(dst)}, n, Aligned16(src, dst), stream);
    });
  });
}

cudaError_t LaunchRound(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream) {
  return WithStorage(round, [&](auto zero) {
    using R = decltype(zero);
    return Map<kF32Pack>(RoundOp<R>{src, dst}, n, Aligned16(src, dst), stream);
  });
}

cudaError_t LaunchAccumulate(const void* src, FloatType src_type, float* dst, int64_t n, cudaStream_t stream) {
  return WithStorage(src_type, [&](auto zero) {
    using S = decltype(zero);
    return Map<Pack<S>::kSize>(AccumulateOp<S>{As<S>(src), dst}, n, Aligned16(src, dst), stream);
  });
}

cudaError_t LaunchNonFiniteCheck(const float* x, int64_t n, float* flag, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool aligned = Aligned16(x);
  NonFiniteKernel<kF32Pack><<<GridFor(MapWork(n, kF32Pack, aligned)), kThreads, 0, stream>>>(x, n, aligned, flag);
  return cudaGetLastError();
}

cudaError_t LaunchRelu(const void* x, void* y, int64_t n, FloatType t, cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(ReluOp<T>{As<T>(x), As<T>(y)}, n, Aligned16(x, y), stream);
  });
}

cudaError_t LaunchReluBackward(const void* y, const void* dy, void* dx, int64_t n, FloatType t,
                               cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(ReluBackwardOp<T>{As<T>(y), As<T>(dy), As<T>(dx)}, n, Aligned16(y, dy, dx),
                              stream);
  });
}

cudaError_t LaunchGelu(const void* x, void* y, int64_t n, FloatType t, cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(GeluOp<T>{As<T>(x), As<T>(y)}, n, Aligned16(x, y), stream);
  });
}

cudaError_t LaunchGeluBackward(const void* x, const void* dy, void* dx, int64_t n, FloatType t,
                               cudaStream_t stream) {
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(GeluBackwardOp<T>{As<T>(x), As<T>(dy), As<T>(dx)}, n, Aligned16(x, dy, dx),
                              stream);
  });
}

cudaError_t LaunchDropout(const void* x, float p, uint64_t key, float* mask, void* y, int64_t n, FloatType t,
                          cudaStream_t stream) {
  if (!(p >= 0.0f && p < 1.0f)) return cudaErrorInvalidValue;
  const float keep_scale = 1.0f / (1.0f - p);
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    return Map<Pack<T>::kSize>(DropoutOp<T>{As<T>(x), p, keep_scale, key, mask, As<T>(y)}, n,
                              Aligned16(x, mask, y), stream);
  });
}

}  // namespace ringmaster::kernels
