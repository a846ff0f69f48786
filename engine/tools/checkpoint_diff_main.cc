// checkpoint-diff: compares the model weights of the newest good checkpoints
// of two checkpoint directories, tensor by tensor.
//
//   checkpoint-diff DIR_A DIR_B [--parameters-only | --with-optimizer]
//
// --with-optimizer compares the optimizer state tensors too (e.g. ZeRO-1's
// gathered shards against an unsharded run's).
//
// Prints one line per tensor whose relative difference ||a - b|| / ||b|| is
// above zero, then `max_relative_difference=X` (the largest over all tensors).
// Exit status 1 when the two hold different tensor names or shapes.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "engine/checkpoint/checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: checkpoint-diff DIR_A DIR_B [--parameters-only | --with-optimizer]\n");
    return 2;
  }
  const bool parameters_only = argc > 3 && std::string(argv[3]) == "--parameters-only";
  const bool with_optimizer = argc > 3 && std::string(argv[3]) == "--with-optimizer";
  auto a = ringmaster::engine::LoadNewestCheckpoint(argv[1]);
  auto b = ringmaster::engine::LoadNewestCheckpoint(argv[2]);
  for (const auto* c : {&a, &b}) {
    if (!c->ok()) {
      std::fprintf(stderr, "checkpoint-diff: %s\n", std::string(c->status().message()).c_str());
      return 2;
    }
  }
  std::map<std::string, ringmaster::engine::Tensor> theirs(b->contents.model.begin(), b->contents.model.end());
  ringmaster::engine::NamedTensors mine = a->contents.model;
  if (with_optimizer) {
    mine.insert(mine.end(), a->contents.optimizer.begin(), a->contents.optimizer.end());
    theirs.insert(b->contents.optimizer.begin(), b->contents.optimizer.end());
  }
  double worst = 0.0;
  for (const auto& [name, ta] : mine) {
    // BatchNorm running statistics are per rank (ghost batch norm): not weights.
    if (parameters_only && (absl::StrContains(name, "running_") || absl::StrContains(name, "num_batches"))) continue;
    auto it = theirs.find(name);
    if (it == theirs.end() || it->second.shape() != ta.shape()) {
      std::fprintf(stderr, "checkpoint-diff: %s is missing or shaped differently in %s\n", name.c_str(), argv[2]);
      return 1;
    }
    std::vector<float> va = ta.ToVector(), vb = it->second.ToVector();
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < va.size(); ++i) {
      diff += (static_cast<double>(va[i]) - vb[i]) * (static_cast<double>(va[i]) - vb[i]);
      norm += static_cast<double>(vb[i]) * vb[i];
    }
    double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    if (rel > 0) std::printf("%s relative_difference=%.3g\n", name.c_str(), rel);
    worst = std::max(worst, rel);
  }
  std::printf("steps %lld and %lld\nmax_relative_difference=%.3g\n", static_cast<long long>(a->step),
              static_cast<long long>(b->step), worst);
  return 0;
}
