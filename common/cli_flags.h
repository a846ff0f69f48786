#ifndef RINGMASTER_COMMON_CLI_FLAGS_H_
#define RINGMASTER_COMMON_CLI_FLAGS_H_

// The flags every Ringmaster binary shares (logging), declared in one place so
// that each main reads them the same way.

#include <string>

#include "CLI/CLI.hpp"
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
