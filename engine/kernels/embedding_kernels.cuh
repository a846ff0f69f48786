// Embedding kernels (embedding.h). A thread handles K consecutive columns of a
// row (K = 1, or a 16-byte pack of the storage type when c is whole packs and
// the pointers are 16-byte aligned).
//   EmbeddingForwardKernel: kThreads threads, any grid (grid-stride over
//     bt * c / K items).
//   Backward: the positions are sorted by token (keys = token ids, values =
//   positions; the radix sort below, stable, so each token's positions
//   ascend; its first pass traps on a token outside [0, v)), then:
//   EmbeddingRunKernel: one block of kEmbThreads per chunk of kEmbChunk sorted
//     positions. A run (all positions of one token) of at most kDirectRun is
//     summed entirely by the block holding its first position, into dwte,
//     from dwte's value, in position order. A longer run is summed piece by
//     piece: each chunk it touches writes its piece's sum (from 0) to a
//     partial slot: slot 0 when the run started in an earlier chunk, else
//     slot 1 (the run's first piece; a long run spans several chunks, so at
//     most its first and last pieces share a chunk with other runs, and a
//     chunk holds at most one piece of each slot).
//   EmbeddingCarryKernel: one block of kEmbThreads per chunk; the block whose
//     chunk starts a long run adds to dwte its slot-1 partial, then the slot-0
//     partials of the following chunks, in chunk order.
//   PositionSumKernel: kThreads threads, any grid; dwpe[t, j] += dout[0, t, j],
//     dout[1, t, j], ... in order.
//   RunBackward (host code) enqueues the backward's kernels in order, through
//   a launch function: embedding.cu's <<<>>>, or the host harness's Launch.
//
// Included by embedding.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins and __trap).
#ifndef RINGMASTER_ENGINE_KERNELS_EMBEDDING_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_EMBEDDING_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::embedding {

constexpr int kEmbThreads = 128;
constexpr int64_t kEmbChunk = 64;     // sorted positions per block of EmbeddingRunKernel
constexpr int64_t kDirectRun = 256;   // longest run summed as one sequence (> kEmbChunk)

inline int64_t RunChunks(int64_t bt) { return (bt + kEmbChunk - 1) / kEmbChunk; }

template <int K, typename T>
__global__ void __launch_bounds__(kThreads)
    EmbeddingForwardKernel(const int32_t* tokens, const float* wte, const float* wpe, int64_t bt, int64_t t,
                           int64_t v, int64_t c, T* out) {
  const int64_t packs = c / K;
  for (int64_t idx = GlobalThread(); idx < bt * packs; idx += GlobalStride()) {
    const int64_t i = idx / packs, j = (idx % packs) * K;
    const int32_t tok = tokens[i];
    if (tok < 0 || tok >= v) __trap();
    float e[K], p[K];
    LoadFloats<K>(wte + tok * c + j, e);
    LoadFloats<K>(wpe + (i % t) * c + j, p);
    for (int q = 0; q < K; ++q) e[q] = RoundTo<T>(e[q]) + RoundTo<T>(p[q]);
    StoreFloats<K>(out + i * c + j, e);
  }
}

// ---- The sort: LSD radix, 8 bits per pass, stable --------------------------
// Pass over bits [shift, shift + 8) of the keys: RadixHistogramKernel counts
// each tile's digits (hist[digit * tiles + tile]), RadixScanKernel turns the
// counts into exclusive offsets in (digit, tile) order, RadixScatterKernel
// moves every item to its digit's offset plus its rank among the equal
// digits before it in the tile. Every count is an integer and every rank
// comes from the item order: deterministic, and stable (equal keys keep
// their order), so after the passes each token's positions ascend.

constexpr int kRadix = 256;
constexpr int kSortThreads = kRadix;  // one thread per digit in the histogram and the base update
constexpr int kSortRounds = 4;        // items per thread and tile
constexpr int64_t kSortTile = int64_t{kSortThreads} * kSortRounds;
constexpr int kScanThreads = 1024;

inline int64_t SortTiles(int64_t n) { return (n + kSortTile - 1) / kSortTile; }

