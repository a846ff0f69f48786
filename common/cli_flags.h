#ifndef RINGMASTER_COMMON_CLI_FLAGS_H_
#define RINGMASTER_COMMON_CLI_FLAGS_H_

// The flags every Ringmaster binary shares (logging), declared in one place so
// that each main reads them the same way.

#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ringmaster {

inline constexpr char kVersion[] = "0.1.0";

struct CommonFlags {
  std::string log_format = "text";
  std::string log_level = "info";
  std::string log_file;
};

inline void AddCommonFlags(CLI::App& app, CommonFlags* flags) {
  app.set_version_flag("--version", std::string("ringmaster ") + kVersion);
  app.add_option("--log-format", flags->log_format, "Log format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", flags->log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  app.add_option("--log-file", flags->log_file, "Append logs to this file instead of stderr");
}

// A duration on the command line, the same syntax for every flag of every
// daemon: absl::ParseDuration's ("30s", "500ms", "5m", "1h30m"), or a bare
// number of seconds ("30"). INVALID_ARGUMENT naming `flag` for anything else,
// a negative duration, or zero unless allow_zero.
inline absl::Status ParseDurationFlag(const std::string& flag, const std::string& text, bool allow_zero,
                                      absl::Duration* out) {
  double seconds = 0;
  absl::Duration d;
  if (absl::ParseDuration(text, &d)) {
  } else if (absl::SimpleAtod(text, &seconds)) {
    d = absl::Seconds(seconds);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", text, "\" is not a duration (e.g. 30s, 500ms, 5m)"));
  }
  if (d < absl::ZeroDuration() || (d == absl::ZeroDuration() && !allow_zero)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": must be ", allow_zero ? "zero or more" : "positive", ", got ",
                                                   text));
  }
  *out = d;
  return absl::OkStatus();
}

// Adds a duration flag bound to *out (its current value is the default shown
// by --help), parsed by ParseDurationFlag.
inline CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* out,
                                      const std::string& help, bool allow_zero) {
  return app
      .add_option_function<std::string>(
          name,
          [name, out, allow_zero](const std::string& text) {
            if (absl::Status s = ParseDurationFlag(name, text, allow_zero, out); !s.ok()) {
              throw CLI::ValidationError(std::string(s.message()));
            }
          },
          help + " (e.g. 30s, 500ms, 5m)")
      ->default_str(absl::FormatDuration(*out));
}

// Installs the logger described by `flags` for `component`.
inline absl::Status SetupLoggingFromFlags(const CommonFlags& flags, const std::string& component) {
  LogOptions options;
  RETURN_IF_ERROR(ParseLogFormat(flags.log_format, &options.format));
  options.level = flags.log_level;
  options.file = flags.log_file;
  options.component = component;
  return SetupLogging(options);
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CLI_FLAGS_H_
