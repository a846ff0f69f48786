// Execution contexts of host_cuda's fibers: a stack, and the registers to
// resume it with. On x86-64 a hand-written switch saves the callee-saved
// registers and the floating-point control words, with no system call (a
// ucontext switch costs two: the signal mask); elsewhere, ucontext.
// Internal to the harness.
#ifndef RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_CONTEXT_H_
#define RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_CONTEXT_H_

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace host_cuda::detail {

struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;  // the saved registers sit on the stack below it
#else
  ucontext_t uc;
#endif
};

// Sets *c to start entry() on [stack, stack + bytes) when switched to; entry
// must never return (it switches away for good instead).
void MakeContext(Context* c, unsigned char* stack, size_t bytes, void (*entry)());

// Saves the running context in *from and resumes *to. Also callable from a
// signal handler running on an alternate stack, to leave it for good (the
// caller unblocks the signal first).
void SwitchContext(Context* from, Context* to);

}  // namespace host_cuda::detail

#endif  // RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_CONTEXT_H_