// hist[d * tiles + tile] = occurrences of digit d among the tile's keys. On
// the first pass (check_v > 0) traps on a key outside [0, check_v).
__global__ void __launch_bounds__(kSortThreads)
    RadixHistogramKernel(const int32_t* keys, int64_t n, int shift, int64_t check_v, int32_t* hist) {
  __shared__ int32_t counts[kRadix];
  const int64_t tiles = gridDim.x, base = blockIdx.x * kSortTile;
  counts[threadIdx.x] = 0;
  __syncthreads();
  for (int r = 0; r < kSortRounds; ++r) {
    const int64_t i = base + r * int64_t{kSortThreads} + threadIdx.x;
    if (i >= n) break;
    const int32_t key = keys[i];
    if (check_v > 0 && (key < 0 || key >= check_v)) __trap();
    atomicAdd(&counts[(key >> shift) & (kRadix - 1)], 1);
  }
  __syncthreads();
  hist[threadIdx.x * tiles + blockIdx.x] = counts[threadIdx.x];
}

// In place: hist[0..count) becomes its exclusive prefix sum. One block.
__global__ void __launch_bounds__(kScanThreads) RadixScanKernel(int32_t* hist, int64_t count) {
  __shared__ int32_t sums[kScanThreads];
  const int64_t per = (count + kScanThreads - 1) / kScanThreads;
  const int64_t lo = threadIdx.x * per, hi = lo + per < count ? lo + per : count;
  int32_t own = 0;
  for (int64_t i = lo; i < hi; ++i) own += hist[i];
  sums[threadIdx.x] = own;
  __syncthreads();
  for (int offset = 1; offset < kScanThreads; offset <<= 1) {  // inclusive scan of the threads' sums
    const int32_t add = static_cast<int>(threadIdx.x) >= offset ? sums[threadIdx.x - offset] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t running = sums[threadIdx.x] - own;
  for (int64_t i = lo; i < hi; ++i) {
    const int32_t c = hist[i];
    hist[i] = running;
    running += c;
  }
}

// keys_out/vals_out[offset of the item] = the item; vals_in null: the item's
// index is its value.
__global__ void __launch_bounds__(kSortThreads)
    RadixScatterKernel(const int32_t* keys_in, const int32_t* vals_in, int64_t n, int shift,
                       const int32_t* offsets, int32_t* keys_out, int32_t* vals_out) {
  __shared__ int32_t next[kRadix];  // this tile's next slot per digit
  __shared__ int32_t digits[kSortThreads];
  const int64_t tiles = gridDim.x, base = blockIdx.x * kSortTile;
  next[threadIdx.x] = offsets[threadIdx.x * tiles + blockIdx.x];
  for (int r = 0; r < kSortRounds; ++r) {
    const int64_t i = base + r * int64_t{kSortThreads} + threadIdx.x;
    const bool valid = i < n;
    const int32_t key = valid ? keys_in[i] : 0;
    const int d = valid ? (key >> shift) & (kRadix - 1) : -1;
    __syncthreads();  // the previous round's reads of digits and next are done
    digits[threadIdx.x] = d;
    __syncthreads();
    if (valid) {
      int rank = 0;
      for (int j = 0; j < static_cast<int>(threadIdx.x); ++j) rank += digits[j] == d ? 1 : 0;
      const int32_t at = next[d] + rank;
      keys_out[at] = key;
      vals_out[at] = vals_in != nullptr ? vals_in[i] : static_cast<int32_t>(i);
    }
    __syncthreads();  // every thread has read next[] for this round
    int count = 0;
    for (int j = 0; j < kSortThreads; ++j) count += digits[j] == static_cast<int>(threadIdx.x) ? 1 : 0;
    next[threadIdx.x] += count;
  }
}

// First index in [lo, hi) whose key is >= tok (hi when none); keys ascending.
__device__ __forceinline__ int64_t LowerBound(const int32_t* keys, int64_t lo, int64_t hi, int32_t tok) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < tok) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// First index in [lo, hi) whose key is > tok (hi when none).
__device__ __forceinline__ int64_t UpperBound(const int32_t* keys, int64_t lo, int64_t hi, int32_t tok) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] <= tok) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// dst[0..c) (= or +=) the sum of dout rows positions[from..to), column packs
// split over the block; `start` = dst's values or zeros.
template <int K, typename T>
__device__ __forceinline__ void SumRows(const T* dout, const int32_t* positions, int64_t from, int64_t to,
                                        int64_t c, bool from_dst, float* dst) {
  for (int64_t j = threadIdx.x * int64_t{K}; j < c; j += int64_t{blockDim.x} * K) {
    float acc[K];
    if (from_dst) {
      LoadFloats<K>(dst + j, acc);
    } else {
      for (int e = 0; e < K; ++e) acc[e] = 0.0f;
    }
    for (int64_t q = from; q < to; ++q) {
      float g[K];
      LoadFloats<K>(dout + positions[q] * c + j, g);
      for (int e = 0; e < K; ++e) acc[e] += g[e];
    }
    StoreFloats<K>(dst + j, acc);
  }
}

