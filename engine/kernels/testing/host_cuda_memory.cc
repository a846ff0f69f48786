#include "engine/kernels/testing/host_cuda_memory.h"

#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace host_cuda::detail {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kNumSignals = 5;
constexpr size_t kAltStackBytes = size_t{64} << 10;

FaultHandlers::OnFault g_on_fault = nullptr;
struct sigaction g_previous[kNumSignals];

void RestorePrevious() {
  for (int i = 0; i < kNumSignals; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

void HandleFault(int signal, siginfo_t* info, void* context) {
  const void* stack_pointer = nullptr;
#if defined(__x86_64__)
  stack_pointer = reinterpret_cast<const void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  stack_pointer = reinterpret_cast<const void*>(static_cast<ucontext_t*>(context)->uc_mcontext.sp);
#endif
  if (g_on_fault != nullptr) g_on_fault(signal, info->si_addr, stack_pointer);
  // Not the harness's to report: the fault repeats under the previous handler.
  RestorePrevious();
}

}  // namespace

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

GuardedMapping::GuardedMapping(size_t bytes, Guard guard) : bytes_(bytes), guard_(guard) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("host_cuda: mmap");
    std::abort();
  }
  base_ = static_cast<unsigned char*>(p);
  unsigned char* guard_page = guard == Guard::kFirstPage ? base_ : base_ + bytes - PageBytes();
  if (mprotect(guard_page, PageBytes(), PROT_NONE) != 0) {
    std::perror("host_cuda: mprotect");
    std::abort();
  }
}

GuardedMapping::GuardedMapping(GuardedMapping&& other) noexcept
    : base_(other.base_), bytes_(other.bytes_), guard_(other.guard_) {
  other.base_ = nullptr;
  other.bytes_ = 0;
}

GuardedMapping& GuardedMapping::operator=(GuardedMapping&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    guard_ = other.guard_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

GuardedMapping::~GuardedMapping() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

unsigned char* GuardedMapping::usable() const { return guard_ == Guard::kFirstPage ? base_ + PageBytes() : base_; }

size_t GuardedMapping::usable_bytes() const { return bytes_ - PageBytes(); }

bool GuardedMapping::InGuard(const void* address) const {
  const unsigned char* guard_page = guard_ == Guard::kFirstPage ? base_ : base_ + bytes_ - PageBytes();
  const auto* a = static_cast<const unsigned char*>(address);
  return base_ != nullptr && a >= guard_page && a < guard_page + PageBytes();
}

bool FindThreadLocalBlock(const void* anchor, unsigned char** begin, size_t* bytes) {
  struct Search {
    const unsigned char* anchor;
    unsigned char* begin = nullptr;
    size_t bytes = 0;
  } search{static_cast<const unsigned char*>(anchor)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t /*size*/, void* data) -> int {
        Search& s = *static_cast<Search*>(data);
        if (info->dlpi_tls_data == nullptr) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          auto* tls = static_cast<unsigned char*>(info->dlpi_tls_data);
          if (ph.p_type == PT_TLS && s.anchor >= tls && s.anchor < tls + ph.p_memsz) {
            s.begin = tls;
            s.bytes = ph.p_memsz;
            return 1;
          }
        }
        return 0;
      },
      &search);
  *begin = search.begin;
  *bytes = search.bytes;
  return search.begin != nullptr;
}

namespace {
std::vector<unsigned char>& AltStack() {
  static std::vector<unsigned char> stack(kAltStackBytes);
  return stack;
}
}  // namespace

FaultHandlers::FaultHandlers(OnFault on_fault) {
  stack_t alt{};
  alt.ss_sp = AltStack().data();
  alt.ss_size = AltStack().size();
  sigaltstack(&alt, nullptr);
  g_on_fault = on_fault;
  struct sigaction action {};
  action.sa_sigaction = &HandleFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kNumSignals; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

FaultHandlers::~FaultHandlers() {
  RestorePrevious();
  g_on_fault = nullptr;
  stack_t off{};
  off.ss_flags = SS_DISABLE;
  sigaltstack(&off, nullptr);
}

}  // namespace host_cuda::detail
