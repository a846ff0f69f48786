#ifndef RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_H_
#define RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_H_

// Training checkpoints: one directory per step under a checkpoint directory,
//
//   <dir>/step-000001230/model.safetensors      weights, PyTorch state_dict names
//                        optimizer.safetensors  optimizer tensors
//                        state.json             scalar state (checkpoint_files.h)
//                        MANIFEST.json          size and SHA-256 of the three above
//
// written so that a crash or a full disk never damages a committed checkpoint:
// files go to a sibling ".tmp-step-000001230", each is fsynced, the manifest is
// written last and fsynced, the directory is fsynced and renamed to its final
// name, and the parent is fsynced. Only then are checkpoints beyond the newest
// `keep` removed. Loading takes the newest step directory whose manifest
// verifies (every listed file present with its size and checksum), skipping
// damaged ones with a warning, and never looks at ".tmp-" directories.
//
// One writer per checkpoint directory (the trainer's rank 0); readers may run
// while it writes. The functions are otherwise stateless and thread-safe.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint_files.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine {

inline constexpr char kModelFileName[] = "model.safetensors";
inline constexpr char kOptimizerFileName[] = "optimizer.safetensors";
inline constexpr char kStateFileName[] = "state.json";
inline constexpr char kManifestFileName[] = "MANIFEST.json";

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct CheckpointContents {
  NamedTensors model;      // host tensors (f32, f16, bf16, i32), e.g. {"layers.0.weight", w}
  NamedTensors optimizer;  // e.g. {"layers.0.weight.exp_avg", m}
  StateMap state;          // e.g. {"data_loader", loader.State().Encode()}
};

struct CheckpointInfo {
  int64_t step = 0;
  std::string path;  // <dir>/step-NNNNNNNNN
};

struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;
  CheckpointContents contents;
  // "<path>: <why>" for each newer checkpoint that was damaged and skipped.
  std::vector<std::string> skipped;
};

// "step-000001230" (at least nine digits).
std::string StepDirectoryName(int64_t step);

// Writes checkpoint `step` into `dir` (created if missing), replacing an
// existing one of the same step, then keeps only the newest `keep` checkpoints
// by step (keep <= 0 keeps all; the one just written is always kept). Removes
// stale ".tmp-" directories first. Returns the checkpoint's path.
// INVALID_ARGUMENT (before anything is written) for step < 0, a tensor not on
// the host, or a bad/repeated name; otherwise the errno Status of the first
// failing file operation, naming its path (e.g. RESOURCE_EXHAUSTED "write
// <path>: No space left on device (errno 28)"). On failure the temporary
// directory is removed and every earlier checkpoint is left as it was.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step, const CheckpointContents& contents,
                                            int keep);

// Step directories of `dir` by increasing step, unverified; an empty list if
// `dir` does not exist.
absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& dir);

// Reads and checks one checkpoint directory against its manifest, then parses
// it. DATA_LOSS (or the errno Status of a missing file) naming the damaged file.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& path);

// The first phase of a two-phase commit: re-reads a written checkpoint from
// disk and checks every file its manifest lists (size and SHA-256) and that
// the step matches the directory's name. Returns the manifest to commit;
// DATA_LOSS (or the errno Status of a missing file) naming the damaged file.
absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& path);

// The newest checkpoint of `dir` that loads, logging a warning for each newer
// one skipped as damaged. NOT_FOUND if there is none (listing what was skipped).
absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir);

// Removes one checkpoint directory: renamed to a ".tmp-" name beside it first
// (out of readers' sight, so a crash mid-removal never leaves a damaged
// checkpoint under a step name), then deleted. A missing `path` is OK.
absl::Status RemoveCheckpoint(const std::string& path);

// Removes the ".tmp-" directories a crashed writer left in `dir`; returns how
// many. Call at start-up (WriteCheckpoint also does).
absl::StatusOr<int> RemoveStaleTemporaries(const std::string& dir);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_H_
