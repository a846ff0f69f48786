// The max pooling kernels' source (pooling_kernels.cuh) run on the host
// through host_cuda, against the CPU backend of each storage type (f32, f16,
// bf16), over planes x h x w, k, s = 1 x 1 x 1 (1, 1), 3 x 8 x 8 (2, 2: the
// CPU's 2 x 2 path), 2 x 7 x 9 (2, 2: a row and a column left over),
// 2 x 5 x 33 (3, 2: overlapping windows), 1 x 33 x 7 (2, 1) and 2 x 9 x 9
// (3, 3); inputs with many ties (values on a coarse grid) so the first
// maximum matters; every schedule; outputs start as NaN.
//
// Comparisons: value equality. The forward picks a stored value; the backward
// adds, per element, the gradients of the windows whose first maximum it is,
// in window order from 0 and rounds once, as the CPU does (the CPU's 2 x 2
// path stores the single gradient; equal up to the sign of a zero).

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/pooling_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using testing::Cpu;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::Values;

struct Case {
  int64_t planes, h, w, k, s;
  int64_t oh() const { return (h - k) / s + 1; }
  int64_t ow() const { return (w - k) / s + 1; }
  std::string Name() const {
    return std::to_string(planes) + " x " + std::to_string(h) + " x " + std::to_string(w) + " (k " +
           std::to_string(k) + ", s " + std::to_string(s) + ")";
  }
};
const Case kCases[] = {{1, 1, 1, 1, 1}, {3, 8, 8, 2, 2}, {2, 7, 9, 2, 2},
                       {2, 5, 33, 3, 2}, {1, 33, 7, 2, 1}, {2, 9, 9, 3, 3}};

template <typename T>
class MaxPoolTest : public ::testing::Test {};
TYPED_TEST_SUITE(MaxPoolTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(MaxPoolTest, ForwardAndBackwardMatchCpu) {
  using T = TypeParam;
  for (const Case& s : kCases) {
    const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh() * s.ow();
    std::vector<float> x = engine::testing::RandomVec(nx, 1, 0.0f, 4.0f);
    for (float& v : x) v = std::floor(v);  // 0..3: ties everywhere
    const std::vector<float> dy = RandomValues<T>(ny, 2);
    const Tensor tx = Tensor::FromVector({1, s.planes, s.h, s.w}, x);
    Tensor want_y = Tensor::FromVector({1, s.planes, s.oh(), s.ow()}, std::vector<float>(ny, 0.0f));
    Tensor want_dx = Tensor::FromVector({1, s.planes, s.h, s.w}, std::vector<float>(nx, 0.0f));
    Cpu<T>().MaxPool2dForward(tx, s.k, s.s, want_y);
    Cpu<T>().MaxPool2dBackward(tx, Tensor::FromVector({1, s.planes, s.oh(), s.ow()}, dy), s.k, s.s, want_dx);
    const std::vector<T> sx = Store<T>(x), sdy = Store<T>(dy);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(s.Name() + ", " + host_cuda::ToString(o));
      std::vector<T> y = NaNs<T>(ny), dx = NaNs<T>(nx);
      ASSERT_TRUE(host_cuda::Launch(o, dim3(GridFor(ny)), dim3(kThreads), 0, pooling::MaxPoolForwardKernel<T>,
                                    sx.data(), s.planes, s.h, s.w, s.k, s.s, s.oh(), s.ow(), y.data()));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(GridFor(nx)), dim3(kThreads), 0, pooling::MaxPoolBackwardKernel<T>,
                                    sx.data(), sdy.data(), s.planes, s.h, s.w, s.k, s.s, s.oh(), s.ow(), dx.data()));
      EXPECT_TRUE(SameValues(Load(y), Values(want_y)));
      EXPECT_TRUE(SameValues(Load(dx), Values(want_dx)));
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