template <int K, typename T>
__global__ void __launch_bounds__(kEmbThreads)
    EmbeddingRunKernel(const int32_t* keys, const int32_t* positions, int64_t bt, int64_t c, const T* dout,
                       float* dwte, float* partials) {
  const int64_t chunk = blockIdx.x;
  const int64_t k0 = chunk * kEmbChunk, k1 = k0 + kEmbChunk < bt ? k0 + kEmbChunk : bt;
  for (int64_t k = k0; k < k1;) {
    const int32_t tok = keys[k];
    const int64_t e = UpperBound(keys, k, k1, tok);              // this chunk's piece [k, e)
    const int64_t rs = k == k0 ? LowerBound(keys, 0, k0, tok) : k;  // the run [rs, re)
    const int64_t re = e == k1 ? UpperBound(keys, k1, bt, tok) : e;
    if (re - rs <= kDirectRun) {
      if (rs == k) SumRows<K>(dout, positions, rs, re, c, true, dwte + tok * c);
    } else {
      const int slot = rs < k0 ? 0 : 1;
      SumRows<K>(dout, positions, k, e, c, false, partials + (chunk * 2 + slot) * c);
    }
    k = e;
  }
}

template <int K>
__global__ void __launch_bounds__(kEmbThreads)
    EmbeddingCarryKernel(const int32_t* keys, int64_t bt, int64_t c, const float* partials, float* dwte) {
  const int64_t chunk = blockIdx.x;
  const int64_t k0 = chunk * kEmbChunk, k1 = k0 + kEmbChunk < bt ? k0 + kEmbChunk : bt;
  const int32_t tok = keys[k1 - 1];
  const int64_t rs = LowerBound(keys, 0, k1, tok);
  const int64_t re = UpperBound(keys, k1, bt, tok);
  if (rs < k0 || re - rs <= kDirectRun) return;  // no long run starts here
  const int64_t last = (re - 1) / kEmbChunk;
  float* dst = dwte + tok * c;
  for (int64_t j = threadIdx.x * int64_t{K}; j < c; j += int64_t{blockDim.x} * K) {
    float acc[K], p[K];
    LoadFloats<K>(dst + j, acc);
    LoadFloats<K>(partials + (chunk * 2 + 1) * c + j, p);
    for (int e = 0; e < K; ++e) acc[e] += p[e];
    for (int64_t q = chunk + 1; q <= last; ++q) {
      LoadFloats<K>(partials + (q * 2) * c + j, p);
      for (int e = 0; e < K; ++e) acc[e] += p[e];
    }
    StoreFloats<K>(dst + j, acc);
  }
}

template <int K, typename T>
__global__ void __launch_bounds__(kThreads)
    PositionSumKernel(const T* dout, int64_t b, int64_t t, int64_t c, float* dwpe) {
  const int64_t packs = t * c / K;
  for (int64_t idx = GlobalThread(); idx < packs; idx += GlobalStride()) {
    float acc[K], g[K];
    LoadFloats<K>(dwpe + idx * K, acc);
    for (int64_t bi = 0; bi < b; ++bi) {
      LoadFloats<K>(dout + bi * t * c + idx * K, g);
      for (int e = 0; e < K; ++e) acc[e] += g[e];
    }
    StoreFloats<K>(dwpe + idx * K, acc);
  }
}

