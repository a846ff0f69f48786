// Elementwise kernels (elementwise.h): one grid-stride kernel, MapKernel,
// applies an op to every index; each op loads its operands, computes in fp32
// and stores (a 16-bit store rounds to nearest even, once).
//
// Launch: kThreads threads per block, any grid. MapKernel<K> with
// `vectorised` walks packs of K elements (every pointer of the op 16-byte
// aligned, K elements of the narrowest storage type = 16 bytes), then the
// last n % K elements one by one; without it, every element one by one.
//
// Included by elementwise.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::elementwise {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// Work items of MapKernel<K> over n elements (its grid: GridFor of this).
inline int64_t MapWork(int64_t n, int k, bool vectorised) { return vectorised ? n / k + n % k : n; }

template <int K, typename Op>
__global__ void __launch_bounds__(kThreads) MapKernel(Op op, int64_t n, bool vectorised) {
  const int64_t packs = vectorised ? n / K : 0;
  for (int64_t q = GlobalThread(); q < packs; q += GlobalStride()) op.template Apply<K>(q * K);
  for (int64_t i = packs * K + GlobalThread(); i < n; i += GlobalStride()) op.template Apply<1>(i);
}

// ---- fp32 utilities -------------------------------------------------------------

struct FillOp {
  float* x;
  float value;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    for (int e = 0; e < K; ++e) v[e] = value;
    StoreFloats<K>(x + i, v);
  }
};

struct ScaleOp {
  float* x;
  float alpha;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    LoadFloats<K>(x + i, v);
    for (int e = 0; e < K; ++e) v[e] *= alpha;
    StoreFloats<K>(x + i, v);
  }
};

// y += alpha * x.
struct AxpyOp {
  float alpha;
  const float* x;
  float* y;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float a[K], b[K];
    LoadFloats<K>(x + i, a);
    LoadFloats<K>(y + i, b);
    for (int e = 0; e < K; ++e) b[e] += alpha * a[e];
    StoreFloats<K>(y + i, b);
  }
};

// ---- Storage-typed ops ------------------------------------------------------------

template <typename T>
struct AddOp {
  const T* a;
  const T* b;
  T* out;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float x[K], y[K];
    LoadFloats<K>(a + i, x);
    LoadFloats<K>(b + i, y);
    for (int e = 0; e < K; ++e) x[e] += y[e];
    StoreFloats<K>(out + i, x);
  }
};

// dx = dy * mask.
template <typename T>
struct MulOp {
  const T* dy;
  const float* mask;
  T* dx;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float g[K], m[K];
    LoadFloats<K>(dy + i, g);
    LoadFloats<K>(mask + i, m);
    for (int e = 0; e < K; ++e) g[e] *= m[e];
    StoreFloats<K>(dx + i, g);
  }
};

template <typename S, typename D>
struct ConvertOp {
  const S* src;
  D* dst;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    LoadFloats<K>(src + i, v);
    StoreFloats<K>(dst + i, v);
  }
};

// dst = src rounded to R, kept as f32.
template <typename R>
struct RoundOp {
  const float* src;
  float* dst;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    LoadFloats<K>(src + i, v);
    for (int e = 0; e < K; ++e) v[e] = RoundTo<R>(v[e]);
    StoreFloats<K>(dst + i, v);
  }
};

// dst (f32) += src.
template <typename S>
struct AccumulateOp {
  const S* src;
  float* dst;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float s[K], d[K];
    LoadFloats<K>(src + i, s);
    LoadFloats<K>(dst + i, d);
    for (int e = 0; e < K; ++e) d[e] += s[e];
    StoreFloats<K>(dst + i, d);
  }
};

template <typename T>
struct ReluOp {
  const T* x;
  T* y;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    LoadFloats<K>(x + i, v);
    for (int e = 0; e < K; ++e) v[e] = v[e] > 0.0f ? v[e] : 0.0f;
    StoreFloats<K>(y + i, v);
  }
};

template <typename T>
struct ReluBackwardOp {
  const T* y;
  const T* dy;
  T* dx;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K], g[K];
    LoadFloats<K>(y + i, v);
    LoadFloats<K>(dy + i, g);
    for (int e = 0; e < K; ++e) g[e] = v[e] > 0.0f ? g[e] : 0.0f;
    StoreFloats<K>(dx + i, g);
  }
};

// The CPU backend's expressions (engine/core/cpu_activation.cc), term for term.
__device__ __forceinline__ float Gelu(float v) {
  const float u = kGeluScale * (v + kGeluCubic * v * v * v);
  return 0.5f * v * (1.0f + tanhf(u));
}

__device__ __forceinline__ float GeluGrad(float v) {
  const float u = kGeluScale * (v + kGeluCubic * v * v * v);
  const float t = tanhf(u);
  const float sech2 = 1.0f - t * t;
  return 0.5f * (1.0f + t) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
}

template <typename T>
struct GeluOp {
  const T* x;
  T* y;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K];
    LoadFloats<K>(x + i, v);
    for (int e = 0; e < K; ++e) v[e] = Gelu(v[e]);
    StoreFloats<K>(y + i, v);
  }
};

template <typename T>
struct GeluBackwardOp {
  const T* x;
  const T* dy;
  T* dx;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K], g[K];
    LoadFloats<K>(x + i, v);
    LoadFloats<K>(dy + i, g);
    for (int e = 0; e < K; ++e) g[e] = GeluGrad(v[e]) * g[e];
    StoreFloats<K>(dx + i, g);
  }
};

template <typename T>
struct DropoutOp {
  const T* x;
  float p, keep_scale;
  uint64_t key;
  float* mask;
  T* y;
  template <int K>
  __device__ __forceinline__ void Apply(int64_t i) const {
    float v[K], m[K];
    LoadFloats<K>(x + i, v);
    for (int e = 0; e < K; ++e) {
      m[e] = HashUniform(key, static_cast<uint64_t>(i + e)) >= p ? keep_scale : 0.0f;
      v[e] *= m[e];
    }
    StoreFloats<K>(mask + i, m);
    StoreFloats<K>(y + i, v);
  }
};

// flag[0] = 1 when some x[i] is inf or NaN.
// Every writer stores the same value: the race is benign.
template <int K>
__global__ void __launch_bounds__(kThreads) NonFiniteKernel(const float* x, int64_t n, bool vectorised,
                                                             float* flag) {
  bool bad = false;
  const int64_t packs = vectorised ? n / K : 0;
  for (int64_t q = GlobalThread(); q < packs; q += GlobalStride()) {
    float v[K];
    LoadFloats<K>(x + q * K, v);
    for (int e = 0; e < K; ++e) bad = bad || !IsFinite(v[e]);
  }
  for (int64_t i = packs * K + GlobalThread(); i < n; i += GlobalStride()) bad = bad || !IsFinite(x[i]);
  if (bad) *flag = 1.0f;
}

}  // namespace ringmaster::kernels::elementwise

#endif  // RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_KERNELS_CUH_
