#include "engine/cuda/caching_allocator.h"

#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

// Host memory standing in for device memory, with a capacity and a record of
// the segments it handed out.
class FakeRawAllocator : public RawDeviceAllocator {
 public:
  struct State {
    size_t capacity = size_t{1} << 30;
    size_t in_use = 0;
    int mallocs = 0;
    int frees = 0;
    std::set<void*> live;
  };
  explicit FakeRawAllocator(State* state) : state_(state) {}
  absl::StatusOr<void*> Malloc(size_t bytes) override {
    if (state_->in_use + bytes > state_->capacity) return absl::ResourceExhaustedError("fake device full");
    void* p = std::malloc(bytes);
    state_->in_use += bytes;
    ++state_->mallocs;
    state_->live.insert(p);
    sizes_[p] = bytes;
    return p;
  }
  void Free(void* ptr) override {
    ASSERT_EQ(state_->live.erase(ptr), 1u) << "double or foreign free";
    state_->in_use -= sizes_[ptr];
    ++state_->frees;
    std::free(ptr);
  }

 private:
  State* state_;
  std::unordered_map<void*, size_t> sizes_;
};

constexpr uintptr_t kStream = 1;
constexpr uintptr_t kOtherStream = 2;
constexpr size_t kMiB = size_t{1} << 20;

TEST(CachingAllocatorTest, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB), kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(5 * kMiB), 6 * kMiB);
}

TEST(CachingAllocatorTest, SmallBlocksShareASegmentAndAreReusedAfterFree) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  void* a = *alloc.Allocate(100, kStream);
  void* b = *alloc.Allocate(1000, kStream);
  EXPECT_EQ(state.mallocs, 1) << "both fit one 2 MiB small segment";
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 512);
  EXPECT_EQ(alloc.stats().allocated_bytes, 512u + 1024u);
  EXPECT_EQ(alloc.stats().reserved_bytes, CachingAllocator::kSmallSegment);
  alloc.Free(a);
  void* c = *alloc.Allocate(200, kStream);
  EXPECT_EQ(c, a) << "the freed 512-byte block is the best fit";
  EXPECT_EQ(state.mallocs, 1);
  EXPECT_GE(alloc.stats().cache_hits, 2);
  alloc.Free(b);
  alloc.Free(c);
  EXPECT_EQ(alloc.stats().allocated_bytes, 0u);
  EXPECT_EQ(alloc.stats().peak_allocated_bytes, 1536u);
}

TEST(CachingAllocatorTest, FreedNeighboursMergeSoTheSegmentCanBeReleased) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(*alloc.Allocate(4096, kStream));
  // Free in an interleaved order: merging must happen on both sides.
  for (int i : {1, 3, 0, 2, 5, 7, 6, 4}) alloc.Free(blocks[i]);
  alloc.EmptyCache();
  EXPECT_EQ(state.frees, 1);
  EXPECT_TRUE(state.live.empty());
  EXPECT_EQ(alloc.stats().reserved_bytes, 0u);
}

TEST(CachingAllocatorTest, LargeBlocksAreSplitAndTheRemainderReused) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  void* big = *alloc.Allocate(20 * kMiB, kStream);
  alloc.Free(big);
  void* first = *alloc.Allocate(12 * kMiB, kStream);
  EXPECT_EQ(first, big);
  void* second = *alloc.Allocate(8 * kMiB, kStream);
  EXPECT_EQ(static_cast<char*>(second), static_cast<char*>(big) + 12 * kMiB);
  EXPECT_EQ(state.mallocs, 1);
  alloc.Free(first);
  alloc.Free(second);
}

TEST(CachingAllocatorTest, ALargeRequestDoesNotPinAMuchBiggerBlock) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  void* big = *alloc.Allocate(64 * kMiB, kStream);
  void* keep = *alloc.Allocate(2 * kMiB, kStream);  // a second segment
  alloc.Free(big);
  void* small_large = *alloc.Allocate(4 * kMiB, kStream);
  EXPECT_NE(small_large, big);
  EXPECT_EQ(state.mallocs, 3);
  alloc.Free(keep);
  alloc.Free(small_large);
}

TEST(CachingAllocatorTest, BlocksAreReusedOnlyOnTheirStream) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  void* a = *alloc.Allocate(4 * kMiB, kStream);
  alloc.Free(a);
  void* b = *alloc.Allocate(4 * kMiB, kOtherStream);
  EXPECT_NE(a, b);
  void* c = *alloc.Allocate(4 * kMiB, kStream);
  EXPECT_EQ(a, c);
  alloc.Free(b);
  alloc.Free(c);
}

