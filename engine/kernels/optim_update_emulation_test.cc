// The fused optimizer kernels' source (optim_update_kernels.cuh, with the
// norms of grad_norm_kernels.cuh) run on the host through host_cuda, in the
// launchers' sequences, against engine/optim/cpu_update.h's update rules
// entry by entry, over a table of entries of 1, 31, 33, 1000, 4099, 0 and
// 9000 elements, decayed (trust) and excluded entries alternating: SGD
// (plain, momentum, Nesterov), AdamW, LARS (momentum and none) and LAMB. Each
// with the host's grad scale alone, with a control block's clip factor, with
// the control's skip (nothing may change), and with the control's learning
// rate and step (a replayed graph); every schedule.
//
// Comparisons. SGD and AdamW: bitwise (the same fp32 expressions, contracted
// alike; the fp64 bias corrections formed alike). LARS and LAMB: their trust
// ratios come from fp64 norms summed in another order (a chunk tree here, 8
// lanes on the CPU), which can move the fp32 ratio by an ulp: so within
// 2^-22 of the step (|w0 - w|, or the state's new term) plus an ulp of the
// value; everything else about them exactly as for SGD and AdamW.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/grad_norm_kernels.cuh"
#include "engine/kernels/optim_update_kernels.cuh"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/kernels/emulation_test_util.h"
#include "engine/kernels/optim_emulation_test_util.h"
#include "engine/optim/cpu_update.h"

namespace ringmaster::kernels {
namespace {

namespace cpu = engine::optim;
using testing::HostTable;
using testing::SameValues;
using testing::Within;

constexpr float kHostGradScale = 1.0f / 1024.0f;
constexpr float kWeightDecay = 0.01f;

// How a step gets its factor, learning rate and step count.
enum class Control { kNone, kClip, kSkip, kDeviceHyper };
const Control kControls[] = {Control::kNone, Control::kClip, Control::kSkip, Control::kDeviceHyper};
const char* Name(Control c) {
  switch (c) {
    case Control::kNone: return "no control";
    case Control::kClip: return "clip factor";
    case Control::kSkip: return "skip";
    case Control::kDeviceHyper: return "device lr and step";
  }
  return "?";
}

struct StepSetup {
  DeviceStepControl block;
  const DeviceStepControl* control = nullptr;
  float s = kHostGradScale;  // the gradient factor the CPU applies
  float lr;
  int64_t step;
  bool skip = false;
};

StepSetup Setup(Control c, float host_lr, int64_t host_step) {
  StepSetup u;
  u.lr = host_lr;
  u.step = host_step;
  if (c == Control::kNone) return u;
  u.block.grad_scale = 0.5f;  // a clip coefficient over the (unit) loss scale
  u.s = kHostGradScale * 0.5f;
  if (c == Control::kSkip) {
    u.block.skip = 1;
    u.skip = true;
  }
  if (c == Control::kDeviceHyper) {
    u.block.device_hyper = 1;
    u.block.lr = host_lr * 0.75f;
    u.block.optimizer_steps = host_step + 3;
    u.lr = u.block.lr;
    u.step = u.block.optimizer_steps + 1;
  }
  u.control = &u.block;
  return u;
}

// The arrays after a run, entry by entry: w, s0, s1 concatenated.
std::vector<float> Flat(const std::vector<std::vector<float>>& a) {
  std::vector<float> out;
  for (const auto& v : a) out.insert(out.end(), v.begin(), v.end());
  return out;
}

struct Scratch {
  std::vector<double> partials, w_sums, u_sums;
  explicit Scratch(const MultiTensorTable& t)
      : partials(t.num_chunks, std::numeric_limits<double>::quiet_NaN()),
        w_sums(t.num_entries, std::numeric_limits<double>::quiet_NaN()),
        u_sums(t.num_entries, std::numeric_limits<double>::quiet_NaN()) {}
};

// grad_norm.h's stage 1 and 2 into `sums` (the launchers' sequence).
void EntryNorms(const host_cuda::LaunchOptions& o, const MultiTensorTable& t, NormField f, Scratch& s,
                std::vector<double>& sums) {
  ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0, grad_norm::ChunkSumSquaresKernel, t,
                                f, s.partials.data()));
  ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_entries), dim3(kOptimThreads), 0, grad_norm::EntrySumsKernel, t,
                                s.partials.data(), sums.data()));
}

