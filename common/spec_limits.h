#ifndef RINGMASTER_COMMON_SPEC_LIMITS_H_
#define RINGMASTER_COMMON_SPEC_LIMITS_H_

// The bounds every job spec keeps. ValidateJobSpec (spec.h) enforces them,
// and the coordinator checks every Submit against them before it stores
// anything, so that no job can make an answer about it, or a list of jobs,
// large: a user's spec is untrusted input. Each violation is INVALID_ARGUMENT
// naming the field ("labels: at most 64 labels, got 66000"). The label bounds
// are Kubernetes' (a name segment of 63 characters; values kept short).

#include <cstddef>

namespace ringmaster {

// The whole spec, serialized, defaults applied.
inline constexpr size_t kMaxSpecBytes = size_t{256} << 10;
// JobSpec.labels: entries, key and value lengths in bytes.
inline constexpr int kMaxLabels = 64;
inline constexpr size_t kMaxLabelKeyBytes = 63;
inline constexpr size_t kMaxLabelValueBytes = 255;
// ResourceSpec.node_selector (keys and values as labels).
inline constexpr int kMaxNodeSelectorEntries = 32;
// JobSpec.env: variables, name and value lengths in bytes.
inline constexpr int kMaxEnvVariables = 64;
inline constexpr size_t kMaxEnvNameBytes = 255;
inline constexpr size_t kMaxEnvValueBytes = 4096;
// Every path a spec names (data.path, checkpoint.directory): PATH_MAX.
inline constexpr size_t kMaxPathBytes = 4096;

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SPEC_LIMITS_H_
