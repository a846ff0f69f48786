#include "common/metrics_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

bool IsAsciiLetterOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

absl::Status ValidateMetricName(absl::string_view name) {
  bool ok = !name.empty() && (IsAsciiLetterOrUnderscore(name[0]) || name[0] == ':');
  for (size_t i = 1; ok && i < name.size(); ++i) {
    ok = IsAsciiLetterOrUnderscore(name[i]) || IsAsciiDigit(name[i]) || name[i] == ':';
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metric name \"", name, "\": must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (absl::StartsWith(name, "__")) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metric name \"", name, "\": the \"__\" prefix is reserved"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelName(absl::string_view metric, absl::string_view label) {
  bool ok = !label.empty() && IsAsciiLetterOrUnderscore(label[0]);
  for (size_t i = 1; ok && i < label.size(); ++i) {
    ok = IsAsciiLetterOrUnderscore(label[i]) || IsAsciiDigit(label[i]);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("invalid label name \"", label, "\" of metric \"",
                                                   metric, "\": must match [a-zA-Z_][a-zA-Z0-9_]*"));
  }
  if (absl::StartsWith(label, "__")) {
    return absl::InvalidArgumentError(absl::StrCat("invalid label name \"", label, "\" of metric \"",
                                                   metric, "\": the \"__\" prefix is reserved"));
  }
  return absl::OkStatus();
}

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t code_point;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code_point = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code_point = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code_point = c & 0x07;
    } else {
      return false;  // A continuation byte where a lead byte belongs, or 0xF8..0xFF.
    }
    if (s.size() - i <= static_cast<size_t>(extra)) return false;  // Truncated.
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      if ((cont & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (cont & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[extra]) return false;             // Overlong.
    if (code_point >= 0xD800 && code_point <= 0xDFFF) return false;  // Surrogate.
    if (code_point > 0x10FFFF) return false;
    i += extra + 1;
  }
  return true;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Without a format argument, to_chars writes the shortest representation
  // that round-trips (fixed or scientific, whichever is shorter).
  char buf[64];
  const std::to_chars_result result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  absl::string_view extra_name, absl::string_view extra_value, std::string* out) {
  if (names.empty() && extra_name.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out->push_back(',');
    absl::StrAppend(out, extra_name, "=\"", EscapeLabelValue(extra_value), "\"");
  }
  out->push_back('}');
}

}  // namespace ringmaster
