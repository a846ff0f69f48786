// CudaBackend attention against CpuBackend (probabilities saved, GEMMs) in
// every compute mode: the flash kernels for head sizes up to 64, the unfused
// path above. Outputs poisoned with NaN first; fresh random inputs per case.
// Tolerances (relative L2 norm): cuda_backend_test_util.h. The flash kernels
// use no tensor cores, so TF32 mode sees fp32 attention arithmetic.

#include <vector>

#include "engine/core/flash_attention_reference.h"
#include "engine/cuda/cuda_backend_test_util.h"

namespace ringmaster::engine::testing {
namespace {

class CudaAttentionTest : public CudaBackendTest {
 protected:
  struct Case {
    int64_t b, t, nh, hd;
  };

  // Forward and backward on both backends; returns the device's saved tensor.
  Tensor CheckCase(const Case& s, uint64_t seed) {
    const int64_t c = s.nh * s.hd;
    SCOPED_TRACE(::testing::Message() << "b=" << s.b << " t=" << s.t << " nh=" << s.nh << " hd=" << s.hd);
    Tensor qkv = Rand({s.b, s.t, 3 * c}, seed, -2.0f, 2.0f);
    Tensor saved = Poisoned(gpu_->AttentionSavedShape(s.b, s.nh, s.t, s.hd)), out = Poisoned({s.b, s.t, c});
    Tensor savedh = Tensor::Empty(cpu_->AttentionSavedShape(s.b, s.nh, s.t, s.hd)), outh = Tensor::Empty({s.b, s.t, c});
    Tensor qkv_dev = Up(qkv);
    gpu_->AttentionForward(qkv_dev, s.nh, saved, out);
    cpu_->AttentionForward(qkv, s.nh, savedh, outh);
    ExpectClose("attention out", out, outh);
    Tensor dout = Rand({s.b, s.t, c}, seed + 1);
    Tensor dqkv = Poisoned(qkv.shape()), dqkvh = Tensor::Empty(qkv.shape());
    gpu_->AttentionBackward(qkv_dev, saved, out, Up(dout), s.nh, dqkv);
    cpu_->AttentionBackward(qkv, savedh, outh, dout, s.nh, dqkvh);
    ExpectClose("attention dqkv", dqkv, dqkvh);
    return saved;
  }
};

TEST_P(CudaAttentionTest, FlashMatchesCpuBackendAndSavesLogsumexp) {
  // T not a multiple of the 64-row tiles, B * H > 1, T = 1, GPT-2's T = 1024 with hs = 64, hs padded (8, 16, 32).
  const Case cases[] = {{2, 17, 3, 8}, {1, 64, 4, 16}, {3, 5, 1, 32}, {2, 100, 3, 64},
                        {2, 1, 2, 64}, {1, 130, 2, 32}, {1, 1024, 2, 64}};
  uint64_t seed = 200;
  for (const Case& s : cases) {
    seed += 2;
    Tensor saved = CheckCase(s, seed);
    ASSERT_EQ(saved.shape(), (Shape{s.b, s.nh, s.t}));
    // The logsumexp is fp32 in every mode (inputs are the same rounded values): the CPU twin's within 1e-5.
    const int64_t c = s.nh * s.hd;
    const std::vector<float> qkv = Rand({s.b, s.t, 3 * c}, seed, -2.0f, 2.0f).ToVector();
    const ref::FlashForwardResult twin = ref::FlashAttentionForward(s.b, s.t, c, s.nh, qkv);
    EXPECT_LE(RelNorm(Down(saved), twin.lse), 1e-5) << "logsumexp, t=" << s.t << " hd=" << s.hd;
  }
}

TEST_P(CudaAttentionTest, HeadSizeAbove64KeepsTheUnfusedPath) {
  Tensor saved = CheckCase({2, 33, 2, 128}, 300);
  EXPECT_EQ(saved.shape(), (Shape{2, 2, 33, 33}));
}

TEST_P(CudaAttentionTest, FlashBackwardIsDeterministic) {
  const int64_t b = 2, t = 200, nh = 3, hd = 64, c = nh * hd;
  Tensor qkv = Up(Rand({b, t, 3 * c}, 400)), dout = Up(Rand({b, t, c}, 401));
  Tensor saved = gpu_->Empty(gpu_->AttentionSavedShape(b, nh, t, hd)), out = gpu_->Empty({b, t, c});
  gpu_->AttentionForward(qkv, nh, saved, out);
  Tensor d1 = Poisoned(qkv.shape()), d2 = Poisoned(qkv.shape());
  gpu_->AttentionBackward(qkv, saved, out, dout, nh, d1);
  gpu_->AttentionBackward(qkv, saved, out, dout, nh, d2);
  EXPECT_EQ(Down(d1), Down(d2));
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaAttentionTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace ringmaster::engine::testing
