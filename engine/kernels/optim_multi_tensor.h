#ifndef RINGMASTER_ENGINE_KERNELS_OPTIM_MULTI_TENSOR_H_
#define RINGMASTER_ENGINE_KERNELS_OPTIM_MULTI_TENSOR_H_

// Multi-tensor apply: one kernel launch over many parameters. The host builds
// a table of MultiTensorEntry (device pointers and sizes, one per parameter or
// ZeRO shard of one) and the list of fixed-size chunks covering them
// (MakeTensorChunks), copies both to the device once, and passes the device
// copies to every launch: each thread block handles one chunk of one entry.
//
// Reductions (norms) are two-stage and deterministic: stage 1 writes one fp64
// partial sum per chunk (a fixed tree inside the block), stage 2 sums each
// entry's chunks (or all chunks) in a fixed order. No atomics, so the same
// inputs give bitwise the same sums on the same GPU.
//
// Plain C++ (no CUDA types): host code includes it with the host compiler.

#include <cstdint>
#include <vector>

namespace ringmaster::kernels {

// Elements per chunk (a block of kOptimThreads threads, 16 elements each).
inline constexpr int64_t kOptimChunkElements = 4096;
inline constexpr int kOptimThreads = 256;

// One parameter (or the slice of it this rank owns), on the device.
struct MultiTensorEntry {
  float* w = nullptr;        // fp32 master weights
  const float* g = nullptr;  // gradients as stored (times the loss scale)
  float* s0 = nullptr;       // state slot 0: momentum_buffer or exp_avg; null when none
  float* s1 = nullptr;       // state slot 1: exp_avg_sq; null when none
  int64_t n = 0;             // elements
  float weight_decay = 0.0f; // 0 for parameters excluded from decay
  int32_t trust = 0;         // 1: LARS/LAMB trust ratio applies (Parameter::decay)
  int32_t first_chunk = 0;   // this entry's chunks are [first_chunk, first_chunk + num_chunks)
  int32_t num_chunks = 0;
};

// Elements [start, min(start + kOptimChunkElements, n)) of entry `entry`.
struct TensorChunk {
  int32_t entry = 0;
  int32_t pad = 0;
  int64_t start = 0;
};

// Fills first_chunk/num_chunks of every entry and returns the chunk list
// (entries with n == 0 get no chunk).
inline std::vector<TensorChunk> MakeTensorChunks(std::vector<MultiTensorEntry>& entries) {
  std::vector<TensorChunk> chunks;
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].first_chunk = static_cast<int32_t>(chunks.size());
    for (int64_t start = 0; start < entries[i].n; start += kOptimChunkElements) {
      chunks.push_back(TensorChunk{static_cast<int32_t>(i), 0, start});
    }
    entries[i].num_chunks = static_cast<int32_t>(chunks.size()) - entries[i].first_chunk;
  }
  return chunks;
}

// The device copy of a table: what every launch takes.
struct MultiTensorTable {
  const MultiTensorEntry* entries = nullptr;  // device
  const TensorChunk* chunks = nullptr;        // device
  int num_entries = 0;
  int num_chunks = 0;
};

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_OPTIM_MULTI_TENSOR_H_
