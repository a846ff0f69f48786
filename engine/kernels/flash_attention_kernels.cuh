// Flash attention kernels (flash_attention.h): causal FlashAttention-2 in fp32
// on CUDA cores, storage type T (float, __half or __nv_bfloat16) for qkv, out,
// dout and dqkv, fp32 for lse and dsum; every stored value is rounded once.
// Register-tiled: a block of 128 threads owns 64 rows and each thread 4 x 4
// (forward) or 4 x 2 (backward) scores and a 4 x 8 block of the output rows;
// flash_attention_tiles.cuh has the roles and the shared-memory layouts.
// Deterministic: no atomics; every sum runs in a fixed order.
//
// Launch shapes (flash_attention.cu; the host tests use the same):
//   FlashForwardKernel, FlashBackwardKvKernel, FlashBackwardQKernel:
//     grid TileGrid(d) = (b * nh, ceil(t / 64)), kTileThreads = 128 threads,
//     static shared memory only (44,032 bytes forward, 47,616 backward: under
//     the 48 KB that needs no opt-in);
//   RowDotKernel: grid GridFor(8 * b * nh * t, kRowDotThreads), kRowDotThreads
//     = 256 threads (8 lanes per row; any grid: grid-stride).
// Backward runs RowDotKernel, then FlashBackwardKvKernel, then
// FlashBackwardQKernel (the last two only read dsum).
//
// Included by flash_attention.cu and by flash_attention_emulation_test.cc
// (host_cuda); includes only headers the host harness compiles. The includer
// provides the CUDA built-ins and AttentionDims (engine/kernels/attention.h).
#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"
#include "engine/kernels/flash_attention_tiles.cuh"

namespace ringmaster::kernels::flash {

// Blocks an SM should hold (steers ptxas's register budget): shared memory
// allows 5 of each tile kernel; registers then allow 4 (at most 128 each).
constexpr int kMinBlocks = 4;
constexpr int kRowDotThreads = 256;

// The own-row block this block works on; heaviest first (causal: later query
// blocks see more keys), so the last wave is short.
__device__ __forceinline__ int QueryBlockStart() { return static_cast<int>(gridDim.y - 1 - blockIdx.y) * kBlockRows; }

// out = softmax(scale q k^T, causal) v, lse = log sum_{j <= i} exp(scale q_i . k_j).
template <typename T>
__global__ void __launch_bounds__(kTileThreads, kMinBlocks)
    FlashForwardKernel(const T* qkv, AttentionDims d, float scale, T* out, float* lse) {
  __shared__ OwnTile qs;
  __shared__ StreamTile<kKeyTile> ks, vs;
  __shared__ ScoreTile<kKeyTile> ps;
  const Roles w = ThisThread();
  const int64_t bh = blockIdx.x;
  const int t = static_cast<int>(d.t), q0 = QueryBlockStart();
  const int k_end = min(q0 + kBlockRows, t);  // keys past the block's last query: none visible
  const float scale2 = scale * kLog2e;
  const HeadRows<const T> k_src = QkvRows(qkv, d, bh, 1), v_src = QkvRows(qkv, d, bh, 2);
  LoadOwn(QkvRows(qkv, d, bh, 0), q0, &qs);
  float m[4], l[4], o[4][8];  // per own row: running max (log2 units), this lane's share of the sum, output
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[a][e] = 0.0f;
  }
  for (int k0 = 0; k0 < k_end; k0 += kKeyTile) {
    __syncthreads();  // the last tile's K and V are read (and, the first time, nothing)
    LoadStreamed(k_src, k0, &ks);
    LoadStreamed(v_src, k0, &vs);
    __syncthreads();
    float s[4][4] = {};
    DotTile<2>(qs, ks, w, s);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int i = q0 + w.rg + 16 * a;
      float mx = -INFINITY;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        s[a][b] = k0 + w.cg + 8 * b <= i ? s[a][b] * scale2 : -INFINITY;
        mx = fmaxf(mx, s[a][b]);
      }
      // Finite: key 0 is visible from every row, in the first tile.
      const float m_new = fmaxf(m[a], RowMax8(mx)), corr = exp2f(m[a] - m_new);
      m[a] = m_new;
      l[a] *= corr;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[a][e] *= corr;
      float* p_row = ps.OwnRow(w, a);
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float p = exp2f(s[a][b] - m_new);
        l[a] += p;
        p_row[w.cg + 8 * b] = p;
      }
    }
    __syncwarp();  // each row's 8 lanes (one warp) wrote its probabilities
    AccumulateTile(ps, vs, w, o);
  }
  const HeadRows<T> dst = OutRows(out, d, bh);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const float sum = RowSum8(l[a]);
    const int i = q0 + w.rg + 16 * a;
    if (i >= t) continue;
    StoreRow(dst, i, w, o[a], 1.0f / sum);
    if (w.cg == 0) lse[bh * t + i] = (m[a] + log2f(sum)) * kLn2;
  }
}

