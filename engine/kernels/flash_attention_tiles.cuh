// The flash attention kernels' tiles (flash_attention_kernels.cuh): the block
// shape, the threads' roles, shared-memory layouts, head rows in global memory
// and the two register-tiled products every pass is made of.
//
// A block of kTileThreads = 128 threads owns kBlockRows = 64 rows of one
// (batch, head): queries (forward, dQ) or keys (dK/dV), and streams tiles of
// the other side through shared memory. Thread x plays two roles at once:
//   rg = x / 8 (0..15): the own rows rg + 16 a, a < 4;
//   cg = x % 8 (0..7):  the streamed rows cg + 8 b of a score tile, and the
//                       head columns [4 cg, 4 cg + 4) and [32 + 4 cg, 36 + 4 cg).
// So a thread computes a 4 x B block of a score tile (B = 4 or 2) from its own
// and streamed rows (DotTile: per 4 head columns, 4 + B shared loads of a
// float4 feed 16 B FMAs), and a 4 x 8 block of the output rows (AccumulateTile:
// per 4 streamed rows, 4 + 8 float4 loads feed 128 FMAs). The 8 lanes of a
// warp that share rg hold one row's scores between them: row maxima and sums
// are xor shuffles over lanes 1, 2, 4 apart, and the score rows they write to
// shared memory are read back by the same warp (a __syncwarp orders them).
//
// Shared memory holds fp32 whatever the storage type (the math is fp32), laid
// out so that none of the accesses above has a bank conflict:
//   OwnTile: 64 x 64, column chunk c of row r at chunk c ^ (r % 4) of the row
//     (an XOR swizzle): a warp's 4 own rows at one chunk hit 4 distinct bank
//     quads, with no padding (padded, the backward kernels' two own tiles
//     would take 2 KB more and pass the 48 KB of static shared memory);
//   StreamTile<rows>: rows padded to 68 floats: 8 consecutive rows (the
//     warp's streamed rows) at one chunk hit 8 distinct bank quads, and one
//     row's 8 chunks (AccumulateTile) do anyway;
//   ScoreTile<cols>: 64 x cols, rows padded to cols + 8 floats: the 32 lanes'
//     single-float stores (4 rows x 8 columns) hit 32 distinct banks and the
//     float4 loads of 4 rows 4 distinct quads.
// Rows past t and columns past hd are zero in every tile, so they add nothing
// to a dot product or an accumulation.
//
// Included by flash_attention_kernels.cuh; like it, compiled by nvcc and by
// the host harness (the includer provides the CUDA built-ins and
// AttentionDims).
#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_TILES_CUH_
#define RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_TILES_CUH_

#include <cstdint>
#include <type_traits>

#include "engine/kernels/device_util.cuh"
#include "engine/kernels/flash_limits.h"

