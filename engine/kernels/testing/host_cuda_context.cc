#include "engine/kernels/testing/host_cuda_context.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)

// host_cuda_switch_context(void** save_sp, void* new_sp): pushes rbp, rbx,
// r12-r15 and the MXCSR and x87 control words (what the System V ABI says a
// callee preserves), stores rsp in *save_sp, loads new_sp and pops the same
// from there.
asm(R"(
  .text
  .globl host_cuda_switch_context
  .hidden host_cuda_switch_context
  .type host_cuda_switch_context, @function
host_cuda_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size host_cuda_switch_context, .-host_cuda_switch_context
)");

extern "C" void host_cuda_switch_context(void** save_sp, void* new_sp);

namespace host_cuda::detail {

void MakeContext(Context* c, unsigned char* stack, size_t bytes, void (*entry)()) {
  // From the 16-byte aligned top down: a null return address for entry, the
  // address the switch's `ret` jumps to (entry, then entered with rsp % 16 ==
  // 8 as after a call), six zeroed registers, and the control words.
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<uint64_t*>(top);
  *--slot = 0;
  *--slot = reinterpret_cast<uint64_t>(entry);
  for (int i = 0; i < 6; ++i) *--slot = 0;
  uint32_t control[2] = {0, 0};
  asm volatile("stmxcsr %0" : "=m"(control[0]));
  asm volatile("fnstcw %0" : "=m"(control[1]));
  *--slot = 0;
  std::memcpy(slot, control, sizeof control);
  c->sp = slot;
}

void SwitchContext(Context* from, Context* to) { host_cuda_switch_context(&from->sp, to->sp); }

}  // namespace host_cuda::detail

#else  // !__x86_64__

namespace host_cuda::detail {

void MakeContext(Context* c, unsigned char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = bytes;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
}

void SwitchContext(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }

}  // namespace host_cuda::detail

#endif
