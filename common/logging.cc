#include "common/logging.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace ringmaster {
namespace {

// One JSON object per line: {"ts":"...","level":"info","component":"...","msg":"..."}.
class JsonFormatter : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string component) : component_(std::move(component)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    absl::Time t = absl::FromChrono(msg.time);
    std::string line = absl::StrCat(
        "{\"ts\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()),
        "\",\"level\":\"", spdlog::level::to_string_view(msg.level).data(), "\"",
        component_.empty() ? "" : absl::StrCat(",\"component\":\"", JsonEscape(component_), "\""),
        ",\"msg\":\"", JsonEscape(std::string(msg.payload.data(), msg.payload.size())), "\"}\n");
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(component_);
  }

 private:
  std::string component_;
};

}  // namespace

std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

absl::Status ParseLogFormat(const std::string& name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
  } else if (name == "json") {
    *format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("log format: unknown value \"", name, "\" (expected text or json)"));
  }
  return absl::OkStatus();
}

absl::Status SetupLogging(const LogOptions& options) {
  spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  // from_str maps unknown names to "off"; only "off" itself may mean off.
  if (level == spdlog::level::off && options.level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "log level: unknown value \"", options.level,
        "\" (expected trace, debug, info, warn, error, critical or off)"));
  }
  spdlog::sink_ptr sink;
  if (options.file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file);
    } catch (const spdlog::spdlog_ex& e) {
      return absl::InvalidArgumentError(absl::StrCat("log file ", options.file, ": ", e.what()));
    }
  }
  auto logger = std::make_shared<spdlog::logger>(options.component.empty() ? "ringmaster" : options.component, sink);
  if (options.format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>(options.component));
  } else {
    std::string prefix = options.component.empty() ? "" : absl::StrCat("[", options.component, "] ");
    logger->set_pattern(absl::StrCat("%Y-%m-%d %H:%M:%S.%e %^%L%$ ", prefix, "%v"));
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace ringmaster
