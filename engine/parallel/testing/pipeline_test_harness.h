#ifndef RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_TEST_HARNESS_H_
#define RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_TEST_HARNESS_H_

// Test harness (tests only) for pipeline parallelism: runs a few SGD steps of
// a model on a D x P grid of threads (InProcessGroup; one CPU backend thread
// per rank), and the same steps in one process, and reports what the tests
// compare — the losses, every parameter's gradient after the first step and
// every weight after the last, by state_dict name. Functions are thread-safe
// (each call owns its threads).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/data/batch.h"
#include "engine/nn/model_factory.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/stage_partition.h"

namespace ringmaster::engine::parallel::testing {

using NamedValues = std::map<std::string, std::vector<float>>;

struct PipelineRunConfig {
  nn::ModelConfig model;
  int data = 1;                   // D replicas; each gets rows [d B / D, (d + 1) B / D) of a batch
  StagePartition stages;          // P = stages.size()
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int micro_batches = 1;          // per replica
  bool rendezvous = false;        // pipeline groups wrapped in PipelineRendezvousGroup
  float lr = 0.05f;               // SGD, momentum 0.9
};

struct RunResult {
  std::vector<float> losses;        // per step: the global batch's mean loss (rank 0's view)
  NamedValues first_grads;          // after the first step's backward (and data-parallel average)
  NamedValues weights;              // after the last step
  // Largest |difference| between copies of the same value on different ranks:
  // a tied parameter's copies on two stages, a stage's copies on D replicas
  // (grads and weights), and the loss every rank reports.
  double copy_mismatch = 0.0;
  std::vector<int> peak_in_flight;  // replica 0, per stage, first step
};

// One step per batch (each a global batch) on D x P threads.
absl::StatusOr<RunResult> RunPipeline(const PipelineRunConfig& config, const std::vector<Batch>& batches);

// The same steps in one process: a full-batch forward and backward, or with
// accumulate > 1 gradient accumulation over that many equal micro-batches.
absl::StatusOr<RunResult> RunReference(const nn::ModelConfig& model, const std::vector<Batch>& batches, float lr,
                                       int accumulate = 1);

// Random inputs in [-1, 1) and class targets for an image model.
Batch RandomImageBatch(const nn::ModelConfig& model, int64_t size, uint64_t seed);
// Random tokens and targets in [0, vocab) for the GPT, sequences of seq_len.
Batch RandomTokenBatch(const nn::ModelConfig& model, int64_t size, int64_t seq_len, uint64_t seed);

// max over names of MaxRelDiff(got[name], want[name]) (the largest absolute
// difference over the reference's largest magnitude); infinity when the names
// differ. `worst` (optional) gets the name that attains it.
double MaxRelDiff(const NamedValues& got, const NamedValues& want, std::string* worst = nullptr);

}  // namespace ringmaster::engine::parallel::testing

#endif  // RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_TEST_HARNESS_H_
