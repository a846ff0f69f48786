// The toolchain smoke kernel's source (smoke_kernels.cuh) run on the host
// through host_cuda against the CPU backend's Axpy, over sizes 1, 31, 33,
// 1000 and 4099 (one element per thread: partial last blocks), in every
// schedule: bitwise (the same fp32 a * x + y, contracted alike); elements
// past n untouched.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernel uses its built-ins.
#include "engine/kernels/smoke_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

TEST(SmokeKernelTest, AxpyMatchesCpu) {
  for (int64_t n : testing::TestSizes()) {
    const std::vector<float> x = engine::testing::RandomVec(n, 1), y0 = engine::testing::RandomVec(n, 2);
    engine::Tensor want = testing::F32Tensor(y0);
    testing::Cpu<float>().Axpy(2.5f, testing::F32Tensor(x), want);
    const int blocks = static_cast<int>((n + smoke::kSmokeThreads - 1) / smoke::kSmokeThreads);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + host_cuda::ToString(o));
      std::vector<float> y = y0;
      y.push_back(NAN);  // one past the end: must stay as it is
      ASSERT_TRUE(host_cuda::Launch(o, dim3(blocks), dim3(smoke::kSmokeThreads), 0, smoke::AxpyKernel,
                                    static_cast<int>(n), 2.5f, x.data(), y.data()));
      EXPECT_TRUE(std::isnan(y.back()));
      y.pop_back();
      EXPECT_TRUE(testing::SameValues(y, testing::Values(want)));
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