TEST(CachingAllocatorTest, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeRawAllocator::State state;
  state.capacity = 10 * kMiB;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  void* a = *alloc.Allocate(6 * kMiB, kStream);
  alloc.Free(a);  // cached, still reserved
  absl::StatusOr<void*> b = alloc.Allocate(8 * kMiB, kOtherStream);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(state.frees, 1) << "the cached 6 MiB segment was given back";
  absl::StatusOr<void*> c = alloc.Allocate(4 * kMiB, kStream);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  alloc.Free(*b);
}

TEST(CachingAllocatorTest, ConcurrentAllocateAndFreeKeepTheBooksStraight) {
  FakeRawAllocator::State state;
  CachingAllocator alloc(std::make_unique<FakeRawAllocator>(&state));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&alloc, t] {
      std::vector<void*> mine;
      for (int i = 0; i < 500; ++i) {
        mine.push_back(*alloc.Allocate(512 * (1 + (i * 7 + t) % 50), kStream));
        if (i % 3 == 2) {
          alloc.Free(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) alloc.Free(p);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(alloc.stats().allocated_bytes, 0u);
  alloc.EmptyCache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0u);
  EXPECT_TRUE(state.live.empty());
}

// A graph pool: blocks allocated inside it are never handed out outside it,
// even once freed, until ReleasePool; entering it again reuses its blocks.
TEST(CachingAllocatorTest, GraphPoolBlocksStayInThePoolUntilReleased) {
  FakeRawAllocator::State state;
  CachingAllocator allocator(std::make_unique<FakeRawAllocator>(&state));
  constexpr uint64_t kPool = 7;
  allocator.BeginPool(kPool, kStream);
  void* persistent = *allocator.Allocate(4 * kMiB, kStream);  // e.g. an activation the graph keeps
  void* temp = *allocator.Allocate(1024, kStream);            // freed during capture
  allocator.Free(temp);
  allocator.EndPool(kStream);
  EXPECT_EQ(state.mallocs, 2);
  EXPECT_EQ(allocator.PoolBytes(kPool), 4 * kMiB + CachingAllocator::kSmallSegment);
  EXPECT_EQ(allocator.PoolAllocatedBytes(kPool), 4 * kMiB);

  // Outside the pool, the same sizes do not get the pool's blocks.
  void* outside_small = *allocator.Allocate(1024, kStream);
  EXPECT_NE(outside_small, temp);
  allocator.Free(persistent);  // the graph's tensor dropped: still the pool's
  void* outside_large = *allocator.Allocate(4 * kMiB, kStream);
  EXPECT_NE(outside_large, persistent);
  EXPECT_EQ(state.mallocs, 4);
  EXPECT_EQ(allocator.PoolBytes(kPool), 4 * kMiB + CachingAllocator::kSmallSegment);
  EXPECT_EQ(allocator.PoolAllocatedBytes(kPool), 0u);

  // EmptyCache and an out-of-memory retry keep the pool's free segments.
  allocator.EmptyCache();
  EXPECT_EQ(state.live.count(persistent), 1u);
  EXPECT_EQ(state.live.count(temp), 1u);

  // A second capture into the pool reuses its blocks without a raw malloc.
  allocator.BeginPool(kPool, kStream);
  void* again_large = *allocator.Allocate(4 * kMiB, kStream);
  void* again_small = *allocator.Allocate(1024, kStream);
  allocator.EndPool(kStream);
  EXPECT_EQ(again_large, persistent);
  EXPECT_EQ(again_small, temp);
  EXPECT_EQ(state.mallocs, 4);
  allocator.Free(again_small);

  // Released (the graph destroyed): the free blocks join the shared cache,
  // and so does a block still allocated once it is freed.
  allocator.ReleasePool(kPool);
  EXPECT_EQ(allocator.PoolBytes(kPool), 0u);
  void* shared_small = *allocator.Allocate(1024, kStream);
  EXPECT_EQ(state.mallocs, 4);
  allocator.Free(again_large);
  allocator.Free(outside_large);
  allocator.Free(outside_small);
  allocator.Free(shared_small);
  allocator.EmptyCache();
  EXPECT_TRUE(state.live.empty());
  EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
}

TEST(CachingAllocatorTest, GraphPoolIsPerStreamAndFreedSegmentsGoBackOnDestruction) {
  FakeRawAllocator::State state;
  {
    CachingAllocator allocator(std::make_unique<FakeRawAllocator>(&state));
    allocator.BeginPool(1, kStream);
    void* in_pool = *allocator.Allocate(1024, kStream);
    void* other_stream = *allocator.Allocate(1024, kOtherStream);  // not capturing: shared cache
    allocator.EndPool(kStream);
    EXPECT_EQ(allocator.PoolAllocatedBytes(1), 512u * 2);
    allocator.Free(in_pool);
    allocator.Free(other_stream);
    EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
  }
  EXPECT_TRUE(state.live.empty());  // the pool's free segment too
}

// A capture (PoolMode::kCapture) is served from its pool's free blocks only:
// a miss is RESOURCE_EXHAUSTED and the raw allocator is not called, where the
// eager warm-up in the same pool allocated freely.
TEST(CachingAllocatorTest, ACaptureNeverCallsTheRawAllocator) {
  FakeRawAllocator::State state;
  CachingAllocator allocator(std::make_unique<FakeRawAllocator>(&state));
  constexpr uint64_t kPool = 3;
  allocator.BeginPool(kPool, kStream);  // eager by default: a warm-up step
  void* large = *allocator.Allocate(4 * kMiB, kStream);
  void* small = *allocator.Allocate(1024, kStream);
  allocator.Free(large);
  allocator.Free(small);
  allocator.EndPool(kStream);
  ASSERT_EQ(state.mallocs, 2);

  allocator.BeginPool(kPool, kStream, CachingAllocator::PoolMode::kCapture);
  absl::StatusOr<void*> again_large = allocator.Allocate(4 * kMiB, kStream);
  absl::StatusOr<void*> again_small = allocator.Allocate(1024, kStream);
  ASSERT_TRUE(again_large.ok()) << again_large.status();
  ASSERT_TRUE(again_small.ok()) << again_small.status();
  EXPECT_EQ(*again_large, large);
  EXPECT_EQ(*again_small, small);
  absl::StatusOr<void*> unwarmed = allocator.Allocate(8 * kMiB, kStream);
  EXPECT_EQ(unwarmed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(unwarmed.status().message(),
            "CachingAllocator: 8388608 bytes for a stream under CUDA graph capture, and graph pool 3 has no free "
            "block for them; cudaMalloc would invalidate the capture (warm the pool with an eager step first)");
  EXPECT_EQ(state.mallocs, 2) << "the raw allocator was called during the capture";
  EXPECT_EQ(state.frees, 0);
  allocator.Free(*again_large);
  allocator.Free(*again_small);
  allocator.EndPool(kStream);

  // The capture over, the same request allocates (the step runs eagerly).
  void* eager = *allocator.Allocate(8 * kMiB, kStream);
  EXPECT_EQ(state.mallocs, 3);
  allocator.Free(eager);
}

// Out of memory while a capture is under way: nothing is given back (cudaFree
// would break the capture), neither for the capturing stream nor for another
// stream, nor by EmptyCache; once the capture ends, the retry empties the
// cache again.
TEST(CachingAllocatorTest, OutOfMemoryDuringACaptureGivesNothingBack) {
  FakeRawAllocator::State state;
  state.capacity = 10 * kMiB;
  CachingAllocator allocator(std::make_unique<FakeRawAllocator>(&state));
  constexpr uint64_t kPool = 5;
  void* cached = *allocator.Allocate(6 * kMiB, kOtherStream);
  allocator.Free(cached);  // cached in the shared cache, still reserved

  allocator.BeginPool(kPool, kStream, CachingAllocator::PoolMode::kCapture);
  absl::StatusOr<void*> captured = allocator.Allocate(8 * kMiB, kStream);
  EXPECT_EQ(captured.status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<void*> other = allocator.Allocate(8 * kMiB, kOtherStream);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(other.status().message(),
            "fake device full; cached segments are not given back (cudaFree) while a CUDA graph capture is under way");
  allocator.EmptyCache();
  EXPECT_EQ(state.frees, 0) << "a segment was given back during the capture";
  EXPECT_EQ(state.live.count(cached), 1u);
  EXPECT_EQ(allocator.stats().reserved_bytes, 6 * kMiB);
  allocator.EndPool(kStream);

  absl::StatusOr<void*> after = allocator.Allocate(8 * kMiB, kOtherStream);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(state.frees, 1) << "after the capture the cached 6 MiB segment is given back for the retry";
  allocator.Free(*after);
}

// Eager use of a pool (warm-up) keeps the out-of-memory retry, and ending a
// capture on one stream while an eager pool is open on another leaves no
// capture counted.
TEST(CachingAllocatorTest, AnEagerPoolStillEmptiesTheCacheOnOutOfMemory) {
  FakeRawAllocator::State state;
  state.capacity = 10 * kMiB;
  CachingAllocator allocator(std::make_unique<FakeRawAllocator>(&state));
  void* cached = *allocator.Allocate(6 * kMiB, kOtherStream);
  allocator.Free(cached);
  allocator.BeginPool(9, kOtherStream, CachingAllocator::PoolMode::kCapture);
  allocator.EndPool(kOtherStream);
  allocator.BeginPool(7, kStream, CachingAllocator::PoolMode::kEager);
  absl::StatusOr<void*> warm = allocator.Allocate(8 * kMiB, kStream);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(state.frees, 1);
  allocator.Free(*warm);
  allocator.EndPool(kStream);
  allocator.ReleasePool(7);
  allocator.ReleasePool(9);
}

}  // namespace
}  // namespace ringmaster::engine
