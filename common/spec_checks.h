#ifndef RINGMASTER_COMMON_SPEC_CHECKS_H_
#define RINGMASTER_COMMON_SPEC_CHECKS_H_

// Helpers shared by the job-spec validators (spec_validate*.cc): uniform
// "<path>: <reason>" INVALID_ARGUMENT errors. Internal to //common:spec.

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::spec_internal {

// INVALID_ARGUMENT "<path>: <reason>".
absl::Status Invalid(absl::string_view path, absl::string_view reason);

// "<path>: must be >= min, got v" or "<path>: must be <= max, got v".
absl::Status CheckRange(absl::string_view path, int64_t value, int64_t min, int64_t max);

// One end of a real interval; `inclusive` decides [ or (.
struct Bound {
  double value;
  bool inclusive;
};
inline constexpr Bound kUnbounded{std::numeric_limits<double>::infinity(), false};

// "<path>: must be in [0, 1), got 1" (or "must be > 0, got -0.1" when `high`
// is kUnbounded).
absl::Status CheckReal(absl::string_view path, double value, Bound low, Bound high);

// How a spec writes the value `number` of `type`: its alias, else its name in
// lowercase ("adamw", "1f1b").
std::string SpecEnumName(const google::protobuf::EnumDescriptor& type, int number);

// The model kind as written in a spec ("mlp", "cnn", "gpt"; "none").
std::string ModelKindName(const v1::ModelSpec& model);

// `text` C-escaped for an error message, cut after 64 bytes (with its size):
// an error never repeats a huge input.
std::string Shown(absl::string_view text);

// Validates a label-style map (JobSpec.labels, ResourceSpec.node_selector):
// at most `max_entries` entries ("<path>: at most 64 labels, got 66000",
// `entries` naming them), keys 1 to 63 characters of [A-Za-z0-9._/-], values
// at most 255 characters (common/spec_limits.h).
absl::Status CheckLabels(absl::string_view path, const google::protobuf::Map<std::string, std::string>& labels,
                         int max_entries, absl::string_view entries);
// JobSpec.env or ProgramSpec.env (`path`): count, names (at most 255
// bytes), value sizes, and the names the worker owns.
absl::Status CheckEnv(absl::string_view path, const google::protobuf::Map<std::string, std::string>& env);

// A program job (JobSpec.program set): no section of the built-in trainer,
// the command, working directory and env (spec_validate_program.cc).
absl::Status ValidateProgram(const v1::JobSpec& spec);

// Resources, parallel layout, elastic bounds, checkpoint and restart policy
// of a spec with defaults applied (spec_validate_layout.cc).
absl::Status ValidateLayoutAndPolicies(const v1::JobSpec& spec);

}  // namespace ringmaster::spec_internal

#endif  // RINGMASTER_COMMON_SPEC_CHECKS_H_
