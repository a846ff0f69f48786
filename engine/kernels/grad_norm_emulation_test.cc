// The fp64 sum-of-squares kernels' source (grad_norm_kernels.cuh) run on the
// host through host_cuda, in the launchers' sequence (chunk partials, entry
// sums, the total), over a table of entries of 1, 31, 33, 1000, 4099, 0 and
// 9000 elements (partial warps and chunks, an empty entry), weights and
// gradients, in every schedule; outputs start as NaN.
//
// Comparisons: against a long-double sum of the squares (the norm's exact
// value to well below fp64's precision): within 2 * n * 2^-53 relative (the
// fp64 summation bound). An empty entry sums to exactly 0. Every schedule
// gives bitwise the same sums (a fixed tree: deterministic).

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/grad_norm_kernels.cuh"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/kernels/optim_emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

constexpr double kF64Ulp = 1.0 / 9007199254740992.0;  // 2^-53

TEST(GradNormTest, SumsOfSquaresMatchAnExactSumAndAreDeterministic) {
  const testing::HostTable t(1, 0.0f);
  const MultiTensorTable table = t.table();
  for (NormField field : {NormField::kWeights, NormField::kGrads}) {
    const auto& x = field == NormField::kWeights ? t.w : t.g;
    std::vector<long double> exact(x.size(), 0.0L);
    long double total = 0.0L;
    int64_t elements = 0;
    for (size_t e = 0; e < x.size(); ++e) {
      for (float v : x[e]) exact[e] += static_cast<long double>(v) * v;
      total += exact[e];
      elements += static_cast<int64_t>(x[e].size());
    }
    std::vector<double> first;
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(std::string(field == NormField::kWeights ? "weights, " : "grads, ") + host_cuda::ToString(o));
      const double nan = std::numeric_limits<double>::quiet_NaN();
      std::vector<double> partials(table.num_chunks, nan), entry_sums(table.num_entries, nan);
      double sum = nan;
      ASSERT_TRUE(host_cuda::Launch(o, dim3(table.num_chunks), dim3(kOptimThreads), 0,
                                    grad_norm::ChunkSumSquaresKernel, table, field, partials.data()));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(table.num_entries), dim3(kOptimThreads), 0, grad_norm::EntrySumsKernel,
                                    table, partials.data(), entry_sums.data()));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(1), dim3(grad_norm::kTotalSumThreads), 0, grad_norm::TotalSumKernel,
                                    entry_sums.data(), table.num_entries, &sum));
      for (size_t e = 0; e < x.size(); ++e) {
        const double bound = 2.0 * static_cast<double>(x[e].size()) * kF64Ulp * static_cast<double>(exact[e]);
        EXPECT_NEAR(entry_sums[e], static_cast<double>(exact[e]), bound) << "entry " << e;
        if (x[e].empty()) {
          EXPECT_EQ(entry_sums[e], 0.0) << "entry " << e;
        }
      }
      EXPECT_NEAR(sum, static_cast<double>(total), 2.0 * elements * kF64Ulp * static_cast<double>(total));
      entry_sums.push_back(sum);
      if (first.empty()) {
        first = entry_sums;
      } else {
        for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(entry_sums[i], first[i]) << "sum " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
