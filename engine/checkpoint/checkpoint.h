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
// Beneath a root, links are never followed. Each function takes, besides the
// directory, the `root` it lies beneath: an operator's checkpoint root
// (RankContext.checkpoint_roots; links in the root's own path are followed).
// Every directory and file below the root is opened from the root's
// descriptor without following a symbolic link (common/beneath.h): a link
// planted in place of the job's directory, a step directory or a file is
// PERMISSION_DENIED naming it, and nothing is written, read or removed
// through it; a directory outside the root is PERMISSION_DENIED. `root`
// empty: the directory given is its own root (a rank started by hand).
//
// One writer per checkpoint directory (the trainer's rank 0); readers may run
// while it writes. The functions are otherwise stateless and thread-safe.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint_layout.h"
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

// "step-000001230" (at least nine digits; common/checkpoint_layout.h).
inline std::string StepDirectoryName(int64_t step) { return CheckpointStepName(step); }

// Writes checkpoint `step` into `dir` (created if missing, beneath `root`),
// replacing an existing one of the same step, then keeps only the newest
// `keep` checkpoints by step (keep <= 0 keeps all; the one just written is
// always kept). Removes stale ".tmp-" directories first. Returns the
// checkpoint's path, `dir`/step-NNNNNNNNN.
// INVALID_ARGUMENT (before anything is written) for step < 0, a tensor not on
// the host, or a bad/repeated name; PERMISSION_DENIED for a link beneath the
// root; otherwise the errno Status of the first failing file operation,
// naming its path (e.g. RESOURCE_EXHAUSTED "write <path>: No space left on
// device (errno 28)"). On failure the temporary directory is removed and
// every earlier checkpoint is left as it was.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step, const CheckpointContents& contents,
                                            int keep, const std::string& root = "");

// Step directories of `dir` by increasing step, unverified (a link named like
// one is not one); an empty list if `dir` does not exist.
absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& dir, const std::string& root = "");

// Reads and checks one checkpoint directory against its manifest, then parses
// it. DATA_LOSS (or the errno Status of a missing file) naming the damaged file.
// `recorded` set: the files as the coordinator recorded them at commit (name,
// size, SHA-256): the manifest must list exactly those files, and a file
// whose bytes differ from its record is DATA_LOSS, whatever the manifest says.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& path, const std::string& root = "",
                                                const std::vector<ManifestEntry>* recorded = nullptr);

// The first phase of a two-phase commit: re-reads a written checkpoint from
// disk and checks every file its manifest lists (size and SHA-256) and that
// the step matches the directory's name. Returns the manifest to commit;
// DATA_LOSS (or the errno Status of a missing file) naming the damaged file.
absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& path, const std::string& root = "");

// The newest checkpoint of `dir` that loads, logging a warning for each newer
// one skipped as damaged. NOT_FOUND if there is none (listing what was skipped).
absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir, const std::string& root = "");

// Removes one checkpoint directory: renamed to a ".tmp-" name beside it first
// (out of readers' sight, so a crash mid-removal never leaves a damaged
// checkpoint under a step name), then deleted, links removed rather than
// followed. A missing `path` is OK. `root`: the one `path`'s parent lies
// beneath (empty: the parent itself).
absl::Status RemoveCheckpoint(const std::string& path, const std::string& root = "");

// Removes the directory `path` if it is empty (an older generation's, once
// its last checkpoint is pruned); a missing or non-empty one is left, OK.
absl::Status RemoveEmptyDirectory(const std::string& path, const std::string& root);

// Removes the ".tmp-" directories a crashed writer left in `dir`; returns how
// many. Call at start-up (WriteCheckpoint also does).
absl::StatusOr<int> RemoveStaleTemporaries(const std::string& dir, const std::string& root = "");

// The root `path` lies beneath: the deepest of `roots` that holds it (by
// components, common/beneath.h RootOf); "" when `roots` is empty (a rank
// started by hand: each directory is its own root). PERMISSION_DENIED naming
// the path and the roots when none holds it.
absl::StatusOr<std::string> CheckpointRootFor(const std::string& path, const std::vector<std::string>& roots);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_H_