// Runs `kernel_run(options, table, setup)` on a fresh table and `cpu_run(table, setup)`
// on another with the same values, and compares them with `tolerance`
// (nullptr: bitwise); under kSkip the kernels must leave every array as it was.
template <typename KernelRun, typename CpuRun>
void Compare(const std::string& what, float lr, int64_t step, KernelRun kernel_run, CpuRun cpu_run, bool exact) {
  for (Control c : kControls) {
    const StepSetup u = Setup(c, lr, step);
    HostTable want(7, kWeightDecay);
    const std::vector<float> w0 = Flat(want.w), s00 = Flat(want.s0), s10 = Flat(want.s1);
    if (!u.skip) cpu_run(want, u);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(what + ", " + Name(c) + ", " + host_cuda::ToString(o));
      HostTable got(7, kWeightDecay);
      kernel_run(o, got.table(), u);
      if (::testing::Test::HasFatalFailure()) return;
      const std::vector<float> gw = Flat(got.w), ww = Flat(want.w);
      const std::vector<float> gs0 = Flat(got.s0), ws0 = Flat(want.s0), gs1 = Flat(got.s1), ws1 = Flat(want.s1);
      if (exact || u.skip) {
        EXPECT_TRUE(SameValues(gw, ww)) << "w";
        EXPECT_TRUE(SameValues(gs0, ws0)) << "state 0";
        EXPECT_TRUE(SameValues(gs1, ws1)) << "state 1";
        continue;
      }
      // The trust ratio's last ulp: 2^-22 of the change, plus an ulp of the value.
      const auto tol = [](const std::vector<float>& before, const std::vector<float>& after) {
        return [&before, &after](size_t i) {
          return std::ldexp(std::fabs(double{after[i]} - before[i]), -22) + testing::Ulp<float>(after[i]);
        };
      };
      EXPECT_TRUE(Within(gw, ww, tol(w0, ww))) << "w";
      EXPECT_TRUE(Within(gs0, ws0, tol(s00, ws0))) << "state 0";
      EXPECT_TRUE(Within(gs1, ws1, tol(s10, ws1))) << "state 1";
    }
  }
}

class SgdTest : public ::testing::TestWithParam<std::pair<float, bool>> {};

TEST_P(SgdTest, MatchesCpuUpdate) {
  const auto [momentum, nesterov] = GetParam();
  const float lr = 0.05f;
  Compare(
      "sgd", lr, 1,
      [&](const host_cuda::LaunchOptions& o, const MultiTensorTable& t, const StepSetup& u) {
        SgdHyper h;
        h.lr = lr;
        h.momentum = momentum;
        h.nesterov = nesterov ? 1 : 0;
        h.grad_scale = kHostGradScale;
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0, optim_update::SgdKernel, t, h,
                                      u.control));
      },
      [&](HostTable& t, const StepSetup& u) {
        for (size_t e = 0; e < t.entries.size(); ++e) {
          cpu::SgdArgs a;
          a.lr = u.lr;
          a.momentum = momentum;
          a.weight_decay = t.entries[e].weight_decay;
          a.nesterov = nesterov;
          a.grad_scale = u.s;
          cpu::SgdUpdate(t.w[e].data(), t.g[e].data(), t.s0[e].data(), t.w[e].size(), a);
        }
      },
      true);
}

INSTANTIATE_TEST_SUITE_P(Variants, SgdTest,
                         ::testing::Values(std::pair{0.0f, false}, std::pair{0.9f, false}, std::pair{0.9f, true}));

AdamHyper Adam(float lr, int64_t step, float eps) {
  AdamHyper h;
  h.lr = lr;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.eps = eps;
  h.step = step;
  h.grad_scale = kHostGradScale;
  return h;
}

TEST(AdamWTest, MatchesCpuUpdate) {
  const float lr = 1e-3f;
  const int64_t step = 3;
  Compare(
      "adamw", lr, step,
      [&](const host_cuda::LaunchOptions& o, const MultiTensorTable& t, const StepSetup& u) {
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0, optim_update::AdamWKernel, t,
                                      optim_update::MakeAdamConstants(Adam(lr, step, 1e-8f)), u.control));
      },
      [&](HostTable& t, const StepSetup& u) {
        for (size_t e = 0; e < t.entries.size(); ++e) {
          cpu::AdamWArgs a;
          a.lr = u.lr;
          a.eps = 1e-8f;
          a.weight_decay = t.entries[e].weight_decay;
          a.step = u.step;
          a.grad_scale = u.s;
          cpu::AdamWUpdate(t.w[e].data(), t.g[e].data(), t.s0[e].data(), t.s1[e].data(), t.w[e].size(), a);
        }
      },
      true);
}

