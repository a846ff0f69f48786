// The part of ValidateJobSpec that checks how a job is laid out on the
// cluster: resources, data x pipeline layout, stage boundaries, batch
// divisibility, elastic bounds, and the checkpoint and restart policies.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec.h"
#include "common/spec_checks.h"
#include "common/spec_limits.h"
#include "common/status_macros.h"

namespace ringmaster::spec_internal {
namespace {

constexpr int64_t k2Pow40 = int64_t{1} << 40;
constexpr int kMaxNodes = 4096;

absl::Status ValidateResources(const v1::ResourceSpec& resources) {
  RETURN_IF_ERROR(CheckRange("resources.nodes", resources.nodes(), 1, kMaxNodes));
  RETURN_IF_ERROR(CheckRange("resources.ranks_per_node", resources.ranks_per_node(), 1, 1024));
  RETURN_IF_ERROR(CheckRange("resources.cpus_per_rank", resources.cpus_per_rank(), 1, 1024));
  const std::string& graphs = resources.cuda_graphs();
  if (!graphs.empty() && graphs != "auto" && graphs != "on" && graphs != "off") {
    return Invalid("resources.cuda_graphs", absl::StrCat("one of auto, on, off; got \"", graphs, "\""));
  }
  return CheckLabels("resources.node_selector", resources.node_selector(), kMaxNodeSelectorEntries, "entries");
}

// The global batch must split evenly into data-parallel ranks x micro-batches.
absl::Status CheckBatchSplit(absl::string_view path, absl::string_view context, int64_t batch,
                             int64_t data, int64_t micro_batches) {
  if (batch % (data * micro_batches) == 0) return absl::OkStatus();
  return Invalid(path, absl::StrCat(context, "global batch ", batch,
                                    " is not divisible by data-parallel size (", data,
                                    ") x micro-batches (", micro_batches, ")"));
}

absl::Status ValidateStageBoundaries(const v1::ParallelismSpec& parallelism, int blocks) {
  const auto& boundaries = parallelism.stage_boundaries();
  if (boundaries.empty()) return absl::OkStatus();
  const int expected = parallelism.pipeline() - 1;
  if (boundaries.size() != expected) {
    return Invalid("parallelism.stage_boundaries",
                   absl::StrCat("expected pipeline - 1 = ", expected, " block indices, got ",
                                boundaries.size()));
  }
  for (int i = 0; i < boundaries.size(); ++i) {
    const int previous = i == 0 ? 0 : boundaries[i - 1];
    if (boundaries[i] <= previous || boundaries[i] >= blocks) {
      return Invalid("parallelism.stage_boundaries",
                     absl::StrCat("must be strictly increasing block indices in (0, ", blocks,
                                  "), got [", absl::StrJoin(boundaries, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateParallelism(const v1::JobSpec& spec) {
  const v1::ParallelismSpec& parallelism = spec.parallelism();
  const v1::ResourceSpec& resources = spec.resources();
  RETURN_IF_ERROR(CheckRange("parallelism.data", parallelism.data(), 1, 65536));
  RETURN_IF_ERROR(CheckRange("parallelism.pipeline", parallelism.pipeline(), 1, 65536));
  RETURN_IF_ERROR(CheckRange("parallelism.micro_batches", parallelism.micro_batches(), 1, 65536));
  const int64_t ranks = int64_t{parallelism.data()} * parallelism.pipeline();
  const int64_t slots = int64_t{resources.nodes()} * resources.ranks_per_node();
  if (ranks != slots) {
    return Invalid(
        "parallelism",
        absl::StrCat("data (", parallelism.data(), ") x pipeline (", parallelism.pipeline(),
                     ") = ", ranks, " ranks, but resources give nodes (", resources.nodes(),
                     ") x ranks_per_node (", resources.ranks_per_node(), ") = ", slots));
  }
  if (spec.has_program()) return absl::OkStatus();  // informational: the program lays itself out
  const int blocks = ModelBlockCount(spec.model());
  if (parallelism.pipeline() > blocks) {
    return Invalid(
        "parallelism.pipeline",
        absl::StrCat(parallelism.pipeline(), " stages, but the model has ", blocks, " blocks"));
  }
  RETURN_IF_ERROR(ValidateStageBoundaries(parallelism, blocks));
  RETURN_IF_ERROR(CheckReal("parallelism.bucket_size_mb", parallelism.bucket_size_mb(), {0, false},
                            {1024, true}));
  return CheckBatchSplit("data.batch_size", "", spec.data().batch_size(), parallelism.data(),
                         parallelism.micro_batches());
}

// Every node count the job may run on must give a valid layout.
absl::Status ValidateElastic(const v1::JobSpec& spec) {
  if (!spec.restart().has_elastic()) return absl::OkStatus();
  const v1::ElasticPolicy& elastic = spec.restart().elastic();
  const int nodes = spec.resources().nodes();
  RETURN_IF_ERROR(CheckRange("restart.elastic.min_nodes", elastic.min_nodes(), 1, kMaxNodes));
  RETURN_IF_ERROR(CheckRange("restart.elastic.max_nodes", elastic.max_nodes(), 1, kMaxNodes));
  if (elastic.min_nodes() > elastic.max_nodes()) {
    return Invalid("restart.elastic", absl::StrCat("min_nodes (", elastic.min_nodes(),
                                                   ") > max_nodes (", elastic.max_nodes(), ")"));
  }
  if (nodes < elastic.min_nodes() || nodes > elastic.max_nodes()) {
    return Invalid("restart.elastic",
                   absl::StrCat("resources.nodes (", nodes, ") is outside [min_nodes (",
                                elastic.min_nodes(), "), max_nodes (", elastic.max_nodes(), ")]"));
  }
  const int64_t ranks_per_node = spec.resources().ranks_per_node();
  const int64_t pipeline = spec.parallelism().pipeline();
  for (int64_t n = elastic.min_nodes(); n <= elastic.max_nodes(); ++n) {
    const int64_t ranks = n * ranks_per_node;
    const std::string context = absl::StrCat("with ", n, n == 1 ? " node, " : " nodes, ");
    if (ranks % pipeline != 0) {
      return Invalid("restart.elastic",
                     absl::StrCat(context, ranks, " ranks do not divide into pipelines of ",
                                  pipeline, " stages"));
    }
    RETURN_IF_ERROR(CheckBatchSplit("restart.elastic", context, spec.data().batch_size(),
                                    ranks / pipeline, spec.parallelism().micro_batches()));
  }
  return absl::OkStatus();
}

// At most one of interval_steps, interval_seconds and interval ("auto").
absl::Status ValidateCheckpointInterval(const v1::CheckpointPolicy& checkpoint) {
  if (!checkpoint.interval().empty() && checkpoint.interval() != kCheckpointIntervalAuto) {
    return Invalid("checkpoint.interval",
                   absl::StrCat("must be \"auto\" (or left out), got \"", absl::CEscape(checkpoint.interval()), "\""));
  }
  if (checkpoint.has_interval_seconds() &&
      !(checkpoint.interval_seconds() > 0 && checkpoint.interval_seconds() <= (1 << 30))) {
    return Invalid("checkpoint.interval_seconds",
                   absl::StrCat("must be in (0, 1073741824] seconds, got ", checkpoint.interval_seconds()));
  }
  std::vector<std::string> set;
  if (checkpoint.has_interval_steps()) set.push_back("interval_steps");
  if (checkpoint.has_interval_seconds()) set.push_back("interval_seconds");
  if (!checkpoint.interval().empty()) set.push_back("interval");
  if (set.size() > 1) {
    return Invalid(absl::StrCat("checkpoint.", set[1]),
                   absl::StrCat("set at most one of checkpoint.interval_steps, interval_seconds and interval; "
                                "checkpoint.", set[0], " is set too"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePolicies(const v1::JobSpec& spec) {
  const v1::CheckpointPolicy& checkpoint = spec.checkpoint();
  RETURN_IF_ERROR(CheckRange("checkpoint.interval_steps", checkpoint.interval_steps(), 0, k2Pow40));
  RETURN_IF_ERROR(ValidateCheckpointInterval(checkpoint));
  RETURN_IF_ERROR(CheckRange("checkpoint.keep", checkpoint.keep(), 1, 1000));
  if (!checkpoint.directory().empty() && checkpoint.directory()[0] != '/') {
    return Invalid("checkpoint.directory",
                   absl::StrCat("must be an absolute path, got \"",
                                absl::CEscape(checkpoint.directory()), "\""));
  }
  const v1::RestartPolicy& restart = spec.restart();
  RETURN_IF_ERROR(CheckRange("restart.max_restarts", restart.max_restarts(), 0, 1000));
  if (restart.move_stragglers() && int64_t{spec.resources().nodes()} * spec.resources().ranks_per_node() < 2) {
    return Invalid("restart.move_stragglers", "needs at least 2 ranks: a straggler is found by comparing ranks");
  }
  return CheckRange("restart.progress_timeout_seconds", restart.progress_timeout_seconds(), 0,
                    1 << 30);
}

}  // namespace

absl::Status ValidateLayoutAndPolicies(const v1::JobSpec& spec) {
  RETURN_IF_ERROR(ValidateResources(spec.resources()));
  RETURN_IF_ERROR(ValidateParallelism(spec));
  RETURN_IF_ERROR(ValidateElastic(spec));
  return ValidatePolicies(spec);
}

}  // namespace ringmaster::spec_internal
