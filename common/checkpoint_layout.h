#ifndef RINGMASTER_COMMON_CHECKPOINT_LAYOUT_H_
#define RINGMASTER_COMMON_CHECKPOINT_LAYOUT_H_

// Where a job's checkpoints lie, as the coordinator decides and the trainer
// writes them (the one copy of the layout):
//
//   <base>/<job id>/gen-<generation>/step-<step, at least 9 digits>
//
// base: the coordinator's --checkpoint-root, or the spec's
// checkpoint.directory (within an allowed root), lexically normalised. Each
// generation writes its own directory; the coordinator refuses a commit of
// any other path (coordinator/core/checkpoint_registry.h). Pure; thread-safe.

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster {

// "step-000001230".
inline std::string CheckpointStepName(int64_t step) { return absl::StrFormat("step-%09d", step); }

// "<base>/<job id>/gen-<generation>", `base` normalised ("/a/./b/" is "/a/b").
inline std::string CheckpointGenerationDir(const std::string& base, const std::string& job_id, int64_t generation) {
  std::filesystem::path normal = std::filesystem::path(base).lexically_normal();
  if (!normal.has_filename() && normal != normal.root_path()) normal = normal.parent_path();
  std::string dir = normal.string();
  if (dir != "/") dir += "/";
  return absl::StrCat(dir, job_id, "/gen-", generation);
}

// "<generation dir>/step-NNNNNNNNN".
inline std::string CheckpointStepDir(const std::string& generation_dir, int64_t step) {
  return absl::StrCat(generation_dir, "/", CheckpointStepName(step));
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CHECKPOINT_LAYOUT_H_
