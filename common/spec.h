#ifndef RINGMASTER_COMMON_SPEC_H_
#define RINGMASTER_COMMON_SPEC_H_

// Job specs: YAML or JSON files mapped onto the ringmaster.v1.JobSpec proto
// (proto/job_spec.proto is the reference for every field, its default and its
// limits), `--set key.path=value` overrides, defaults and validation.
//
// The path from a file to a job the coordinator accepts:
//   ParseJobSpec -> ApplyOverride (each --set) -> ApplyDefaults -> ValidateJobSpec
// LoadJobSpecFile does all four. The coordinator runs ApplyDefaults and
// ValidateJobSpec again on every submitted spec (both are idempotent).
//
// Every error about the spec's content is INVALID_ARGUMENT with a message
// that names the field path (proto field names, "model.gpt.heads",
// "model.mlp.hidden_sizes[1]", "labels.team") and the reason:
//   resources.nodes: must be >= 1, got 0
//   optimizer.lr: expected a number, got "fast" (line 7, column 7)
//   modle: unknown field (line 1, column 1)
// Errors found while parsing a document carry its line and column; errors of
// a --set carry the assignment. Thread-safe: all functions are pure.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"

namespace ringmaster {

enum class SpecFormat { kYaml, kJson };

// CheckpointPolicy.interval's one value: the Young-Daly interval.
inline constexpr char kCheckpointIntervalAuto[] = "auto";

// ".yaml" / ".yml" -> kYaml, ".json" -> kJson (case-insensitive); otherwise
// INVALID_ARGUMENT naming the path.
absl::StatusOr<SpecFormat> SpecFormatFromPath(std::string_view path);

// Parses one YAML or JSON document onto a JobSpec: syntax (with line and
// column), field names, value types and enum values. Applies no defaults
// and checks no ranges or consistency (ValidateJobSpec does). An empty
// document is an error.
absl::StatusOr<v1::JobSpec> ParseJobSpec(std::string_view text, SpecFormat format);

// Reads the file at `path` (NOT_FOUND / PERMISSION_DENIED / ... if it cannot
// be read), parses it in the format its extension names, applies `overrides`
// in order (see ApplyOverrides), sets `name` to the file's base name without
// extension if the spec has none, applies defaults and validates (unless
// `validate` is false: the CLI's --skip-local-validation leaves that to the
// coordinator). Errors about the file's content are prefixed with "<path>: ";
// override errors are as ApplyOverride returns them, and a spec valid
// without its overrides but not with them is blamed on them
// (ValidateOverridden).
absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path,
                                            const std::vector<std::string>& overrides = {}, bool validate = true);

// LoadJobSpecFile's first steps only: read, parse, apply `overrides`, name
// the spec after the file if it has no name, and make a relative
// program.working_dir absolute against the file's directory. No defaults, no validation:
// what `submit` sends, so that the coordinator can tell a value the user
// wrote from a default (Job.submitted).
absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path, const std::vector<std::string>& overrides = {});

// Applies one `key.path=value` assignment (the CLI's --set):
// - key.path: proto field names (snake_case) or their lowerCamelCase JSON
//   names, separated by '.'; setting a member of a oneof (model.cnn.channels)
//   switches the oneof to it; after a map field, the rest of the path is the
//   key (labels.team=x).
// - value: typed by the field: numbers, true/false, enum names (as in files);
//   repeated fields take a comma list, with or without brackets
//   ("64,32", "[64, 32]"; "" or "[]" empties the list); a value in matching
//   single or double quotes is taken without them; a bare `null` resets the
//   field to unset (its default), or removes the map entry.
// Errors (INVALID_ARGUMENT): a missing '=', an unknown field, a message field
// without a sub-field, a bad value; the message ends with
// ` (in --set "<assignment>")`. On error `spec` is unchanged.
absl::Status ApplyOverride(v1::JobSpec* spec, std::string_view assignment);

// ApplyOverride of each assignment in order, then one rule for shortened
// runs: when an assignment set training.steps, none set
// lr_schedule.warmup_steps, and the warm-up is no longer shorter than
// training.steps, the warm-up becomes a tenth of training.steps (so that
// `--set training.steps=100` runs any spec). On error `spec` may hold the
// assignments before the failed one.
absl::Status ApplyOverrides(v1::JobSpec* spec, const std::vector<std::string>& overrides);

// ValidateJobSpec of `written` (a spec as read from `origin`, a path or
// "stdin", before any --set) with `overrides` applied (ApplyOverrides),
// blaming what made it invalid: "<origin>: <error>" when `written` is
// invalid by itself; otherwise "<error> (after --set "k=v"; <origin> alone is
// valid)", naming the assignments without which it would be valid (all of
// them when no single one is to blame). Errors of the assignments
// themselves are ApplyOverride's.
absl::Status ValidateOverridden(const v1::JobSpec& written, std::string_view origin,
                                const std::vector<std::string>& overrides);

// Fills every unset field that has a documented default (see
// proto/job_spec.proto and proto/model_spec.proto); fields that are set, even
// to invalid values, are left alone. Defaults depend on other fields (lr on
// the optimizer type, data.path on the dataset, ranks_per_node and data on
// the parallel layout), so run it after all overrides. Options that do not
// apply to the chosen kind (momentum for AdamW, a loss scaler for bf16) are
// not filled. Idempotent.
void ApplyDefaults(v1::JobSpec* spec);

// Checks ranges, required fields and consistency between fields; OK or the
// first violation found (INVALID_ARGUMENT, field path and reason). Validates
// the spec as ApplyDefaults would complete it (without changing `spec`), so
// it may be called on a spec with or without defaults applied. Does not
// check the file system (data.path existence) or the cluster (GPU counts).
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

// One setting of an effective spec (defaults applied) and where its value
// came from.
struct SpecSetting {
  enum class Source {
    kSpec,     // written in the spec (file or standard input)
    kSet,      // written by a --set assignment
    kDefault,  // not written: ApplyDefaults chose it (or the field's zero value)
    kUnknown,  // the spec as submitted is not known
  };
  std::string path;   // proto field path: "resources.device", "model.cnn.channels", "labels.team"
  std::string value;  // as a spec file writes it: 0.001, FP32, [32, 64], "" (empty)
  Source source = Source::kUnknown;
};

// Every setting of `effective`, in proto field order: each scalar and list
// field that applies (unset optional fields and absent messages, such as
// momentum for AdamW or the loss scaler for bf16, do not), and each map
// entry. `submitted` is the spec as sent (Job.submitted.spec; null: unknown,
// every source is kUnknown) and `overrides` the --set assignments applied to
// it: a field written in `submitted` is kSet when an override wrote it, else
// kSpec; any other is kDefault.
std::vector<SpecSetting> SpecSettings(const v1::JobSpec& effective, const v1::JobSpec* submitted,
                                      const std::vector<std::string>& overrides);

// "spec", "--set", "default", or "-" (unknown).
std::string_view SettingSourceName(SpecSetting::Source source);

// Blocks of the model (the units pipeline stages are cut between), as
// documented in proto/model_spec.proto; counts empty repeated fields as
// their defaults. 0 when no model is set.
int ModelBlockCount(const v1::ModelSpec& model);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SPEC_H_
