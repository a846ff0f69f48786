#include "engine/train/rank_context.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/beneath.h"
#include "common/rank_layout.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace ringmaster::engine {
namespace {

absl::Status Invalid(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

absl::Status InRange(const std::string& field, int64_t value, int64_t end) {
  if (value < 0 || value >= end) return Invalid(field, absl::StrCat("must be in [0, ", end, "), got ", value));
  return absl::OkStatus();
}

absl::Status AtLeastOne(const std::string& field, int64_t value) {
  if (value < 1) return Invalid(field, absl::StrCat("must be >= 1, got ", value));
  return absl::OkStatus();
}

bool KnownRendezvous(const std::string& address) {
  return absl::StartsWith(address, "grpc:") || absl::StartsWith(address, "file:") ||
         absl::StartsWith(address, "tcp:");
}

}  // namespace

absl::Status ValidateRankContext(const v1::RankContext& c) {
  if (c.job_id().empty()) return Invalid("job_id", "must not be empty");
  if (c.generation() < 0) return Invalid("generation", absl::StrCat("must be >= 0, got ", c.generation()));
  const v1::WorldLayout& w = c.world();
  RETURN_IF_ERROR(AtLeastOne("world.world_size", w.world_size()));
  RETURN_IF_ERROR(AtLeastOne("world.data", w.data()));
  RETURN_IF_ERROR(AtLeastOne("world.pipeline", w.pipeline()));
  RETURN_IF_ERROR(AtLeastOne("world.nodes", w.nodes()));
  RETURN_IF_ERROR(AtLeastOne("world.ranks_per_node", w.ranks_per_node()));
  if (int64_t{w.data()} * w.pipeline() != w.world_size() || int64_t{w.nodes()} * w.ranks_per_node() != w.world_size()) {
    return Invalid("world", absl::StrCat("data (", w.data(), ") x pipeline (", w.pipeline(), ") and nodes (",
                                         w.nodes(), ") x ranks_per_node (", w.ranks_per_node(),
                                         ") must both equal world_size (", w.world_size(), ")"));
  }
  const v1::RankCoordinates& r = c.rank();
  RETURN_IF_ERROR(InRange("rank.global_rank", r.global_rank(), w.world_size()));
  RETURN_IF_ERROR(InRange("rank.local_rank", r.local_rank(), w.ranks_per_node()));
  RETURN_IF_ERROR(InRange("rank.node_rank", r.node_rank(), w.nodes()));
  if (int64_t{r.node_rank()} * w.ranks_per_node() + r.local_rank() != r.global_rank()) {
    return Invalid("rank", absl::StrCat("node_rank ", r.node_rank(), " x ranks_per_node ", w.ranks_per_node(),
                                        " + local_rank ", r.local_rank(), " must be global_rank ", r.global_rank()));
  }
  const GridPosition position = GridPositionOf(r.global_rank(), w.pipeline());
  if (r.data_rank() != position.data || r.pipeline_rank() != position.pipeline) {
    return Invalid("rank", absl::StrCat("global_rank ", r.global_rank(), " sits at data_rank ", position.data,
                                        ", pipeline_rank ", position.pipeline, " of a pipeline of ", w.pipeline(),
                                        ", got ", r.data_rank(), ", ", r.pipeline_rank()));
  }
  if (w.world_size() > 1) {
    const v1::ParallelismSpec& par = c.spec().parallelism();
    if (par.data() != w.data() || par.pipeline() != w.pipeline()) {
      return Invalid("spec.parallelism", absl::StrCat("data ", par.data(), " x pipeline ", par.pipeline(),
                                                      " is not the world's ", w.data(), " x ", w.pipeline()));
    }
    if (c.rendezvous().address().empty()) return Invalid("rendezvous.address", "required for more than one rank");
  }
  if (!c.rendezvous().address().empty() && !KnownRendezvous(c.rendezvous().address())) {
    return Invalid("rendezvous.address", absl::StrCat("expected grpc:ADDRESS, file:DIR or tcp:HOST:PORT, got \"",
                                                      c.rendezvous().address(), "\""));
  }
  if (!c.checkpoint_dir().empty() && c.checkpoint_dir()[0] != '/') {
    return Invalid("checkpoint_dir", absl::StrCat("must be absolute, got \"", c.checkpoint_dir(), "\""));
  }
  for (int i = 0; i < c.checkpoint_roots_size(); ++i) {
    if (c.checkpoint_roots(i).empty() || c.checkpoint_roots(i)[0] != '/') {
      return Invalid(absl::StrCat("checkpoint_roots[", i, "]"),
                     absl::StrCat("must be absolute, got \"", c.checkpoint_roots(i), "\""));
    }
  }
  if (!c.checkpoint_dir().empty() && c.checkpoint_roots_size() > 0 &&
      !RootOf(c.checkpoint_dir(), {c.checkpoint_roots().begin(), c.checkpoint_roots().end()}).has_value()) {
    return Invalid("checkpoint_dir", absl::StrCat("\"", c.checkpoint_dir(), "\" is not beneath any of checkpoint_roots"));
  }
  if (!c.data_root().empty() && c.data_root()[0] != '/') {
    return Invalid("data_root", absl::StrCat("must be absolute, got \"", c.data_root(), "\""));
  }
  if (!c.agent().empty() && c.generation() < 1) {
    return Invalid("generation", absl::StrCat("must be >= 1 under a worker, got ", c.generation()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RankContext> ReadRankContext(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("rank context ", path, ": cannot open it"));
  std::stringstream text;
  text << in.rdbuf();
  v1::RankContext context;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &context, options); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rank context ", path, ": ", s.ToString()));
  }
  if (absl::Status s = ValidateRankContext(context); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rank context ", path, ": ", s.message()));
  }
  return context;
}

absl::StatusOr<v1::RankContext> RankContextForHandStart(v1::JobSpec spec, const HandStartedRank& hand) {
  if (hand.world_size < 1) return Invalid("world size", absl::StrCat("must be >= 1, got ", hand.world_size));
  if (hand.rank < 0 || hand.rank >= hand.world_size) {
    return Invalid("rank", absl::StrCat("must be in [0, ", hand.world_size, "), got ", hand.rank));
  }
  if (hand.world_size > 1 && hand.rendezvous.empty()) {
    return Invalid("rendezvous",
                   "required with more than one rank (--rendezvous file:DIR or tcp:HOST:PORT, or "
                   "RINGMASTER_RENDEZVOUS)");
  }
  // One node, unless a local rank other than the rank says the ranks are
  // spread over nodes of resources.ranks_per_node ranks each.
  int32_t per_node = hand.world_size;
  if (hand.local_rank >= 0 && hand.local_rank != hand.rank) {
    per_node = std::max(1, spec.resources().ranks_per_node());
    if (hand.world_size % per_node != 0 || hand.rank % per_node != hand.local_rank) {
      return Invalid("local rank", absl::StrCat("rank ", hand.rank, " of ", hand.world_size, " on nodes of ",
                                                per_node, " ranks (resources.ranks_per_node) cannot be local rank ",
                                                hand.local_rank));
    }
  }
  v1::RankContext c;
  c.set_job_id("local");
  c.set_generation(0);
  v1::WorldLayout* w = c.mutable_world();
  w->set_world_size(hand.world_size);
  w->set_nodes(hand.world_size / per_node);
  w->set_ranks_per_node(per_node);
  if (hand.world_size == 1) {
    // One process trains the whole global batch; the spec keeps its layout
    // (the ghost batch of its replicas, trainer.h).
    w->set_data(1);
    w->set_pipeline(1);
  } else {
    const int32_t pipeline = std::max(1, spec.parallelism().pipeline());
    if (hand.world_size % pipeline != 0) {
      return Invalid("parallelism.pipeline",
                     absl::StrCat(pipeline, " stages do not divide the ", hand.world_size, " ranks"));
    }
    spec.mutable_parallelism()->set_data(hand.world_size / pipeline);
    w->set_data(hand.world_size / pipeline);
    w->set_pipeline(pipeline);
  }
  v1::RankCoordinates* r = c.mutable_rank();
  r->set_global_rank(hand.rank);
  r->set_local_rank(hand.rank % per_node);
  r->set_node_rank(hand.rank / per_node);
  const GridPosition position = GridPositionOf(hand.rank, w->pipeline());
  r->set_data_rank(position.data);
  r->set_pipeline_rank(position.pipeline);
  c.mutable_rendezvous()->set_address(hand.rendezvous);
  c.set_checkpoint_dir(hand.checkpoint_dir);
  c.set_advertise_host(hand.host);
  c.mutable_device()->set_kind(spec.resources().device() == v1::ResourceSpec::CUDA ? v1::RankDevice::CUDA
                                                                                  : v1::RankDevice::CPU);
  c.mutable_device()->set_gpu_uuid(hand.pinned_gpu);
  *c.mutable_spec() = std::move(spec);
  RETURN_IF_ERROR(ValidateRankContext(c));
  return c;
}

std::vector<ManifestEntry> CommittedFiles(const v1::CheckpointInfo& checkpoint) {
  std::vector<ManifestEntry> files;
  for (const v1::CheckpointShard& shard : checkpoint.shards()) {
    for (const v1::CheckpointFile& f : shard.files()) {
      const bool sha256 = f.checksum().algorithm() == v1::FileChecksum::SHA256;
      files.push_back({f.path(), f.size_bytes(), sha256 ? f.checksum().hex() : std::string()});
    }
  }
  return files;
}

int CudaOrdinal(const v1::RankContext& context) {
  return context.device().gpu_uuid().empty() ? context.rank().local_rank() : 0;
}

}  // namespace ringmaster::engine
