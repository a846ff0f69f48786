#ifndef RINGMASTER_ENGINE_PLAN_PLAN_NOTES_H_
#define RINGMASTER_ENGINE_PLAN_PLAN_NOTES_H_

// The "predicted-profile" section of bench/GPU_NOTES.md: what the plan
// predicts for a spec on a GPU (GPT-2 124M on an H100) before and after
// issue #25 -- memory peaks and the step time by op class, with every
// assumption -- so that a GPU run can confirm or refute it. Written by
// gpu_profile_notes (--update); gpu_profile_notes_test fails when the
// committed section no longer matches what this prints. Pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine::plan {

inline constexpr absl::string_view kProfileBegin = "<!-- predicted-profile:begin -->";
inline constexpr absl::string_view kProfileEnd = "<!-- predicted-profile:end -->";

struct ProfileNotesOptions {
  std::string spec = "bench/gpt2_124m.yaml";
  std::string gpu = "h100";
  // Besides the spec's own micro-batch (listed first; duplicates dropped):
  // 64 is the first batch bench/gpu_vs_pytorch.sh tries.
  std::vector<int64_t> micro_batches = {16, 64};
};

// The section, markers included, ending in a newline. INVALID_ARGUMENT for
// a spec or device the plan refuses.
absl::StatusOr<std::string> PredictedProfileSection(const ProfileNotesOptions& options);

// `document` with its predicted-profile section (markers included) replaced
// by `section`, or with `section` appended after a blank line when it has
// none; the rest of the document is kept byte for byte.
std::string ReplaceProfileSection(absl::string_view document, absl::string_view section);

// The predicted-profile section of `document`, markers included; "" when
// it has none.
std::string ProfileSectionOf(absl::string_view document);

}  // namespace ringmaster::engine::plan

#endif  // RINGMASTER_ENGINE_PLAN_PLAN_NOTES_H_
