#ifndef RINGMASTER_COMMON_LOGGING_H_
#define RINGMASTER_COMMON_LOGGING_H_

// Logging on spdlog: one place that configures the format (human text or JSON
// lines) and the level, from the flags each binary's main reads.

#include <string>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace ringmaster {

enum class LogFormat { kText, kJson };

struct LogOptions {
  LogFormat format = LogFormat::kText;
  // trace, debug, info, warn, error, critical, off.
  std::string level = "info";
  // Added to every line ("coordinator", "worker", "trainer r3").
  std::string component;
  // Empty: stderr. Otherwise a file, appended to.
  std::string file;
};

// Installs the default logger. Returns INVALID_ARGUMENT for an unknown level or
// format name, naming it; the previous logger stays.
absl::Status SetupLogging(const LogOptions& options);

// "text" / "json" -> LogFormat.
absl::Status ParseLogFormat(const std::string& name, LogFormat* format);

// Escapes `s` for inclusion in a JSON string (quotes, backslashes, control characters).
std::string JsonEscape(const std::string& s);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_LOGGING_H_