// dsum[bh, i] = dout_i . out_i (fp32 from the stored values): 8 lanes per row.
template <typename T>
__global__ void __launch_bounds__(kRowDotThreads)
    RowDotKernel(const T* out, const T* dout, AttentionDims d, float* dsum) {
  const int64_t rows = d.b * d.nh * d.t;
  const int lane8 = static_cast<int>(threadIdx.x % 8);
  // Whole warps (4 rows each) per step: every lane reaches the shuffles.
  for (int64_t r0 = GlobalThread() / 32 * 4; r0 < rows; r0 += GlobalStride() / 8) {
    const int64_t r = r0 + threadIdx.x % 32 / 8;
    float s = 0.0f;
    if (r < rows) {
      const int64_t bh = r / d.t, i = r % d.t;
      const HeadRows<const T> o = OutRows(out, d, bh), g = OutRows(dout, d, bh);
      for (int e = lane8; e < o.hd; e += 8)
        s = fmaf(ToFloat(g.base[i * g.stride + e]), ToFloat(o.base[i * o.stride + e]), s);
    }
    s = RowSum8(s);
    if (r < rows && lane8 == 0) dsum[r] = s;
  }
}

// dK, dV of the block's 64 keys j (row j of dqkv's k and v parts): over the
// query tiles from the block's first key on (earlier queries see none of its
// keys), P^T = exp(scale K Q^T - lse) and dS^T = P^T (V dO^T - dsum), then
// dV += P^T dO and dK += dS^T Q; dK is scaled at the end.
template <typename T>
__global__ void __launch_bounds__(kTileThreads, kMinBlocks)
    FlashBackwardKvKernel(const T* qkv, const T* dout, const float* lse, const float* dsum, AttentionDims d,
                          float scale, T* dqkv) {
  __shared__ OwnTile ks, vs;
  __shared__ StreamTile<kBwdTile> qs, dos;
  __shared__ ScoreTile<kBwdTile> ps;  // P^T, then dS^T, of the current tile
  const Roles w = ThisThread();
  const int64_t bh = blockIdx.x;
  const int t = static_cast<int>(d.t), j0 = static_cast<int>(blockIdx.y) * kBlockRows;  // heaviest (j0 = 0) first
  const float scale2 = scale * kLog2e;
  const HeadRows<const T> q_src = QkvRows(qkv, d, bh, 0), do_src = OutRows(dout, d, bh);
  const float *lse_h = lse + bh * t, *dsum_h = dsum + bh * t;
  LoadOwn(QkvRows(qkv, d, bh, 1), j0, &ks);
  LoadOwn(QkvRows(qkv, d, bh, 2), j0, &vs);
  float dk[4][8], dv[4][8];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int e = 0; e < 8; ++e) dk[a][e] = dv[a][e] = 0.0f;
  }
  for (int s0 = j0; s0 < t; s0 += kBwdTile) {
    float lse2[2], dsum_i[2];  // of the streamed queries cg + 8 b (lse in log2 units)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int i = s0 + w.cg + 8 * b;
      lse2[b] = i < t ? lse_h[i] * kLog2e : 0.0f;
      dsum_i[b] = i < t ? dsum_h[i] : 0.0f;
    }
    __syncthreads();  // the last tile's Q, dO and scores are read
    LoadStreamed(q_src, s0, &qs);
    LoadStreamed(do_src, s0, &dos);
    __syncthreads();
    float st[4][2] = {}, dpt[4][2] = {};
    DotTile<1>(ks, qs, w, st);
    DotTile<1>(vs, dos, w, dpt);
    float ds[4][2];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int j = j0 + w.rg + 16 * a;
      float* p_row = ps.OwnRow(w, a);
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        // Queries past t: zero rows of Q and dO with lse = dsum = 0, so they add 0 * p.
        const float p = j <= s0 + w.cg + 8 * b ? exp2f(st[a][b] * scale2 - lse2[b]) : 0.0f;
        ds[a][b] = p * (dpt[a][b] - dsum_i[b]);
        p_row[w.cg + 8 * b] = p;
      }
    }
    __syncwarp();  // P^T rows written by their 8 lanes
    AccumulateTile(ps, dos, w, dv);
    __syncwarp();  // ... and read
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      float* p_row = ps.OwnRow(w, a);
#pragma unroll
      for (int b = 0; b < 2; ++b) p_row[w.cg + 8 * b] = ds[a][b];
    }
    __syncwarp();
    AccumulateTile(ps, qs, w, dk);
  }
  const HeadRows<T> dk_dst = QkvRows(dqkv, d, bh, 1), dv_dst = QkvRows(dqkv, d, bh, 2);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int j = j0 + w.rg + 16 * a;
    if (j >= t) continue;
    StoreRow(dk_dst, j, w, dk[a], scale);
    StoreRow(dv_dst, j, w, dv[a], 1.0f);
  }
}

