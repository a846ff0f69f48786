#ifndef RINGMASTER_FUZZ_SPEC_BOUNDS_H_
#define RINGMASTER_FUZZ_SPEC_BOUNDS_H_

// BrokenLimit: which limit of common/spec_limits.h a spec breaks, computed
// here from the limits alone (not by ValidateJobSpec, which it checks), so
// that a fuzz target can tell that a spec must be refused. Test-only.

#include <cstddef>
#include <string>

#include "common/spec_limits.h"
#include "google/protobuf/map.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::fuzz {

// The first limit that `spec` (defaults applied) breaks, as the field's
// name ("labels", "resources.node_selector", "env", "data.path",
// "checkpoint.directory", "spec" for the whole), or "" when it keeps them all.
inline std::string BrokenLimit(const v1::JobSpec& spec) {
  auto broken_map = [](const google::protobuf::Map<std::string, std::string>& map, int entries, size_t key_bytes,
                       size_t value_bytes) {
    if (map.size() > static_cast<size_t>(entries)) return true;
    for (const auto& [key, value] : map) {
      if (key.size() > key_bytes || value.size() > value_bytes) return true;
    }
    return false;
  };
  if (broken_map(spec.labels(), kMaxLabels, kMaxLabelKeyBytes, kMaxLabelValueBytes)) return "labels";
  if (broken_map(spec.resources().node_selector(), kMaxNodeSelectorEntries, kMaxLabelKeyBytes, kMaxLabelValueBytes)) {
    return "resources.node_selector";
  }
  if (broken_map(spec.env(), kMaxEnvVariables, kMaxEnvNameBytes, kMaxEnvValueBytes)) return "env";
  if (spec.data().path().size() > kMaxPathBytes) return "data.path";
  if (spec.checkpoint().directory().size() > kMaxPathBytes) return "checkpoint.directory";
  if (spec.ByteSizeLong() > kMaxSpecBytes) return "spec";
  return "";
}

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_SPEC_BOUNDS_H_