namespace ringmaster::kernels::flash {

constexpr int kHd = static_cast<int>(kFlashMaxHeadSize);  // head columns held (zero past hd)
constexpr int kTileThreads = 128;
constexpr int kBlockRows = 64;  // own rows per block
constexpr int kKeyTile = 32;    // forward: keys per streamed tile
constexpr int kBwdTile = 16;    // backward: streamed rows per tile (queries for dK/dV, keys for dQ)
// Must match engine/core/flash_attention_reference.h's FlashTiles defaults.
static_assert(kHd == 64 && kTileThreads == 128 && kBlockRows == 64, "the thread roles above assume these");

constexpr float kLog2e = 1.4426950408889634f;  // scores are kept in log2 units: exp2f is one MUFU op
constexpr float kLn2 = 0.6931471805599453f;

// Grid of the tile kernels: (batch * head, ceil(t / kBlockRows)) blocks. Host code.
inline dim3 TileGrid(const AttentionDims& d) {
  return dim3(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>((d.t + kBlockRows - 1) / kBlockRows));
}

struct Roles {
  int rg, cg;
};
__device__ __forceinline__ Roles ThisThread() {
  return Roles{static_cast<int>(threadIdx.x) / 8, static_cast<int>(threadIdx.x) % 8};
}

// The block's own rows, kBlockRows x kHd, XOR-swizzled (no padding): column
// chunk c (4 floats) of row r at r * kHd + 4 * (c ^ (r % 4)).
struct OwnTile {
  __align__(16) float data[kBlockRows * kHd];
  __device__ __forceinline__ float* Chunk(int r, int c) { return data + r * kHd + 4 * (c ^ (r % 4)); }
};

// A streamed tile, kRows x kHd, rows padded to kStreamStride floats.
constexpr int kStreamStride = kHd + 4;
template <int kRows>
struct StreamTile {
  __align__(16) float data[kRows * kStreamStride];
  __device__ __forceinline__ float* Chunk(int r, int c) { return data + r * kStreamStride + 4 * c; }
  __device__ __forceinline__ const float* Row(int r) const { return data + r * kStreamStride; }
};

// Scores of the own rows with a streamed tile, kBlockRows x kCols, rows
// padded to kCols + 8 floats (an odd multiple of 8: 4 consecutive rows start
// in distinct 8-bank groups).
template <int kCols>
struct ScoreTile {
  static constexpr int kStride = kCols + 8;
  static_assert(kStride % 16 == 8, "4 consecutive rows 8 banks apart");
  __align__(16) float data[kBlockRows * kStride];
  // This thread's own row rg + 16 a.
  __device__ __forceinline__ float* OwnRow(Roles w, int a) { return data + (w.rg + 16 * a) * kStride; }
};

// The t rows of one (batch, head) in a fused layout: element e < hd of row i
// at base[i * stride + e]. `packed`: hd is whole 16-byte packs of T and the
// rows are 16-byte aligned, so a row moves as packs.
template <typename T>
struct HeadRows {
  T* base;
  int stride, t, hd;
  bool packed;
};

template <typename T>
__device__ __forceinline__ HeadRows<T> MakeHeadRows(T* base, int64_t stride, const AttentionDims& d) {
  constexpr int kP = Pack<std::remove_const_t<T>>::kSize;
  const bool packed = d.hd % kP == 0 && stride % kP == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
  return HeadRows<T>{base, static_cast<int>(stride), static_cast<int>(d.t), static_cast<int>(d.hd), packed};
}

// Part `part` (0 q, 1 k, 2 v) of head bh = batch * nh + head in qkv/dqkv
// [b, t, 3, nh, hd]; and head bh of out/dout [b, t, nh, hd].
template <typename T>
__device__ __forceinline__ HeadRows<T> QkvRows(T* qkv, const AttentionDims& d, int64_t bh, int part) {
  const int64_t bi = bh / d.nh, h = bh % d.nh;
  return MakeHeadRows(qkv + ((bi * d.t * 3 + part) * d.nh + h) * d.hd, 3 * d.nh * d.hd, d);
}
template <typename T>
__device__ __forceinline__ HeadRows<T> OutRows(T* out, const AttentionDims& d, int64_t bh) {
  const int64_t bi = bh / d.nh, h = bh % d.nh;
  return MakeHeadRows(out + bi * d.t * d.nh * d.hd + h * d.hd, d.nh * d.hd, d);
}

// Rows [r0, r0 + kRows) of `src` into `dst` (an OwnTile or a StreamTile) as
// fp32, zero past t and hd. All threads call; the caller puts barriers around it.
template <int kRows, typename T, typename Tile>
__device__ __forceinline__ void LoadTile(const HeadRows<const T>& src, int r0, Tile* dst) {
  constexpr int kP = Pack<T>::kSize, kUnits = kHd / kP;
  static_assert(kRows * kUnits % kTileThreads == 0, "whole passes of the block");
#pragma unroll 2  // bounds the loads in flight (registers)
  for (int k = 0; k < kRows * kUnits / kTileThreads; ++k) {
    const int idx = static_cast<int>(threadIdx.x) + k * kTileThreads, r = idx / kUnits, e = idx % kUnits * kP;
    const int i = r0 + r;
    float v[kP];
    const T* p = src.base + int64_t{i} * src.stride + e;
    if (i < src.t && src.packed && e < src.hd) {
      LoadFloats<kP>(p, v);
    } else {
#pragma unroll
      for (int u = 0; u < kP; ++u) v[u] = i < src.t && e + u < src.hd ? ToFloat(p[u]) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < kP; q += 4)
      *reinterpret_cast<float4*>(dst->Chunk(r, (e + q) / 4)) = make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]);
  }
}
template <typename T>
__device__ __forceinline__ void LoadOwn(const HeadRows<const T>& src, int r0, OwnTile* dst) {
  LoadTile<kBlockRows>(src, r0, dst);
}
template <typename T, int kRows>
__device__ __forceinline__ void LoadStreamed(const HeadRows<const T>& src, int r0, StreamTile<kRows>* dst) {
  LoadTile<kRows>(src, r0, dst);
}

// Columns [e, e + 4) of row i of `dst` (i < t) from v, each rounded once to T.
template <typename T>
__device__ __forceinline__ void StoreChunk(const HeadRows<T>& dst, int i, int e, const float (&v)[4]) {
  if (e >= dst.hd) return;
  T* p = dst.base + int64_t{i} * dst.stride + e;
  if (dst.packed) {  // hd a multiple of 4 (and of the pack): [e, e + 4) lies inside, 16-byte aligned for float
    StoreFloats<4>(p, v);
  } else {
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (e + u < dst.hd) p[u] = FromFloat<T>(v[u]);
  }
}

