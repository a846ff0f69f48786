#include "engine/nn/model_factory.h"

#include "absl/strings/str_cat.h"
#include "engine/nn/activation.h"
#include "engine/nn/conv.h"
#include "engine/nn/gpt.h"
#include "engine/nn/linear.h"
#include "engine/nn/sequential.h"

namespace ringmaster::engine::nn {
namespace {

std::string LayerName(int index) { return absl::StrCat("layers.", index); }

absl::Status CheckImageConfig(const ModelConfig& c) {
  if (c.input_channels <= 0 || c.input_height <= 0 || c.input_width <= 0 || c.num_classes <= 0)
    return absl::InvalidArgumentError("model: input sizes and num_classes must be positive");
  if (c.dropout < 0.0f || c.dropout >= 1.0f) return absl::InvalidArgumentError("model: dropout must be in [0, 1)");
  return absl::OkStatus();
}

// nn.Sequential(Flatten, Linear, ReLU, [Dropout], ..., Linear), grouped into
// the blocks of MlpSpec: one per hidden layer (the first also flattens), then
// the output layer.
absl::StatusOr<std::unique_ptr<Model>> BuildMlp(const ModelConfig& c, Backend& be) {
  if (absl::Status s = CheckImageConfig(c); !s.ok()) return s;
  auto m = std::make_unique<Model>(be, "mlp");
  int i = 0;
  auto block = std::make_unique<Sequential>();
  block->Add(std::make_unique<Flatten>(LayerName(i++)));
  int64_t width = c.input_channels * c.input_height * c.input_width;
  for (int64_t h : c.hidden_sizes) {
    if (h <= 0) return absl::InvalidArgumentError("mlp: hidden sizes must be positive");
    block->Add(std::make_unique<Linear>(be, LayerName(i++), width, h, true, c.seed));
    block->Add(std::make_unique<Relu>(be, LayerName(i++)));
    if (c.dropout > 0.0f) {
      block->Add(std::make_unique<Dropout>(be, LayerName(i), c.dropout, c.seed));
      ++i;
    }
    m->Add(std::move(block));
    block = std::make_unique<Sequential>();
    width = h;
  }
  block->Add(std::make_unique<Linear>(be, LayerName(i++), width, c.num_classes, true, c.seed));
  m->Add(std::move(block));
  return m;
}

absl::StatusOr<std::unique_ptr<Model>> BuildCnn(const ModelConfig& c, Backend& be) {
  if (absl::Status s = CheckImageConfig(c); !s.ok()) return s;
  if (c.conv_channels.empty()) return absl::InvalidArgumentError("cnn: needs at least one conv stage");
  if (c.kernel_size < 1 || c.kernel_size % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("cnn: kernel size must be odd and positive, got ", c.kernel_size));
  }
  if (c.bn_ghost_batch < 0)
    return absl::InvalidArgumentError(absl::StrCat("cnn: bn_ghost_batch must be >= 0, got ", c.bn_ghost_batch));
  const int64_t pools = static_cast<int64_t>(c.conv_channels.size());
  if ((c.input_height >> pools) < 1 || (c.input_width >> pools) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cnn: ", pools, " 2x2 pools shrink a ", c.input_height, "x",
                                                   c.input_width, " input to nothing"));
  }
  // Blocks as in CnnSpec: one per conv stage, one per hidden layer (the first
  // also flattens), then the output layer.
  auto m = std::make_unique<Model>(be, "cnn");
  int index = 0;
  int64_t channels = c.input_channels, height = c.input_height, width = c.input_width;
  for (int64_t out : c.conv_channels) {
    if (out <= 0) return absl::InvalidArgumentError(absl::StrCat("cnn: channel counts must be positive, got ", out));
    const int64_t pad = c.kernel_size / 2;
    auto stage = std::make_unique<Sequential>();
    stage->Add(std::make_unique<Conv2d>(be, LayerName(index++), channels, out, c.kernel_size, 1, pad, false, c.seed));
    stage->Add(std::make_unique<BatchNorm2d>(be, LayerName(index++), out, c.bn_momentum, c.bn_eps,
                                             c.bn_ghost_batch));
    stage->Add(std::make_unique<Relu>(be, LayerName(index++)));
    stage->Add(std::make_unique<MaxPool2d>(be, LayerName(index++), 2, 2));
    m->Add(std::move(stage));
    channels = out;
    height /= 2;
    width /= 2;
  }
  auto block = std::make_unique<Sequential>();
  block->Add(std::make_unique<Flatten>(LayerName(index++)));
  int64_t features = channels * height * width;
  for (int64_t hidden : c.cnn_hidden_sizes) {
    if (hidden <= 0) return absl::InvalidArgumentError(absl::StrCat("cnn: hidden sizes must be positive, got ", hidden));
    block->Add(std::make_unique<Linear>(be, LayerName(index++), features, hidden, true, c.seed));
    block->Add(std::make_unique<Relu>(be, LayerName(index++)));
    block->Add(std::make_unique<Dropout>(be, LayerName(index++), c.dropout, c.seed));
    m->Add(std::move(block));
    block = std::make_unique<Sequential>();
    features = hidden;
  }
  block->Add(std::make_unique<Linear>(be, LayerName(index++), features, c.num_classes, true, c.seed));
  m->Add(std::move(block));
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const ModelConfig& config, Backend& backend) {
  absl::StatusOr<std::unique_ptr<Model>> model = absl::InvalidArgumentError("unknown model kind");
  switch (config.kind) {
    case ModelKind::kMlp: model = BuildMlp(config, backend); break;
    case ModelKind::kCnn: model = BuildCnn(config, backend); break;
    case ModelKind::kGpt: model = BuildGpt(config, backend); break;
  }
  if (model.ok()) RefreshOperands(backend, (*model)->Parameters());
  return model;
}

}  // namespace ringmaster::engine::nn