class LarsTest : public ::testing::TestWithParam<float> {};

TEST_P(LarsTest, MatchesCpuUpdate) {
  const float momentum = GetParam(), lr = 0.1f, eta = 0.001f;
  Compare(
      "lars", lr, 1,
      [&](const host_cuda::LaunchOptions& o, const MultiTensorTable& t, const StepSetup& u) {
        Scratch s(t);
        EntryNorms(o, t, NormField::kWeights, s, s.w_sums);
        EntryNorms(o, t, NormField::kGrads, s, s.u_sums);
        LarsHyper h;
        h.lr = lr;
        h.momentum = momentum;
        h.trust_coefficient = eta;
        h.grad_scale = kHostGradScale;
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0, optim_update::LarsKernel, t, h,
                                      u.control, s.w_sums.data(), s.u_sums.data()));
      },
      [&](HostTable& t, const StepSetup& u) {
        for (size_t e = 0; e < t.entries.size(); ++e) {
          const int64_t n = t.w[e].size();
          cpu::LarsArgs a;
          a.lr = u.lr;
          a.momentum = momentum;
          a.grad_scale = u.s;
          if (t.entries[e].trust) {
            a.weight_decay = t.entries[e].weight_decay;
            const double w_norm = std::sqrt(cpu::SumSquares(t.w[e].data(), n));
            const double g_norm = std::sqrt(cpu::SumSquares(t.g[e].data(), n) * (double{u.s} * u.s));
            a.trust_ratio = cpu::LarsTrustRatio(w_norm, g_norm, eta, a.weight_decay);
          }
          cpu::LarsUpdate(t.w[e].data(), t.g[e].data(), t.s0[e].data(), n, a);
        }
      },
      false);
}

INSTANTIATE_TEST_SUITE_P(Momenta, LarsTest, ::testing::Values(0.0f, 0.9f));

TEST(LambTest, MatchesCpuUpdate) {
  const float lr = 2e-3f;
  const int64_t step = 2;
  Compare(
      "lamb", lr, step,
      [&](const host_cuda::LaunchOptions& o, const MultiTensorTable& t, const StepSetup& u) {
        const optim_update::AdamConstants c = optim_update::MakeAdamConstants(Adam(lr, step, 1e-6f));
        Scratch s(t);
        EntryNorms(o, t, NormField::kWeights, s, s.w_sums);
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0,
                                      optim_update::LambSumSquaresKernel, t, c, u.control, s.partials.data()));
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_entries), dim3(kOptimThreads), 0, grad_norm::EntrySumsKernel, t,
                                      s.partials.data(), s.u_sums.data()));
        ASSERT_TRUE(host_cuda::Launch(o, dim3(t.num_chunks), dim3(kOptimThreads), 0, optim_update::LambKernel, t, c,
                                      u.control, s.w_sums.data(), s.u_sums.data()));
      },
      [&](HostTable& t, const StepSetup& u) {
        for (size_t e = 0; e < t.entries.size(); ++e) {
          const int64_t n = t.w[e].size();
          cpu::LambArgs a;
          a.lr = u.lr;
          a.eps = 1e-6f;
          a.weight_decay = t.entries[e].weight_decay;
          a.step = u.step;
          a.grad_scale = u.s;
          if (t.entries[e].trust) {
            const double u_sum = cpu::LambUpdateSumSquares(t.w[e].data(), t.g[e].data(), t.s0[e].data(),
                                                           t.s1[e].data(), n, a);
            a.trust_ratio = cpu::LambTrustRatio(std::sqrt(cpu::SumSquares(t.w[e].data(), n)), std::sqrt(u_sum));
          }
          cpu::LambUpdate(t.w[e].data(), t.g[e].data(), t.s0[e].data(), t.s1[e].data(), n, a);
        }
      },
      false);
}

}  // namespace
}  // namespace ringmaster::kernels
