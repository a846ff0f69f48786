#ifndef RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_FILES_H_
#define RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_FILES_H_

// The JSON files of a checkpoint directory:
//
// MANIFEST.json, written last, lists every other file with its size and SHA-256:
//   {"format": "ringmaster-checkpoint/1", "step": 1230,
//    "files": [{"name": "model.safetensors", "size": 4096, "sha256": "<64 hex>"}, ...]}
//
// state.json holds the trainer's scalar state as one JSON object of strings
// (step, loss scale, data-loader position, RNG state, ...); values are kept as
// the exact strings the trainer wrote, so numbers round-trip exactly:
//   {"data_loader": "epoch=3 batch=17 seed=42", "loss_scale": "65536"}

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine {

inline constexpr char kManifestFormat[] = "ringmaster-checkpoint/1";

struct ManifestEntry {
  std::string name;  // a file name inside the checkpoint directory
  int64_t size = 0;
  std::string sha256;  // lower-case hex
};

struct Manifest {
  int64_t step = 0;
  std::vector<ManifestEntry> files;
};

std::string SerializeManifest(const Manifest& manifest);
// DATA_LOSS "<path>: <problem>" unless the text is a manifest of this format
// whose file names are plain names (no '/', not "." or "..") listed once.
absl::StatusOr<Manifest> ParseManifest(absl::string_view text, absl::string_view path);

using StateMap = std::map<std::string, std::string>;

// INVALID_ARGUMENT if a key or value is not UTF-8.
absl::StatusOr<std::string> SerializeState(const StateMap& state);
// DATA_LOSS "<path>: <problem>" unless the text is a JSON object of strings.
absl::StatusOr<StateMap> ParseState(absl::string_view text, absl::string_view path);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_CHECKPOINT_FILES_H_
