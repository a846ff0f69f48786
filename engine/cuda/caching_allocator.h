#ifndef RINGMASTER_ENGINE_CUDA_CACHING_ALLOCATOR_H_
#define RINGMASTER_ENGINE_CUDA_CACHING_ALLOCATOR_H_

// CachingAllocator: device memory for the CUDA backend's tensors and
// workspaces, cached so that a training step (which allocates the same sizes
// every step) does not call cudaMalloc/cudaFree, which synchronise the device.
//
//  * Sizes are rounded up: to 512 B below 1 MiB ("small" blocks, carved from
//    2 MiB segments), to 2 MiB above ("large" blocks, segments of their own).
//    A cached block bigger than a request is split; the rest stays cached
//    (small: any remainder; large: when the remainder is at least 1 MiB).
//    Freed neighbours of one segment are merged again.
//  * Every block belongs to the stream it was allocated for. Free() returns it
//    to that stream's cache at once: later work on the same stream is ordered
//    after the work that used it, so no event is needed. A block used on
//    another stream must be kept alive by its user until that stream is done
//    with it (the communication code records and waits on events).
//  * When the raw allocator fails, the cache is emptied (cached segments are
//    given back) and the allocation retried once, except while a capture is
//    under way (below).
//  * Graph pools (CUDA graphs; as PyTorch's graph pools): between
//    BeginPool(pool, stream, mode) and EndPool(stream), allocations for
//    `stream` come from private pool `pool` (its own segments), not from the
//    shared cache. A pool block that is freed (during capture, or later when
//    its tensor is dropped) goes back to that pool only: the graph's kernels
//    keep using its address on every replay, so no other tensor may get it,
//    and EmptyCache and out-of-memory retries never give its segment back. A
//    pool entered again (a second capture into it, or an eager warm-up step)
//    reuses its free blocks. ReleasePool (once the graph is destroyed) hands
//    every block of the pool, free or still allocated, to the shared cache.
//  * Captures: a pool entered with PoolMode::kCapture serves a CUDA graph
//    capture on its stream, where cudaMalloc and cudaFree would invalidate
//    the capture. The raw allocator is then never called for that stream: a
//    request the pool's free blocks cannot serve is RESOURCE_EXHAUSTED (the
//    capture fails cleanly; the caller runs the work eagerly, which may
//    allocate). And while any capture is under way no segment is given back
//    (cudaFree may synchronise the device): EmptyCache does nothing, and an
//    allocation for another stream that the raw allocator cannot serve is
//    RESOURCE_EXHAUSTED without the emptying retry. PoolMode::kEager (warm-up
//    steps) allocates and retries as outside a pool.
//  * Streams are opaque keys here (a cudaStream_t cast to uintptr_t), so the
//    logic is plain C++ and tested against a fake raw allocator without a GPU.
// Thread-safe (the communication thread frees gradients buckets too).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace ringmaster::engine {

// Where segments come from: cudaMalloc/cudaFree in the backend, a fake in tests.
class RawDeviceAllocator {
 public:
  virtual ~RawDeviceAllocator() = default;
  // `bytes` of device memory; RESOURCE_EXHAUSTED when there is none left.
  virtual absl::StatusOr<void*> Malloc(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
};

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  size_t reserved_bytes = 0;        // in segments obtained from the raw allocator
  size_t peak_allocated_bytes = 0;  // since construction or ResetPeak()
  size_t peak_reserved_bytes = 0;
  int64_t raw_mallocs = 0;          // segments obtained from the raw allocator
  int64_t cache_hits = 0;           // allocations served from the cache
};

class CachingAllocator {
 public:
  static constexpr size_t kSmallRound = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;    // blocks <= this are small
  static constexpr size_t kSmallSegment = size_t{2} << 20;  // small blocks are carved from these
  static constexpr size_t kLargeRound = size_t{2} << 20;

  explicit CachingAllocator(std::unique_ptr<RawDeviceAllocator> raw);
  // Gives back every segment; blocks still allocated are a bug (logged, leaked).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The rounded size a request of `bytes` occupies.
  static size_t RoundSize(size_t bytes);

  // A block of at least `bytes` (a zero-byte request gets a 512-byte block) for
  // use on `stream`. RESOURCE_EXHAUSTED when the device is full even after
  // emptying the cache, or when a capture forbids asking the raw allocator
  // (see the top of this file; the message says which).
  absl::StatusOr<void*> Allocate(size_t bytes, uintptr_t stream);
  // Returns a block from Allocate to its stream's cache. nullptr is ignored.
  void Free(void* ptr);
  // Gives every wholly free segment back to the raw allocator (nothing while
  // a capture is under way).
  void EmptyCache();

  AllocatorStats stats() const;
  void ResetPeak();

  // What a graph pool serves between BeginPool and EndPool.
  enum class PoolMode {
    kEager,    // eager work (warm-up steps): allocates and retries as outside a pool
    kCapture,  // a CUDA graph capture on the stream: never calls the raw allocator
  };
  // Graph pools (see the top of this file). `pool` is any non-zero id the
  // caller picks; one stream allocates from at most one pool at a time.
  void BeginPool(uint64_t pool, uintptr_t stream, PoolMode mode = PoolMode::kEager);
  void EndPool(uintptr_t stream);
  void ReleasePool(uint64_t pool);
  // Bytes in blocks of `pool` (free and allocated), and how many of them are
  // allocated now.
  size_t PoolBytes(uint64_t pool) const;
  size_t PoolAllocatedBytes(uint64_t pool) const;

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    uintptr_t stream = 0;
    uint64_t pool = 0;  // 0: the shared cache; else a graph pool
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours inside one segment
    Block* next = nullptr;
  };
  // Free blocks ordered by (pool, stream, size, address): lower_bound finds the best fit.
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;

  Block* FindFree(Pool& pool, size_t size, uintptr_t stream, uint64_t graph_pool);
  absl::StatusOr<Block*> NewSegment(size_t segment_size, uintptr_t stream, bool small, uint64_t graph_pool);
  // Splits `block` so that it is `size` long, the rest going back to `pool`.
  void MaybeSplit(Block* block, size_t size, Pool& pool);
  // Gives back the wholly free segments of the shared cache (graph pools keep
  // theirs unless graph_pools_too: the destructor).
  void ReleaseFreeSegments(Pool& pool, bool graph_pools_too = false);
  void NoteAllocated(size_t size);

  std::unique_ptr<RawDeviceAllocator> raw_;
  mutable std::mutex mutex_;
  Pool small_free_;                                // guarded by mutex_
  Pool large_free_;                                // guarded by mutex_
  std::unordered_map<void*, Block*> allocated_;   // guarded by mutex_
  AllocatorStats stats_;                           // guarded by mutex_
  struct PoolUse {
    uint64_t pool = 0;
    PoolMode mode = PoolMode::kEager;
  };
  std::unordered_map<uintptr_t, PoolUse> stream_pool_;  // stream -> graph pool it allocates from; guarded
  int captures_ = 0;  // streams in a kCapture pool now; guarded by mutex_
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_CACHING_ALLOCATOR_H_
