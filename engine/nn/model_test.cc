// Model structure: PyTorch state_dict names and shapes, seeded initialisation,
// block ranges (pipeline stages), configuration errors.

#include <cmath>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/model_factory.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::BitwiseEqual;
using engine::testing::RandomTensor;

std::vector<std::pair<std::string, Shape>> NamesAndShapes(Model& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (Parameter* p : m.Parameters()) out.push_back({p->name, p->value.shape()});
  return out;
}

class ModelTest : public ::testing::Test {
 protected:
  CpuBackend backend_{{2, DType::kF32}};
};

TEST_F(ModelTest, MlpStateDictNames) {
  ModelConfig c;
  c.kind = ModelKind::kMlp;
  c.hidden_sizes = {256, 128};
  auto m = BuildModel(c, backend_).value();
  std::vector<std::pair<std::string, Shape>> want = {
      {"layers.1.weight", {256, 784}}, {"layers.1.bias", {256}}, {"layers.3.weight", {128, 256}},
      {"layers.3.bias", {128}},        {"layers.5.weight", {10, 128}}, {"layers.5.bias", {10}}};
  EXPECT_EQ(NamesAndShapes(*m), want);
  EXPECT_EQ(m->num_blocks(), 3);  // MlpSpec: one per hidden layer + the output layer
  c.dropout = 0.2f;
  auto md = BuildModel(c, backend_).value();
  EXPECT_EQ(md->num_blocks(), 3);
  EXPECT_EQ(md->Parameters()[2]->name, "layers.4.weight");
  EXPECT_EQ(md->Parameters()[4]->name, "layers.7.weight");
}

TEST_F(ModelTest, CnnStateDictNamesAndBuffers) {
  ModelConfig c;
  c.kind = ModelKind::kCnn;
  auto m = BuildModel(c, backend_).value();
  std::vector<std::pair<std::string, Shape>> want = {
      {"layers.0.weight", {32, 1, 3, 3}}, {"layers.1.weight", {32}},     {"layers.1.bias", {32}},
      {"layers.4.weight", {64, 32, 3, 3}}, {"layers.5.weight", {64}},    {"layers.5.bias", {64}},
      {"layers.9.weight", {128, 3136}},    {"layers.9.bias", {128}},     {"layers.12.weight", {10, 128}},
      {"layers.12.bias", {10}}};
  EXPECT_EQ(NamesAndShapes(*m), want);
  EXPECT_EQ(m->num_blocks(), 4);  // CnnSpec: 2 conv stages + 1 hidden layer + the output layer
  EXPECT_EQ(m->Parameters(1, 2).front()->name, "layers.4.weight");
  std::vector<std::string> buffers;
  for (Buffer* b : m->Buffers()) buffers.push_back(b->name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"layers.1.running_mean", "layers.1.running_var",
                                                "layers.1.num_batches_tracked", "layers.5.running_mean",
                                                "layers.5.running_var", "layers.5.num_batches_tracked"}));
  Tensor logits = m->Forward(RandomTensor({3, 1, 28, 28}, 1), false).value();
  EXPECT_EQ(logits.shape(), (Shape{3, 10}));
  // Decay flags: weights of Linear/Conv only.
  for (Parameter* p : m->Parameters())
    EXPECT_EQ(p->decay, p->value.rank() >= 2) << p->name;
}

TEST_F(ModelTest, GptStateDictNames) {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  auto m = BuildModel(c, backend_).value();
  std::vector<std::pair<std::string, Shape>> want = {{"transformer.wte.weight", {256, 16}},
                                                     {"transformer.wpe.weight", {8, 16}}};
  for (int i = 0; i < 2; ++i) {
    std::string h = "transformer.h." + std::to_string(i);
    std::vector<std::pair<std::string, Shape>> block = {
        {h + ".ln_1.weight", {16}},          {h + ".ln_1.bias", {16}},
        {h + ".attn.c_attn.weight", {48, 16}}, {h + ".attn.c_attn.bias", {48}},
        {h + ".attn.c_proj.weight", {16, 16}}, {h + ".attn.c_proj.bias", {16}},
        {h + ".ln_2.weight", {16}},          {h + ".ln_2.bias", {16}},
        {h + ".mlp.c_fc.weight", {64, 16}},  {h + ".mlp.c_fc.bias", {64}},
        {h + ".mlp.c_proj.weight", {16, 64}}, {h + ".mlp.c_proj.bias", {16}}};
    want.insert(want.end(), block.begin(), block.end());
  }
  want.push_back({"transformer.ln_f.weight", {16}});
  want.push_back({"transformer.ln_f.bias", {16}});
  EXPECT_EQ(NamesAndShapes(*m), want);  // tied: lm_head is transformer.wte.weight, listed once
  EXPECT_EQ(m->num_blocks(), 4);
  // The head block alone still lists the tied weight (a pipeline's last stage).
  EXPECT_EQ(m->Parameters(3, 4).back()->name, "transformer.wte.weight");
  c.tie_embeddings = false;
  auto untied = BuildModel(c, backend_).value();
  EXPECT_EQ(untied->Parameters().back()->name, "lm_head.weight");
  Tensor logits = m->Forward(Tensor::FromInts({1, 3}, {1, 2, 3}), false).value();
  EXPECT_EQ(logits.shape(), (Shape{1, 3, 256}));
}

