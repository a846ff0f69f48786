// fashion_mnist_check: trains the Fashion-MNIST CNN (or MLP) on the CPU
// backend with an inline SGD-momentum loop and prints samples/s and test
// accuracy per epoch. A verification tool for the engine's kernels and
// models, not the trainer (the trainer uses engine/data and engine/optim).
//
//   bazel run //engine/nn:fashion_mnist_check -- [model=cnn|mlp] [epochs=3] [threads=0]
//       [dtype=f32|bf16|f16] [batch=64] [lr=0.05] [max_steps=-1]
//       [data=/usr/share/datasets/fashion-mnist]

#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/core/random.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"

namespace ringmaster::engine::nn {
namespace {

// Reads a gzipped IDX file; returns its payload after the header of `header_ints` ints.
std::vector<uint8_t> ReadIdx(const std::string& path, int header_ints) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> all;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) all.insert(all.end(), buf, buf + n);
  gzclose(f);
  return std::vector<uint8_t>(all.begin() + 4 * header_ints, all.end());
}

struct Split {
  std::vector<float> images;  // [n, 784], normalised
  std::vector<int32_t> labels;
};

Split Load(const std::string& dir, const std::string& prefix) {
  Split s;
  std::vector<uint8_t> px = ReadIdx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 4);
  std::vector<uint8_t> lb = ReadIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 2);
  s.images.resize(px.size());
  for (size_t i = 0; i < px.size(); ++i) s.images[i] = (px[i] / 255.0f - 0.2860f) / 0.3530f;
  s.labels.assign(lb.begin(), lb.end());
  return s;
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> arg = {{"model", "cnn"}, {"epochs", "3"},   {"threads", "0"},
                                            {"dtype", "f32"}, {"batch", "64"},   {"lr", "0.05"},
                                            {"max_steps", "-1"}, {"data", "/usr/share/datasets/fashion-mnist"}};
  for (int i = 1; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (eq != nullptr) arg[std::string(argv[i], static_cast<size_t>(eq - argv[i]))] = eq + 1;
  }
  const DType dtype = arg["dtype"] == "bf16" ? DType::kBF16 : arg["dtype"] == "f16" ? DType::kF16 : DType::kF32;
  CpuBackend backend({std::stoi(arg["threads"]), dtype});
  ModelConfig config;
  config.kind = arg["model"] == "mlp" ? ModelKind::kMlp : ModelKind::kCnn;
  config.dropout = config.kind == ModelKind::kCnn ? 0.25f : 0.0f;
  auto model = BuildModel(config, backend).value();
  SoftmaxCrossEntropy xent(backend);
  Split train = Load(arg["data"], "train"), test = Load(arg["data"], "t10k");
  const int64_t batch = std::stoi(arg["batch"]), n_train = train.labels.size();
  const float lr = std::stof(arg["lr"]), momentum = 0.9f;
  const int64_t max_steps = std::stoll(arg["max_steps"]);
  std::vector<Tensor> velocity;
  for (Parameter* p : model->Parameters()) velocity.push_back(Tensor::Zeros(p->value.shape()));
  std::printf("model=%s threads=%d dtype=%s params=%lld\n", arg["model"].c_str(), backend.pool().num_threads(),
              DTypeName(dtype), static_cast<long long>(model->NumParameters()));
  std::vector<int64_t> order(n_train);
  int64_t step = 0;
  double train_seconds = 0.0;
  for (int epoch = 0; epoch < std::stoi(arg["epochs"]); ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    Rng rng(1000 + epoch);
    for (int64_t i = n_train - 1; i > 0; --i) std::swap(order[i], order[rng.Next() % (i + 1)]);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    int64_t steps_this_epoch = 0;
    for (int64_t b = 0; b + batch <= n_train && (max_steps < 0 || step < max_steps); b += batch, ++step) {
      Tensor x = Tensor::Empty({batch, 1, 28, 28});
      std::vector<int32_t> y(batch);
      for (int64_t i = 0; i < batch; ++i) {
        std::memcpy(x.f32() + i * 784, train.images.data() + order[b + i] * 784, 784 * sizeof(float));
        y[i] = train.labels[order[b + i]];
      }
      model->SetRngKey(step);
      model->ZeroGrad();
      Tensor logits = model->Forward(x, true).value();
      loss_sum += xent.Forward(logits, Tensor::FromInts({batch}, y), true).value().ToVector()[0];
      model->Backward(xent.Backward().value()).value();
      ParameterList params = model->Parameters();
      for (size_t k = 0; k < params.size(); ++k) {  // SGD with momentum (PyTorch's form)
        backend.Scale(velocity[k], momentum);
        backend.Axpy(1.0f, params[k]->grad, velocity[k]);
        backend.Axpy(-lr, velocity[k], params[k]->value);
      }
      ++steps_this_epoch;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_seconds += seconds;
    int64_t correct = 0;
    for (int64_t b = 0; b < static_cast<int64_t>(test.labels.size()); b += 1000) {
      const int64_t n = std::min<int64_t>(1000, test.labels.size() - b);
      Tensor x = Tensor::FromVector({n, 1, 28, 28}, std::vector<float>(test.images.begin() + b * 784,
                                                                       test.images.begin() + (b + n) * 784));
      std::vector<int32_t> y(test.labels.begin() + b, test.labels.begin() + b + n);
      correct += CountCorrect(backend, model->Forward(x, false).value(), Tensor::FromInts({n}, y)).value();
    }
    std::printf("epoch %d: steps %lld loss %.4f train %.1fs (%.0f samples/s, %.2f ms/step) test_acc %.4f total %.0fs\n",
                epoch, static_cast<long long>(steps_this_epoch), loss_sum / std::max<int64_t>(1, steps_this_epoch),
                seconds, steps_this_epoch * batch / seconds, 1000.0 * seconds / std::max<int64_t>(1, steps_this_epoch),
                correct / static_cast<double>(test.labels.size()), train_seconds);
    std::fflush(stdout);
    if (max_steps >= 0 && step >= max_steps) break;
  }
  return 0;
}

}  // namespace
}  // namespace ringmaster::engine::nn

int main(int argc, char** argv) { return ringmaster::engine::nn::Main(argc, argv); }