// ---- The backward's plan: host code shared by embedding.cu and the host tests ----

// The scratch's parts, each at a multiple of 256 bytes from its start: keys
// and values of the sort (two buffers each, ping-pong), the histograms, the
// long runs' partial sums.
struct BackwardScratch {
  int32_t* keys[2];
  int32_t* vals[2];
  int32_t* hist;    // [kRadix, SortTiles(bt)]
  float* partials;  // [RunChunks(bt), 2, c]
  int64_t floats;   // the scratch's size
};

inline BackwardScratch BackwardLayout(int64_t bt, int64_t c, float* base) {
  constexpr int64_t kAlignFloats = 64;  // 256 bytes
  BackwardScratch s{};
  int64_t offset = 0;  // in floats
  auto take = [&](int64_t floats) {
    float* at = base == nullptr ? nullptr : base + offset;
    offset += (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    return at;
  };
  for (int k = 0; k < 2; ++k) s.keys[k] = reinterpret_cast<int32_t*>(take(bt));
  for (int k = 0; k < 2; ++k) s.vals[k] = reinterpret_cast<int32_t*>(take(bt));
  s.hist = reinterpret_cast<int32_t*>(take(kRadix * SortTiles(bt)));
  s.partials = take(RunChunks(bt) * 2 * c);
  s.floats = offset;
  return s;
}

// Runs the backward's kernels in order through launch(kernel, grid, block,
// args...), which returns false when a launch fails (then this stops and
// returns false). bt = b * t > 0, c > 0; K = 1, or Pack<T>::kSize when c is
// whole packs and dout, dwte, dwpe and scratch are 16-byte aligned. scratch:
// BackwardLayout(bt, c, nullptr).floats floats.
template <int K, typename T, typename Launch>
bool RunBackward(Launch&& launch, const int32_t* tokens, const T* dout, int64_t b, int64_t t, int64_t v, int64_t c,
                 float* dwte, float* dwpe, float* scratch) {
  const int64_t bt = b * t;
  const BackwardScratch s = BackwardLayout(bt, c, scratch);
  const dim3 tiles(static_cast<unsigned>(SortTiles(bt)));
  const int64_t hist_entries = int64_t{kRadix} * SortTiles(bt);
  const int32_t* keys = tokens;
  const int32_t* vals = nullptr;  // the identity: positions in order
  int dst = 0;
  // Passes over 8 bits each, until the bits of v - 1 (the largest token) are covered.
  for (int shift = 0; shift == 0 || ((v - 1) >> shift) > 0; shift += 8) {
    const int64_t check_v = shift == 0 ? v : 0;
    if (!launch(RadixHistogramKernel, tiles, dim3(kSortThreads), keys, bt, shift, check_v, s.hist)) return false;
    if (!launch(RadixScanKernel, dim3(1), dim3(kScanThreads), s.hist, hist_entries)) return false;
    if (!launch(RadixScatterKernel, tiles, dim3(kSortThreads), keys, vals, bt, shift,
                static_cast<const int32_t*>(s.hist), s.keys[dst], s.vals[dst])) {
      return false;
    }
    keys = s.keys[dst];
    vals = s.vals[dst];
    dst ^= 1;
  }
  const dim3 chunks(static_cast<unsigned>(RunChunks(bt)));
  return launch(EmbeddingRunKernel<K, T>, chunks, dim3(kEmbThreads), keys, vals, bt, c, dout, dwte, s.partials) &&
         launch(EmbeddingCarryKernel<K>, chunks, dim3(kEmbThreads), keys, bt, c,
                static_cast<const float*>(s.partials), dwte) &&
         launch(PositionSumKernel<K, T>, dim3(GridFor(t * c / K)), dim3(kThreads), dout, b, t, c, dwpe);
}

}  // namespace ringmaster::kernels::embedding

#endif  // RINGMASTER_ENGINE_KERNELS_EMBEDDING_KERNELS_CUH_
