#ifndef RINGMASTER_ENGINE_TRAIN_RANK_CONTEXT_H_
#define RINGMASTER_ENGINE_TRAIN_RANK_CONTEXT_H_

// The rank context (proto/rank_context.proto): who this trainer process is in
// its job generation. ringmaster-trainer's main gets it once, either from the
// file its worker wrote (ReadRankContext) or, for a rank started by hand,
// from flags and variables that main reads (RankContextForHandStart), and
// hands it down as a value; nothing below main reads the environment.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint_files.h"
#include "proto/job_spec.pb.h"
#include "proto/rank_context.pb.h"

namespace ringmaster::engine {

// Reads a rank context written by a worker (protobuf JSON) and checks it.
// INVALID_ARGUMENT naming the file and the field; NOT_FOUND for a missing file.
absl::StatusOr<v1::RankContext> ReadRankContext(const std::string& path);

// INVALID_ARGUMENT ("rank.global_rank: must be in [0, 4), got 7") unless the
// context is consistent: a world of data x pipeline = nodes x ranks_per_node
// ranks, coordinates that agree with the global rank (common/rank_layout.h),
// a rendezvous for more than one rank, an absolute checkpoint directory.
absl::Status ValidateRankContext(const v1::RankContext& context);

// A rank started by hand, as main read it from flags or, where a flag is not
// given, from RINGMASTER_RANK, RINGMASTER_WORLD_SIZE, RINGMASTER_LOCAL_RANK,
// RINGMASTER_RENDEZVOUS and RINGMASTER_HOST.
struct HandStartedRank {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;     // < 0: the rank
  std::string rendezvous;  // file:DIR or tcp:HOST:PORT; required for world_size > 1
  std::string host;        // this rank's host for Gloo; empty: the rendezvous host
  std::string checkpoint_dir;  // empty: none
  // CUDA with exactly one visible device (CUDA_VISIBLE_DEVICES pins it): the
  // device's name there; empty: the device with the local rank as ordinal.
  std::string pinned_gpu;
};

// The context of a rank started by hand: job "local", generation 0, one node;
// the data-parallel size follows the world (world / parallelism.pipeline);
// coordinates from common/rank_layout.h. INVALID_ARGUMENT naming the flag or
// field for an inconsistent start (rank outside the world, pipeline stages
// that do not divide it, no rendezvous for several ranks).
absl::StatusOr<v1::RankContext> RankContextForHandStart(v1::JobSpec spec, const HandStartedRank& rank);

// The CUDA device ordinal (among the visible ones) the rank trains on: 0 when
// its GPU is pinned, else its local rank.
int CudaOrdinal(const v1::RankContext& context);

// A committed checkpoint's files as the coordinator recorded them (every
// shard's; TrainerOptions.resume_recorded_files). A file recorded with
// another checksum than SHA-256 has none here, so it never verifies.
std::vector<ManifestEntry> CommittedFiles(const v1::CheckpointInfo& checkpoint);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_RANK_CONTEXT_H_
