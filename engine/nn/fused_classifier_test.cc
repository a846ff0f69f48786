// The GPT's fused, chunked classifier (LmHead::ForwardLoss through
// SoftmaxCrossEntropy::ForwardModel) against the unfused path (whole logits,
// then the softmax cross-entropy): equal losses within 1e-6 relative in fp32,
// equal gradients, nothing from the padded vocabulary rows, the same with
// many chunks and ignored targets, and in evaluation.
#include <cmath>

#include "engine/core/classifier_geometry.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/gpt.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::MaxRelDiff;

constexpr int64_t kB = 3, kT = 40, kVocab = 70;  // 120 rows; vocabulary padded to 128

ModelConfig Tiny() {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.seed = 21;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = kT;
  c.vocab_size = kVocab;
  return c;
}

Tensor Tokens(uint64_t seed, int32_t ignored_every = 0) {
  std::vector<int32_t> v(kB * kT);
  uint64_t x = seed;
  for (size_t i = 0; i < v.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<int32_t>((x >> 33) % kVocab);
    if (ignored_every > 0 && i % ignored_every == 3) v[i] = -100;
  }
  return Tensor::FromInts({kB, kT}, v);
}

struct Result {
  float loss = 0.0f;
  std::vector<std::vector<float>> grads;
};

// One forward/backward; fused: through ForwardModel with `chunk_bytes`.
Result RunHead(bool fused, int64_t chunk_bytes, bool training, int32_t ignored_every) {
  CpuBackend backend({2, DType::kF32});
  std::unique_ptr<Model> model = BuildModel(Tiny(), backend).value();
  auto* head = dynamic_cast<LmHead*>(&model->block(model->num_blocks() - 1));
  EXPECT_NE(head, nullptr);
  head->set_chunk_bytes(chunk_bytes);
  SoftmaxCrossEntropy xent(backend);
  const Tensor tokens = Tokens(1), targets = Tokens(2, ignored_every);
  Result r;
  Tensor loss;
  if (fused) {
    loss = xent.ForwardModel(*model, tokens, targets, training).value();
  } else {
    const Tensor logits = model->Forward(tokens, training).value();
    EXPECT_EQ(logits.dim(-1), kVocab);  // the plain head gives the real vocabulary only
    loss = xent.Forward(logits, targets, training).value();
  }
  r.loss = loss.ToVector()[0];
  if (!training) return r;
  const Tensor dlogits = xent.Backward().value();
  EXPECT_EQ(dlogits.defined(), !fused);
  EXPECT_TRUE(model->Backward(dlogits).ok());
  for (Parameter* p : model->Parameters()) r.grads.push_back(p->grad.ToVector());
  return r;
}

void ExpectSame(const Result& fused, const Result& plain) {
  EXPECT_LE(std::fabs(fused.loss - plain.loss), 1e-6 * std::fabs(plain.loss)) << fused.loss << " vs " << plain.loss;
  ASSERT_EQ(fused.grads.size(), plain.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) EXPECT_LT(MaxRelDiff(fused.grads[i], plain.grads[i]), 1e-5) << i;
}

TEST(FusedClassifierTest, OneChunkEqualsTheUnfusedPath) {
  ExpectSame(RunHead(true, kClassifierChunkBytes, true, 0), RunHead(false, kClassifierChunkBytes, true, 0));
}

// A budget of 64 rows x 128 columns x 4 bytes: chunks of 64 rows, the last
// one partial (120 = 64 + 56), with ignored targets spread over both.
TEST(FusedClassifierTest, ManyChunksAndIgnoredTargetsEqualTheUnfusedPath) {
  const int64_t budget = 64 * PaddedVocab(kVocab) * 4;
  ASSERT_EQ(ClassifierChunkRows(kB * kT, PaddedVocab(kVocab), 4, budget), 64);
  ExpectSame(RunHead(true, budget, true, 7), RunHead(false, budget, true, 7));
}

TEST(FusedClassifierTest, EvaluationLossEqualsTheUnfusedPath) {
  const int64_t budget = 64 * PaddedVocab(kVocab) * 4;
  const Result fused = RunHead(true, budget, false, 5), plain = RunHead(false, budget, false, 5);
  EXPECT_LE(std::fabs(fused.loss - plain.loss), 1e-6 * std::fabs(plain.loss));
}

TEST(FusedClassifierTest, PaddedVocabularyRowsStayZeroAndOutOfTheCount) {
  CpuBackend backend({2, DType::kF32});
  std::unique_ptr<Model> model = BuildModel(Tiny(), backend).value();
  Parameter* wte = model->Parameters().front();
  ASSERT_EQ(wte->name, "transformer.wte.weight");
  ASSERT_EQ(wte->value.dim(0), PaddedVocab(kVocab));
  EXPECT_EQ(wte->real_rows, kVocab);
  const std::vector<float> value = wte->value.ToVector();
  for (int64_t i = kVocab * 16; i < static_cast<int64_t>(value.size()); ++i) ASSERT_EQ(value[i], 0.0f) << i;
  SoftmaxCrossEntropy xent(backend);
  xent.ForwardModel(*model, Tokens(3), Tokens(4), true).value();
  ASSERT_TRUE(model->Backward(xent.Backward().value()).ok());
  const std::vector<float> grad = wte->grad.ToVector();
  double real = 0.0;
  for (int64_t i = 0; i < kVocab * 16; ++i) real += std::fabs(grad[i]);
  EXPECT_GT(real, 0.0);
  for (int64_t i = kVocab * 16; i < static_cast<int64_t>(grad.size()); ++i) ASSERT_EQ(grad[i], 0.0f) << i;
  // PyTorch counts the real vocabulary: 70 x 16 embeddings, not 128 x 16.
  int64_t expected = 0;
  for (Parameter* p : model->Parameters()) expected += p->value.numel();
  EXPECT_EQ(model->NumParameters(), expected - (PaddedVocab(kVocab) - kVocab) * 16);
}

}  // namespace
}  // namespace ringmaster::engine::nn
