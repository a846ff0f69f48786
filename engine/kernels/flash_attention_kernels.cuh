// Flash attention kernels (forward; backward's row dots, dK/dV and dQ). One
// block is one (batch * head, tile) and each thread owns one row of the tile
// (a query row, or a key row in the dK/dV pass), holding its accumulators in
// registers; the other operand streams through shared memory, read by all
// threads at the same address (broadcast).
//
// Included by flash_attention.cu (nvcc) and by flash_attention_emulation_test.cc
// (the host compiler, with threads and a barrier standing in for a block), so
// it includes nothing: the includer provides AttentionDims, FloatType,
// kFlashMaxHeadSize, RoundTo, float4 and the CUDA built-ins. Launch shapes:
// FlashForwardKernel and FlashBackwardQKernel grid (b * nh, ceil(t / kQRows)),
// kQRows threads; FlashBackwardKvKernel grid (b * nh, ceil(t / kKvRows)),
// kKvRows threads; RowDotKernel any grid (grid-stride).
#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_

namespace ringmaster::kernels::flash {

constexpr int kHd = static_cast<int>(kFlashMaxHeadSize);
constexpr int kPad = kHd + 1;   // row stride of per-thread rows in shared memory (no bank conflicts)
constexpr int kQRows = 64;      // queries per block: forward and dQ
constexpr int kKCols = 32;      // keys per streamed tile: forward and dQ
constexpr int kKvRows = 64;     // keys per block: dK/dV
constexpr int kKvStream = 16;   // queries per streamed tile: dK/dV
// Must match engine/core/flash_attention_reference.h's FlashTiles defaults.

// Offsets of (batch, time, head) in the fused layouts.
struct Layout {
  AttentionDims d;
  __device__ int64_t Qkv(int64_t bi, int64_t i, int64_t h) const { return ((bi * d.t + i) * 3 * d.nh + h) * d.hd; }
  __device__ int64_t Out(int64_t bi, int64_t i, int64_t h) const { return ((bi * d.t + i) * d.nh + h) * d.hd; }
  __device__ int64_t C() const { return d.nh * d.hd; }
};

// rows x kHd tile starting at row r0 of `src` (part offset already applied),
// rows past t and columns past hd zero; dst row stride `stride`.
__device__ void LoadTile(const float* src, const Layout& L, int64_t bi, int64_t h, int64_t r0, int rows, bool fused,
                         float* dst, int stride) {
  for (int idx = threadIdx.x; idx < rows * kHd; idx += blockDim.x) {
    const int r = idx / kHd, e = idx % kHd;
    const int64_t i = r0 + r;
    float v = 0.0f;
    if (i < L.d.t && e < L.d.hd) v = src[(fused ? L.Qkv(bi, i, h) : L.Out(bi, i, h)) + e];
    dst[r * stride + e] = v;
  }
}

__device__ void LoadRowRegs(const float* src, int64_t off, bool valid, int hd, float (&x)[kHd]) {
#pragma unroll
  for (int e = 0; e < kHd; ++e) x[e] = valid && e < hd ? src[off + e] : 0.0f;
}

// Shared-memory rows of kHd floats at 16-byte aligned addresses (the unpadded
// tiles) are read as float4: one shared load per four FMAs instead of one.
// sum_e x[e] * y[e]; x a register array or any shared row, y aligned.
template <typename X>
__device__ __forceinline__ float Dot4(const X& x, const float* y) {
  const float4* y4 = reinterpret_cast<const float4*>(y);
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kHd / 4; ++e) {
    const float4 v = y4[e];
    s = fmaf(x[4 * e], v.x, s);
    s = fmaf(x[4 * e + 1], v.y, s);
    s = fmaf(x[4 * e + 2], v.z, s);
    s = fmaf(x[4 * e + 3], v.w, s);
  }
  return s;
}

// acc[e] += a * y[e]; y an aligned shared row.
__device__ __forceinline__ void Axpy4(float a, const float* y, float (&acc)[kHd]) {
  const float4* y4 = reinterpret_cast<const float4*>(y);
#pragma unroll
  for (int e = 0; e < kHd / 4; ++e) {
    const float4 v = y4[e];
    acc[4 * e] = fmaf(a, v.x, acc[4 * e]);
    acc[4 * e + 1] = fmaf(a, v.y, acc[4 * e + 1]);
    acc[4 * e + 2] = fmaf(a, v.z, acc[4 * e + 2]);
    acc[4 * e + 3] = fmaf(a, v.w, acc[4 * e + 3]);
  }
}

// The query block of the forward and dQ kernels: this thread's row i and the
// key tiles [0, k_end) its block visits (causal: later tiles are skipped).
struct QueryBlock {
  int64_t bh, bi, h, q0, i, k_end;
  bool row_ok;
};

