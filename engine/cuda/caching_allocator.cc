#include "engine/cuda/caching_allocator.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/core/check.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

constexpr size_t kMinLargeRemainder = size_t{1} << 20;

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

}  // namespace

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->pool, a->stream, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->pool, b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr));
}

CachingAllocator::CachingAllocator(std::unique_ptr<RawDeviceAllocator> raw) : raw_(std::move(raw)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!allocated_.empty()) {
    spdlog::error("CachingAllocator destroyed with {} blocks ({} bytes) still allocated; leaking them",
                  allocated_.size(), stats_.allocated_bytes);
  }
  ReleaseFreeSegments(small_free_, /*graph_pools_too=*/true);
  ReleaseFreeSegments(large_free_, /*graph_pools_too=*/true);
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes == 0) return kSmallRound;
  if (bytes <= kSmallLimit) return RoundUp(bytes, kSmallRound);
  return RoundUp(bytes, kLargeRound);
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, uintptr_t stream) {
  const size_t size = RoundSize(bytes);
  const bool small = size <= kSmallLimit;
  std::lock_guard<std::mutex> lock(mutex_);
  Pool& pool = small ? small_free_ : large_free_;
  auto use = stream_pool_.find(stream);
  const uint64_t graph_pool = use == stream_pool_.end() ? 0 : use->second.pool;
  Block* block = FindFree(pool, size, stream, graph_pool);
  if (block != nullptr) {
    ++stats_.cache_hits;
  } else {
    if (use != stream_pool_.end() && use->second.mode == PoolMode::kCapture) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "CachingAllocator: %d bytes for a stream under CUDA graph capture, and graph pool %d has no free block "
          "for them; cudaMalloc would invalidate the capture (warm the pool with an eager step first)",
          size, graph_pool));
    }
    const size_t segment = small ? kSmallSegment : size;
    absl::StatusOr<Block*> fresh = NewSegment(segment, stream, small, graph_pool);
    if (!fresh.ok() && fresh.status().code() == absl::StatusCode::kResourceExhausted) {
      if (captures_ > 0) {
        return absl::ResourceExhaustedError(absl::StrCat(
            fresh.status().message(),
            "; cached segments are not given back (cudaFree) while a CUDA graph capture is under way"));
      }
      ReleaseFreeSegments(small_free_);
      ReleaseFreeSegments(large_free_);
      fresh = NewSegment(segment, stream, small, graph_pool);
    }
    if (!fresh.ok()) return fresh.status();
    block = *fresh;
  }
  MaybeSplit(block, size, pool);
  block->allocated = true;
  allocated_[block->ptr] = block;
  NoteAllocated(block->size);
  return block->ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  ENGINE_CHECK(it != allocated_.end(), "CachingAllocator::Free of a pointer it did not allocate");
  Block* block = it->second;
  allocated_.erase(it);
  block->allocated = false;
  stats_.allocated_bytes -= block->size;
  Pool& pool = block->small ? small_free_ : large_free_;
  // Merge with free neighbours of the same segment (same stream and pool by construction).
  if (block->prev != nullptr && !block->prev->allocated) {
    Block* prev = block->prev;
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (block->next != nullptr && !block->next->allocated) {
    Block* next = block->next;
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captures_ > 0) return;  // cudaFree may synchronise the device: not during a capture
  ReleaseFreeSegments(small_free_);
  ReleaseFreeSegments(large_free_);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::BeginPool(uint64_t pool, uintptr_t stream, PoolMode mode) {
  ENGINE_CHECK(pool != 0, "CachingAllocator::BeginPool: pool id 0 is the shared cache");
  std::lock_guard<std::mutex> lock(mutex_);
  ENGINE_CHECK(stream_pool_.count(stream) == 0, "CachingAllocator::BeginPool: the stream is already in a pool");
  stream_pool_[stream] = {pool, mode};
  if (mode == PoolMode::kCapture) ++captures_;
}

void CachingAllocator::EndPool(uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto use = stream_pool_.find(stream);
  if (use == stream_pool_.end()) return;
  if (use->second.mode == PoolMode::kCapture) --captures_;
  stream_pool_.erase(use);
}

void CachingAllocator::ReleasePool(uint64_t pool) {
  ENGINE_CHECK(pool != 0, "CachingAllocator::ReleasePool: pool id 0 is the shared cache");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [stream, use] : stream_pool_) {
    ENGINE_CHECK(use.pool != pool, "CachingAllocator::ReleasePool of a pool a stream still allocates from");
  }
  // Every block of a segment has the segment's pool: retag them all, the free
  // ones re-sorted into the shared cache.
  for (Pool* free_set : {&small_free_, &large_free_}) {
    std::vector<Block*> moved;
    for (auto it = free_set->begin(); it != free_set->end();) {
      if ((*it)->pool == pool) {
        moved.push_back(*it);
        it = free_set->erase(it);
      } else {
        ++it;
      }
    }
    for (Block* b : moved) {
      b->pool = 0;
      free_set->insert(b);
    }
  }
  for (auto& [ptr, b] : allocated_) {
    if (b->pool == pool) b->pool = 0;
  }
}