TEST_F(ModelTest, InitialisationIsSeededAndPyTorchLike) {
  ModelConfig c;
  c.kind = ModelKind::kMlp;
  c.seed = 11;
  auto a = BuildModel(c, backend_).value();
  auto b = BuildModel(c, backend_).value();
  c.seed = 12;
  auto other = BuildModel(c, backend_).value();
  for (size_t i = 0; i < a->Parameters().size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(a->Parameters()[i]->value, b->Parameters()[i]->value));
    EXPECT_FALSE(BitwiseEqual(a->Parameters()[i]->value, other->Parameters()[i]->value));
  }
  // Kaiming-uniform: |w| <= 1/sqrt(784), and the spread fills the range.
  std::vector<float> w = a->Parameters()[0]->value.ToVector();
  const double bound = 1.0 / std::sqrt(784.0);
  double max_abs = 0.0, sum_sq = 0.0;
  for (float x : w) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(x)));
    sum_sq += x * x;
  }
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.99 * bound);
  EXPECT_NEAR(std::sqrt(sum_sq / w.size()), bound / std::sqrt(3.0), 0.02 * bound);

  ModelConfig g;
  g.kind = ModelKind::kGpt;
  g.n_layer = 2;
  g.n_embd = 64;
  auto gpt = BuildModel(g, backend_).value();
  for (Parameter* p : gpt->Parameters()) {
    std::vector<float> v = p->value.ToVector();
    double sq = 0.0;
    for (float x : v) sq += x * x;
    const double std = std::sqrt(sq / v.size());
    if (p->name.find("c_proj.weight") != std::string::npos) {
      EXPECT_NEAR(std, 0.02 / std::sqrt(4.0), 0.002) << p->name;
    } else if (p->value.rank() == 2) {
      EXPECT_NEAR(std, 0.02, 0.002) << p->name;
    } else if (p->name.find("ln") != std::string::npos && p->name.find("weight") != std::string::npos) {
      EXPECT_EQ(std, 1.0) << p->name;
    } else {
      EXPECT_EQ(std, 0.0) << p->name;  // biases
    }
  }
}

TEST_F(ModelTest, BlockRangesComposeToTheWholeModel) {
  ModelConfig c;
  c.kind = ModelKind::kCnn;
  c.conv_channels = {4, 8};
  c.cnn_hidden_sizes = {16};
  auto whole = BuildModel(c, backend_).value();
  auto staged = BuildModel(c, backend_).value();
  Tensor x = RandomTensor({4, 1, 28, 28}, 2), dy = RandomTensor({4, 10}, 3);
  Tensor y = whole->Forward(x, true).value();
  Tensor mid = staged->Forward(x, true, 0, 1).value();
  Tensor y2 = staged->Forward(mid, true, 1, -1).value();
  EXPECT_TRUE(BitwiseEqual(y, y2));
  whole->ZeroGrad();
  staged->ZeroGrad();
  ASSERT_TRUE(whole->Backward(dy).ok());
  Tensor dmid = staged->Backward(dy, 1, -1).value();
  ASSERT_TRUE(staged->Backward(dmid, 0, 1).ok());
  for (size_t i = 0; i < whole->Parameters().size(); ++i)
    EXPECT_TRUE(BitwiseEqual(whole->Parameters()[i]->grad, staged->Parameters()[i]->grad));
  EXPECT_EQ(whole->Parameters(0, 1).size() + whole->Parameters(1, -1).size(), whole->Parameters().size());
  EXPECT_EQ(whole->Forward(x, true, 3, 99).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelTest, BadConfigsAreInvalidArgument) {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.n_embd = 30;
  c.n_head = 4;
  EXPECT_EQ(BuildModel(c, backend_).status().code(), absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.hidden_sizes = {0};
  EXPECT_EQ(BuildModel(c, backend_).status().code(), absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.dropout = 1.0f;
  EXPECT_EQ(BuildModel(c, backend_).status().code(), absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  auto m = BuildModel(c, backend_).value();
  EXPECT_EQ(m->Forward(RandomTensor({2, 1, 27, 28}, 1), true).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::nn