__device__ QueryBlock ThisQueryBlock(const AttentionDims& d) {
  QueryBlock qb;
  qb.bh = blockIdx.x;
  qb.bi = qb.bh / d.nh;
  qb.h = qb.bh % d.nh;
  qb.q0 = int64_t{blockIdx.y} * kQRows;
  qb.i = qb.q0 + threadIdx.x;
  qb.row_ok = qb.i < d.t;
  qb.k_end = qb.q0 + kQRows < d.t ? qb.q0 + kQRows : d.t;
  return qb;
}

// This thread's query row into q (zero-padded to kHd) and a zeroed accumulator.
__device__ __forceinline__ void StartQueryRow(const float* qkv, const Layout& L, const QueryBlock& qb, float (&q)[kHd],
                                              float (&acc)[kHd]) {
  LoadRowRegs(qkv, qb.row_ok ? L.Qkv(qb.bi, qb.i, qb.h) : 0, qb.row_ok, static_cast<int>(L.d.hd), q);
#pragma unroll
  for (int e = 0; e < kHd; ++e) acc[e] = 0.0f;
}

// A streamed tile of kKCols keys and values (rows 16-byte aligned: Dot4, Axpy4).
struct KeyValueTile {
  __align__(16) float k[kKCols * kHd];
  __align__(16) float v[kKCols * kHd];
};

// The tile at k0 of K and V into shared memory, between barriers.
__device__ void LoadKeyValueTile(const float* qkv, const Layout& L, const QueryBlock& qb, int64_t k0,
                                 KeyValueTile* kv) {
  __syncthreads();
  LoadTile(qkv + L.C(), L, qb.bi, qb.h, k0, kKCols, true, kv->k, kHd);
  LoadTile(qkv + 2 * L.C(), L, qb.bi, qb.h, k0, kKCols, true, kv->v, kHd);
  __syncthreads();
}

__global__ void __launch_bounds__(kQRows) FlashForwardKernel(const float* qkv, AttentionDims d, float scale,
                                                             float* out, float* lse, FloatType round) {
  __shared__ KeyValueTile kv;
  const Layout L{d};
  const QueryBlock qb = ThisQueryBlock(d);
  float q[kHd], o[kHd];
  StartQueryRow(qkv, L, qb, q, o);
  float m = -INFINITY, l = 0.0f;
  for (int64_t k0 = 0; k0 < qb.k_end; k0 += kKCols) {
    LoadKeyValueTile(qkv, L, qb, k0, &kv);
    float s[kKCols];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kKCols; ++jj) {
      const int64_t j = k0 + jj;
      s[jj] = j <= qb.i && j < d.t ? scale * Dot4(q, kv.k + jj * kHd) : -INFINITY;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    const float m_new = fmaxf(m, tile_max);  // finite: key 0 is in the first tile
    const float corr = expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int e = 0; e < kHd; ++e) o[e] *= corr;
#pragma unroll
    for (int jj = 0; jj < kKCols; ++jj) {
      const float p = expf(s[jj] - m_new);
      l += p;
      Axpy4(p, kv.v + jj * kHd, o);
    }
    m = m_new;
  }
  if (!qb.row_ok) return;
  const float inv = 1.0f / l;
  float* dst = out + L.Out(qb.bi, qb.i, qb.h);
#pragma unroll
  for (int e = 0; e < kHd; ++e)  // constant indices keep o in registers
    if (e < d.hd) dst[e] = RoundTo(round, o[e] * inv);
  lse[qb.bh * d.t + qb.i] = m + logf(l);
}

// Backward's recomputation for one (query i, key j) from qk = q_i . k_j and
// dp = dout_i . v_j: p = exp(scale qk - lse_i) (0 where j is not visible from
// i), ds = p (dp - dsum_i).
__device__ __forceinline__ void Recompute(float qk, float dp, bool visible, float scale, float lse_i, float dsum_i,
                                          float* p, float* ds) {
  *p = visible ? expf(scale * qk - lse_i) : 0.0f;
  *ds = *p * (dp - dsum_i);
}

// dsum[bh, i] = dout_i . out_i, one thread per row.
__global__ void RowDotKernel(const float* out, const float* dout, AttentionDims d, float* dsum) {
  const Layout L{d};
  const int64_t n = d.b * d.nh * d.t;
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n; r += int64_t{blockDim.x} * gridDim.x) {
    const int64_t i = r % d.t, bh = r / d.t, bi = bh / d.nh, h = bh % d.nh;
    const int64_t off = L.Out(bi, i, h);
    float s = 0.0f;
    for (int64_t e = 0; e < d.hd; ++e) s += dout[off + e] * out[off + e];
    dsum[r] = s;
  }
}

