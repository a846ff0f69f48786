// The part of ValidateJobSpec that checks a program job (JobSpec.program):
// the command, working directory and environment, and that none of the
// built-in trainer's sections is set beside it.

#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "common/spec_checks.h"
#include "common/spec_limits.h"
#include "common/status_macros.h"

namespace ringmaster::spec_internal {
namespace {

constexpr int kMaxCommandArgs = 256;
constexpr size_t kMaxArgBytes = 4096;

// The built-in trainer's sections, which a program job must leave unset.
absl::Status CheckNoTrainerSections(const v1::JobSpec& spec) {
  const std::pair<const char*, bool> sections[] = {
      {"model", spec.has_model()},         {"data", spec.has_data()},
      {"training", spec.has_training()},   {"optimizer", spec.has_optimizer()},
      {"lr_schedule", spec.has_lr_schedule()}, {"precision", spec.has_precision()},
  };
  for (const auto& [name, set] : sections) {
    if (set) {
      return Invalid(name, absl::StrCat("a program job runs its own code, which reads no ", name,
                                        ": remove ", name, " or program"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCommand(const v1::ProgramSpec& program) {
  if (program.command().empty()) {
    return Invalid("program.command", "required: the program and its arguments, e.g. [python3, train.py]");
  }
  if (program.command_size() > kMaxCommandArgs) {
    return Invalid("program.command",
                   absl::StrCat("at most ", kMaxCommandArgs, " elements, got ", program.command_size()));
  }
  if (program.command(0).empty()) return Invalid("program.command[0]", "the program must not be empty");
  for (int i = 0; i < program.command_size(); ++i) {
    const std::string& arg = program.command(i);
    const std::string field = absl::StrCat("program.command[", i, "]");
    if (arg.size() > kMaxArgBytes) {
      return Invalid(field, absl::StrCat("at most ", kMaxArgBytes, " bytes, got ", arg.size()));
    }
    if (arg.find('\0') != std::string::npos) return Invalid(field, "holds a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status CheckWorkingDir(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  if (dir.size() > kMaxPathBytes) {
    return Invalid("program.working_dir", absl::StrCat("at most ", kMaxPathBytes, " bytes, got ", dir.size()));
  }
  if (dir.find('\0') != std::string::npos) return Invalid("program.working_dir", "holds a NUL byte");
  if (dir[0] != '/') {
    return Invalid("program.working_dir",
                   absl::StrCat("must be an absolute path on the node, got \"", Shown(dir),
                                "\" (the CLI makes a relative one absolute against the spec file's directory)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateProgram(const v1::JobSpec& spec) {
  RETURN_IF_ERROR(CheckNoTrainerSections(spec));
  RETURN_IF_ERROR(CheckCommand(spec.program()));
  RETURN_IF_ERROR(CheckWorkingDir(spec.program().working_dir()));
  return CheckEnv("program.env", spec.program().env());
}

}  // namespace ringmaster::spec_internal
