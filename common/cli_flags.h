#ifndef RINGMASTER_COMMON_CLI_FLAGS_H_
#define RINGMASTER_COMMON_CLI_FLAGS_H_

// The flags every Ringmaster binary shares (logging), declared in one place so
// that each main reads them the same way.

#include <cstdint>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
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

// A string option whose empty value turns something off (`--metrics-listen=`,
// `--metrics-listen ""`). CLI11 refuses `--flag=` unless the option may take
// no value, and would then put a captured default in place of the empty
// value: so the default is written into the description instead.
inline CLI::Option* AddClearableOption(CLI::App& app, const std::string& name, std::string* value,
                                       const std::string& description) {
  return app.add_option(name, *value, description + " (default: " + (value->empty() ? "empty" : *value) + ")")
      ->expected(0, 1);
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

// A size in bytes on the command line, the same syntax for every flag of
// every daemon: a bare number of bytes ("65536"), or a number and a unit,
// with or without a space: B, KiB, MiB, GiB, TiB, PiB (powers of 1024) or
// KB, MB, GB, TB, PB (powers of 1000), e.g. "64KiB", "1.5 GiB". INVALID_ARGUMENT
// naming `flag` for anything else, a negative size, one beyond 2^63 bytes, or
// zero unless allow_zero.
inline absl::Status ParseByteSizeFlag(const std::string& flag, const std::string& text, bool allow_zero,
                                      int64_t* out) {
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"PiB", 1125899906842624.0}, {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0},
      {"KiB", 1024.0},             {"PB", 1e15},             {"TB", 1e12},          {"GB", 1e9},
      {"MB", 1e6},                 {"KB", 1e3},              {"B", 1.0}};
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double scale = 1;
  for (const auto& [unit, bytes] : kUnits) {
    if (absl::ConsumeSuffix(&number, unit)) {
      scale = bytes;
      number = absl::StripTrailingAsciiWhitespace(number);
      break;
    }
  }
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !(value * scale < 9.2e18)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", text, "\" is not a size in bytes (e.g. 65536, 64KiB, 256MiB, 1GiB)"));
  }
  if (value < 0 || (value * scale < 1 && !allow_zero)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": must be ", allow_zero ? "zero or more" : "positive",
                                                   ", got ", text));
  }
  *out = static_cast<int64_t>(value * scale);
  return absl::OkStatus();
}

// "64 KiB", "256 MiB", "1.5 GiB", "800 B": for help texts and messages.
inline std::string FormatByteSize(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while ((value >= 1024 || value <= -1024) && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrCat(absl::StrFormat("%.4g", value), " ", kUnits[unit]);
}

// Adds a size flag bound to *out (its current value is the default shown by
// --help), parsed by ParseByteSizeFlag.
inline CLI::Option* AddByteSizeOption(CLI::App& app, const std::string& name, int64_t* out, const std::string& help,
                                      bool allow_zero) {
  return app
      .add_option_function<std::string>(
          name,
          [name, out, allow_zero](const std::string& text) {
            if (absl::Status s = ParseByteSizeFlag(name, text, allow_zero, out); !s.ok()) {
              throw CLI::ValidationError(std::string(s.message()));
            }
          },
          help + " (e.g. 64KiB, 256MiB, 1GiB)")
      ->default_str(FormatByteSize(*out));
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
