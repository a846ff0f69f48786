// The memory host_cuda manages for a launch: fiber stacks and the dynamic
// shared memory, each with a PROT_NONE guard page, and the kernels'
// thread-local block (static __shared__ memory). Internal to the harness
// (host_cuda.cc); not thread-safe: one launch at a time.
#ifndef RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_MEMORY_H_
#define RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace host_cuda::detail {

size_t PageBytes();

// An anonymous mapping of `bytes` (a multiple of the page size) whose first
// or last page is a PROT_NONE guard. Movable, not copyable.
class GuardedMapping {
 public:
  enum class Guard { kFirstPage, kLastPage };
  GuardedMapping() = default;
  GuardedMapping(size_t bytes, Guard guard);  // CHECKs that the mapping succeeds
  GuardedMapping(GuardedMapping&& other) noexcept;
  GuardedMapping& operator=(GuardedMapping&& other) noexcept;
  GuardedMapping(const GuardedMapping&) = delete;
  GuardedMapping& operator=(const GuardedMapping&) = delete;
  ~GuardedMapping();

  // The usable bytes (all but the guard page).
  unsigned char* usable() const;
  size_t usable_bytes() const;
  bool InGuard(const void* address) const;

 private:
  unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
  Guard guard_ = Guard::kFirstPage;
};

// The calling thread's instance of the thread-local block of the module that
// holds `anchor` (a thread_local variable's address on this thread), or false.
bool FindThreadLocalBlock(const void* anchor, unsigned char** begin, size_t* bytes);

// While alive, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT on the calling thread run
// `on_fault(signal, address, stack_pointer)` (the faulting access and the
// stack pointer at the fault; null where unknown) on an alternate stack; when
// it returns, the previous handlers are restored and the fault repeats under
// them. At most one instance at a time.
class FaultHandlers {
 public:
  using OnFault = void (*)(int signal, const void* address, const void* stack_pointer);
  explicit FaultHandlers(OnFault on_fault);
  FaultHandlers(const FaultHandlers&) = delete;
  FaultHandlers& operator=(const FaultHandlers&) = delete;
  ~FaultHandlers();
};

}  // namespace host_cuda::detail

#endif  // RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_MEMORY_H_