// A thread's two column chunks of own row i: acc[0..4) at 4 cg, acc[4..8) at 32 + 4 cg, times `scale`.
template <typename T>
__device__ __forceinline__ void StoreRow(const HeadRows<T>& dst, int i, Roles w, const float (&acc)[8], float scale) {
  const float lo[4] = {acc[0] * scale, acc[1] * scale, acc[2] * scale, acc[3] * scale};
  const float hi[4] = {acc[4] * scale, acc[5] * scale, acc[6] * scale, acc[7] * scale};
  StoreChunk(dst, i, 4 * w.cg, lo);
  StoreChunk(dst, i, 32 + 4 * w.cg, hi);
}

__device__ __forceinline__ float Lane(const float4& v, int u) {
  return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
}

// acc[a][b] += (own row rg + 16 a of x) . (streamed row cg + 8 b of y) over
// the kHd columns, in column order. kUnroll chunks of 4 columns per loop
// step: fully unrolled, ptxas hoists the loads of later chunks past the
// kernels' 128 registers; the kernels pick the most that spills on neither
// sm_80 nor sm_90.
template <int kUnroll, int A, int B, int kRows>
__device__ __forceinline__ void DotTile(const OwnTile& x, const StreamTile<kRows>& y, Roles w, float (&acc)[A][B]) {
  static_assert(A <= kBlockRows / 16 && B <= kRows / 8, "rows of the tiles");
  const float* xb = x.data + w.rg * kHd;  // row rg + 16 a at xb + 16 a kHd, with rg's swizzle
  const float* yb = y.Row(w.cg);          // row cg + 8 b at yb + 8 b kStreamStride
  const int swizzle = w.rg % 4;
#pragma unroll kUnroll
  for (int c = 0; c < kHd / 4; ++c) {
    float4 xv[A], yv[B];
#pragma unroll
    for (int a = 0; a < A; ++a) xv[a] = *reinterpret_cast<const float4*>(xb + a * 16 * kHd + 4 * (c ^ swizzle));
#pragma unroll
    for (int b = 0; b < B; ++b) yv[b] = *reinterpret_cast<const float4*>(yb + b * 8 * kStreamStride + 4 * c);
#pragma unroll
    for (int a = 0; a < A; ++a) {
#pragma unroll
      for (int b = 0; b < B; ++b) {
        acc[a][b] = fmaf(xv[a].x, yv[b].x, acc[a][b]);
        acc[a][b] = fmaf(xv[a].y, yv[b].y, acc[a][b]);
        acc[a][b] = fmaf(xv[a].z, yv[b].z, acc[a][b]);
        acc[a][b] = fmaf(xv[a].w, yv[b].w, acc[a][b]);
      }
    }
  }
}

// acc[a] += sum_j s[rg + 16 a][j] * (row j of y, this thread's two column
// chunks), j = 0..kRows in order.
template <int A, int kRows>
__device__ __forceinline__ void AccumulateTile(ScoreTile<kRows>& s, const StreamTile<kRows>& y, Roles w,
                                               float (&acc)[A][8]) {
#pragma unroll
  for (int j4 = 0; j4 < kRows; j4 += 4) {
    float4 sv[A];
#pragma unroll
    for (int a = 0; a < A; ++a) sv[a] = *reinterpret_cast<const float4*>(s.OwnRow(w, a) + j4);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float* yr = y.Row(j4 + u) + 4 * w.cg;
      const float4 lo = *reinterpret_cast<const float4*>(yr), hi = *reinterpret_cast<const float4*>(yr + kHd / 2);
#pragma unroll
      for (int a = 0; a < A; ++a) {
        const float p = Lane(sv[a], u);
        acc[a][0] = fmaf(p, lo.x, acc[a][0]);
        acc[a][1] = fmaf(p, lo.y, acc[a][1]);
        acc[a][2] = fmaf(p, lo.z, acc[a][2]);
        acc[a][3] = fmaf(p, lo.w, acc[a][3]);
        acc[a][4] = fmaf(p, hi.x, acc[a][4]);
        acc[a][5] = fmaf(p, hi.y, acc[a][5]);
        acc[a][6] = fmaf(p, hi.z, acc[a][6]);
        acc[a][7] = fmaf(p, hi.w, acc[a][7]);
      }
    }
  }
}

// Over the 8 lanes that share rg (xor 1, 2, 4: a fixed order, the same bits in each).
__device__ __forceinline__ float RowMax8(float v) {
  for (int o = 1; o < 8; o <<= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float RowSum8(float v) {
  for (int o = 1; o < 8; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace ringmaster::kernels::flash

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_TILES_CUH_
