#include "engine/nn/model_factory.h"

#include "absl/strings/str_cat.h"
#include "engine/nn/activation.h"
#include "engine/nn/conv.h"
#include "engine/nn/gpt.h"
#include "engine/nn/linear.h"

namespace ringmaster::engine::nn {
namespace {

std::string LayerName(int index) { return absl::StrCat("layers.", index); }

absl::Status CheckImageConfig(const ModelConfig& c) {
  if (c.input_channels <= 0 || c.input_height <= 0 || c.input_width <= 0 || c.num_classes <= 0)
    return absl::InvalidArgumentError("model: input sizes and num_classes must be positive");
  if (c.dropout < 0.0f || c.dropout >= 1.0f) return absl::InvalidArgumentError("model: dropout must be in [0, 1)");
  return absl::OkStatus();
}

// nn.Sequential(Flatten, Linear, ReLU, [Dropout], ..., Linear).
absl::StatusOr<std::unique_ptr<Model>> BuildMlp(const ModelConfig& c, Backend& be) {
  if (absl::Status s = CheckImageConfig(c); !s.ok()) return s;
  auto m = std::make_unique<Model>(be, "mlp");
  int i = 0;
  m->Add(std::make_unique<Flatten>(LayerName(i++)));
  int64_t width = c.input_channels * c.input_height * c.input_width;
  for (int64_t h : c.hidden_sizes) {
    if (h <= 0) return absl::InvalidArgumentError("mlp: hidden sizes must be positive");
    m->Add(std::make_unique<Linear>(be, LayerName(i++), width, h, true, c.seed));
    m->Add(std::make_unique<Relu>(be, LayerName(i++)));
    if (c.dropout > 0.0f) {
      m->Add(std::make_unique<Dropout>(be, LayerName(i), c.dropout, c.seed));
      ++i;
    }
    width = h;
  }
  m->Add(std::make_unique<Linear>(be, LayerName(i++), width, c.num_classes, true, c.seed));
  return m;
}

absl::StatusOr<std::unique_ptr<Model>> BuildCnn(const ModelConfig& c, Backend& be) {
  if (absl::Status s = CheckImageConfig(c); !s.ok()) return s;
  if (c.input_height < 4 || c.input_width < 4 || c.conv1_channels <= 0 || c.conv2_channels <= 0 || c.cnn_hidden <= 0)
    return absl::InvalidArgumentError("cnn: needs inputs of at least 4x4 and positive channel counts");
  auto m = std::make_unique<Model>(be, "cnn");
  m->Add(std::make_unique<Conv2d>(be, LayerName(0), c.input_channels, c.conv1_channels, 3, 1, 1, false, c.seed));
  m->Add(std::make_unique<BatchNorm2d>(be, LayerName(1), c.conv1_channels, c.bn_momentum, c.bn_eps));
  m->Add(std::make_unique<Relu>(be, LayerName(2)));
  m->Add(std::make_unique<MaxPool2d>(be, LayerName(3), 2, 2));
  m->Add(std::make_unique<Conv2d>(be, LayerName(4), c.conv1_channels, c.conv2_channels, 3, 1, 1, false, c.seed));
  m->Add(std::make_unique<BatchNorm2d>(be, LayerName(5), c.conv2_channels, c.bn_momentum, c.bn_eps));
  m->Add(std::make_unique<Relu>(be, LayerName(6)));
  m->Add(std::make_unique<MaxPool2d>(be, LayerName(7), 2, 2));
  m->Add(std::make_unique<Flatten>(LayerName(8)));
  const int64_t flat = c.conv2_channels * (c.input_height / 4) * (c.input_width / 4);
  m->Add(std::make_unique<Linear>(be, LayerName(9), flat, c.cnn_hidden, true, c.seed));
  m->Add(std::make_unique<Relu>(be, LayerName(10)));
  m->Add(std::make_unique<Dropout>(be, LayerName(11), c.dropout, c.seed));
  m->Add(std::make_unique<Linear>(be, LayerName(12), c.cnn_hidden, c.num_classes, true, c.seed));
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const ModelConfig& config, Backend& backend) {
  switch (config.kind) {
    case ModelKind::kMlp: return BuildMlp(config, backend);
    case ModelKind::kCnn: return BuildCnn(config, backend);
    case ModelKind::kGpt: return BuildGpt(config, backend);
  }
  return absl::InvalidArgumentError("unknown model kind");
}

}  // namespace ringmaster::engine::nn