size_t CachingAllocator::PoolBytes(uint64_t pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const Pool* free_set : {&small_free_, &large_free_}) {
    for (const Block* b : *free_set) bytes += b->pool == pool ? b->size : 0;
  }
  for (const auto& [ptr, b] : allocated_) bytes += b->pool == pool ? b->size : 0;
  return bytes;
}

size_t CachingAllocator::PoolAllocatedBytes(uint64_t pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& [ptr, b] : allocated_) bytes += b->pool == pool ? b->size : 0;
  return bytes;
}

CachingAllocator::Block* CachingAllocator::FindFree(Pool& pool, size_t size, uintptr_t stream, uint64_t graph_pool) {
  Block key;
  key.pool = graph_pool;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->pool != graph_pool || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // A large request does not take a block more than twice its size (it would
  // pin a big segment for a small tensor); small segments are split freely.
  if (!block->small && block->size > 2 * size) return nullptr;
  pool.erase(it);
  return block;
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::NewSegment(size_t segment_size, uintptr_t stream,
                                                                        bool small, uint64_t graph_pool) {
  absl::StatusOr<void*> ptr = raw_->Malloc(segment_size);
  if (!ptr.ok()) return ptr.status();
  ++stats_.raw_mallocs;
  stats_.reserved_bytes += segment_size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  Block* block = new Block;
  block->ptr = *ptr;
  block->size = segment_size;
  block->stream = stream;
  block->pool = graph_pool;
  block->small = small;
  return block;
}

void CachingAllocator::MaybeSplit(Block* block, size_t size, Pool& pool) {
  const size_t rest = block->size - size;
  if (rest == 0 || (!block->small && rest < kMinLargeRemainder)) return;
  Block* tail = new Block;
  tail->ptr = static_cast<char*>(block->ptr) + size;
  tail->size = rest;
  tail->stream = block->stream;
  tail->pool = block->pool;
  tail->small = block->small;
  tail->prev = block;
  tail->next = block->next;
  if (block->next != nullptr) block->next->prev = tail;
  block->next = tail;
  block->size = size;
  pool.insert(tail);
}

void CachingAllocator::ReleaseFreeSegments(Pool& pool, bool graph_pools_too) {
  std::vector<Block*> whole;
  for (Block* b : pool) {
    if ((b->pool == 0 || graph_pools_too) && b->prev == nullptr && b->next == nullptr) whole.push_back(b);
  }
  for (Block* b : whole) {
    pool.erase(b);
    raw_->Free(b->ptr);
    stats_.reserved_bytes -= b->size;
    delete b;
  }
}

void CachingAllocator::NoteAllocated(size_t size) {
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
}

}  // namespace ringmaster::engine