// dQ of the block's 64 queries (dqkv's q part): over the key tiles up to the
// block's last query, dS = exp(scale Q K^T - lse) (dO V^T - dsum), dQ += dS K;
// scaled at the end.
template <typename T>
__global__ void __launch_bounds__(kTileThreads, kMinBlocks)
    FlashBackwardQKernel(const T* qkv, const T* dout, const float* lse, const float* dsum, AttentionDims d, float scale,
                         T* dqkv) {
  __shared__ OwnTile qs, dos;
  __shared__ StreamTile<kBwdTile> ks, vs;
  __shared__ ScoreTile<kBwdTile> dss;
  const Roles w = ThisThread();
  const int64_t bh = blockIdx.x;
  const int t = static_cast<int>(d.t), q0 = QueryBlockStart();
  const int k_end = min(q0 + kBlockRows, t);
  const float scale2 = scale * kLog2e;
  const HeadRows<const T> k_src = QkvRows(qkv, d, bh, 1), v_src = QkvRows(qkv, d, bh, 2);
  LoadOwn(QkvRows(qkv, d, bh, 0), q0, &qs);
  LoadOwn(OutRows(dout, d, bh), q0, &dos);
  float lse2[4], dsum_i[4], dq[4][8];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int i = q0 + w.rg + 16 * a;
    lse2[a] = i < t ? lse[bh * t + i] * kLog2e : 0.0f;
    dsum_i[a] = i < t ? dsum[bh * t + i] : 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) dq[a][e] = 0.0f;
  }
  for (int k0 = 0; k0 < k_end; k0 += kBwdTile) {
    __syncthreads();  // the last tile's K, V and scores are read
    LoadStreamed(k_src, k0, &ks);
    LoadStreamed(v_src, k0, &vs);
    __syncthreads();
    float s[4][2] = {}, dp[4][2] = {};
    DotTile<1>(qs, ks, w, s);
    DotTile<1>(dos, vs, w, dp);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int i = q0 + w.rg + 16 * a;
      float* ds_row = dss.OwnRow(w, a);
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const float p = k0 + w.cg + 8 * b <= i ? exp2f(s[a][b] * scale2 - lse2[a]) : 0.0f;
        ds_row[w.cg + 8 * b] = p * (dp[a][b] - dsum_i[a]);
      }
    }
    __syncwarp();  // dS rows written by their 8 lanes
    AccumulateTile(dss, ks, w, dq);
  }
  const HeadRows<T> dst = QkvRows(dqkv, d, bh, 0);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int i = q0 + w.rg + 16 * a;
    if (i < t) StoreRow(dst, i, w, dq[a], scale);
  }
}

}  // namespace ringmaster::kernels::flash

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_KERNELS_CUH_
