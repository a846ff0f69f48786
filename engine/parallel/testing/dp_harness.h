#ifndef RINGMASTER_ENGINE_PARALLEL_TESTING_DP_HARNESS_H_
#define RINGMASTER_ENGINE_PARALLEL_TESTING_DP_HARNESS_H_

// Test-only: runs the same small training job under different data-parallel
// layouts (world size, micro-steps, bucket options, ZeRO-1), each rank a
// thread with its own CPU backend and model over an InProcessGroup, and hands
// back the final weights, so tests can compare layouts.
//
// Every step s draws one global batch of B samples from (data_seed, s); rank r
// of D takes rows [r B/D, (r + 1) B/D) and splits them into m micro-steps. The
// loss of each micro-step is scaled by 1/m, so the accumulated grad is the
// mean over the rank's rows, and the allreduce-average makes it the mean over
// the global batch: what a single process computes on the whole batch.
// Ranks other than 0 build their model from another seed, so the weights
// only agree if BroadcastParameters works.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/in_process_world.h"
#include "engine/dist/process_group.h"
#include "engine/nn/model_factory.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/data_parallel.h"

namespace ringmaster::engine::parallel::testing {

// Runs body(group) on one thread per rank of `world` and returns each rank's status.
std::vector<absl::Status> RunRanks(const std::shared_ptr<dist::InProcessWorld>& world,
                                   const std::function<absl::Status(dist::ProcessGroup&)>& body);

// Small models: MLP 1x8x8 -> 128 -> 64 -> 10 (~17k parameters, 69 KB), CNN
// 1x8x8 conv(4) bn pool conv(8) bn pool -> 32 -> 10, GPT 2 layers, 32 wide,
// vocabulary 64, 8 tokens, tied embeddings. Dropout 0 (masks are keyed by the
// local element index, which differs between layouts).
nn::ModelConfig SmallMlp();
nn::ModelConfig SmallCnn(int64_t bn_ghost_batch);
nn::ModelConfig SmallGpt();

// How the ranks reduce their gradients.
enum class Reduction {
  kNone,           // no group use at all: the single-process reference (world must be 1)
  kDataParallel,   // DataParallel::Backward(sync on the last micro-step) + FinishGradients
  kAfterBackward,  // Model::Backward, then DataParallel::ReduceGradients (a pipeline's way)
  kZero,           // Model::Backward, then ZeroOptimizer (ReduceScatter, sharded step, AllGather)
};

struct Layout {
  int world = 1;        // D
  int micro_steps = 1;  // m
  Reduction reduction = Reduction::kDataParallel;
  DataParallelOptions dp;
};

struct Job {
  nn::ModelConfig model;
  optim::OptimizerConfig optimizer;
  int steps = 4;
  int64_t global_batch = 16;  // B
  uint64_t data_seed = 7;
  int sequence_length = 8;  // GPT only
};

// Final parameter values (in Model::Parameters order) of each rank, and what
// the layout reported.
struct Result {
  std::vector<std::vector<std::vector<float>>> weights;  // [rank][param][element]
  std::vector<size_t> state_bytes;                       // optimizer state per rank
  CommStats last_stats;                                  // rank 0, DataParallel only
};

absl::StatusOr<Result> Train(const Job& job, const Layout& layout);

// The relative difference of two weight sets: the largest, over parameters,
// of max |a - b| / max |b| (elements of that parameter; engine/core/test_util.h's
// MaxRelDiff per tensor).
double MaxRelDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b);

}  // namespace ringmaster::engine::parallel::testing

#endif  // RINGMASTER_ENGINE_PARALLEL_TESTING_DP_HARNESS_H_