// dK, dV of the block's key rows; query tiles from the block's first key on
// (earlier queries see none of its keys).
__global__ void __launch_bounds__(kKvRows) FlashBackwardKvKernel(const float* qkv, const float* dout, const float* lse,
                                                                 const float* dsum, AttentionDims d, float scale,
                                                                 float* dqkv, FloatType round) {
  __shared__ float ks[kKvRows * kPad], vs[kKvRows * kPad];  // own rows
  __shared__ __align__(16) float qs[kKvStream * kHd];  // streamed query rows
  __shared__ __align__(16) float dos[kKvStream * kHd];
  __shared__ float ls[kKvStream], ds_row[kKvStream];
  const Layout L{d};
  const int64_t bh = blockIdx.x, bi = bh / d.nh, h = bh % d.nh;
  const int64_t k0 = int64_t{blockIdx.y} * kKvRows, j = k0 + threadIdx.x;
  LoadTile(qkv + L.C(), L, bi, h, k0, kKvRows, true, ks, kPad);
  LoadTile(qkv + 2 * L.C(), L, bi, h, k0, kKvRows, true, vs, kPad);
  const float* kr = ks + threadIdx.x * kPad;
  const float* vr = vs + threadIdx.x * kPad;
  float dk[kHd], dv[kHd];
#pragma unroll
  for (int e = 0; e < kHd; ++e) dk[e] = dv[e] = 0.0f;
  for (int64_t s0 = k0; s0 < d.t; s0 += kKvStream) {
    __syncthreads();
    LoadTile(qkv, L, bi, h, s0, kKvStream, true, qs, kHd);
    LoadTile(dout, L, bi, h, s0, kKvStream, false, dos, kHd);
    if (threadIdx.x < kKvStream) {
      const int64_t i = s0 + threadIdx.x;
      ls[threadIdx.x] = i < d.t ? lse[bh * d.t + i] : 0.0f;
      ds_row[threadIdx.x] = i < d.t ? dsum[bh * d.t + i] : 0.0f;
    }
    __syncthreads();
    for (int ii = 0; ii < kKvStream; ++ii) {
      const int64_t i = s0 + ii;
      if (i >= d.t) break;  // the same for every thread
      const float* qr = qs + ii * kHd;
      const float* dor = dos + ii * kHd;
      float p, ds;  // kr, vr: padded rows; qr, dor: aligned
      Recompute(Dot4(kr, qr), Dot4(vr, dor), j <= i, scale, ls[ii], ds_row[ii], &p, &ds);
      Axpy4(p, dor, dv);
      Axpy4(ds, qr, dk);
    }
  }
  if (j >= d.t) return;
  float* dst = dqkv + L.Qkv(bi, j, h) + L.C();
#pragma unroll
  for (int e = 0; e < kHd; ++e) {
    if (e < d.hd) {
      dst[e] = RoundTo(round, scale * dk[e]);
      dst[L.C() + e] = RoundTo(round, dv[e]);
    }
  }
}

// dQ of the block's query rows; key tiles up to the block's last query.
__global__ void __launch_bounds__(kQRows) FlashBackwardQKernel(const float* qkv, const float* dout, const float* lse,
                                                               const float* dsum, AttentionDims d, float scale,
                                                               float* dqkv, FloatType round) {
  __shared__ float dos[kQRows * kPad];  // own rows
  __shared__ KeyValueTile kv;
  const Layout L{d};
  const QueryBlock qb = ThisQueryBlock(d);
  float q[kHd], dq[kHd];
  StartQueryRow(qkv, L, qb, q, dq);
  LoadTile(dout, L, qb.bi, qb.h, qb.q0, kQRows, false, dos, kPad);
  const float* dor = dos + threadIdx.x * kPad;
  const float lse_i = qb.row_ok ? lse[qb.bh * d.t + qb.i] : 0.0f, d_i = qb.row_ok ? dsum[qb.bh * d.t + qb.i] : 0.0f;
  for (int64_t k0 = 0; k0 < qb.k_end; k0 += kKCols) {
    LoadKeyValueTile(qkv, L, qb, k0, &kv);
    for (int jj = 0; jj < kKCols; ++jj) {
      const int64_t j = k0 + jj;
      const float* kr = kv.k + jj * kHd;
      const float* vr = kv.v + jj * kHd;
      float p, ds;  // dor: a padded row; kr, vr: aligned
      Recompute(Dot4(q, kr), Dot4(dor, vr), j <= qb.i && j < d.t, scale, lse_i, d_i, &p, &ds);
      Axpy4(ds, kr, dq);
    }
  }
  if (!qb.row_ok) return;
  float* dst = dqkv + L.Qkv(qb.bi, qb.i, qb.h);
#pragma unroll
  for (int e = 0; e < kHd; ++e)
    if (e < d.hd) dst[e] = RoundTo(round, scale * dq[e]);
}

}  // namespace ringmaster::kernels::flash

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_
