#ifndef RINGMASTER_COMMON_METRICS_FORMAT_H_
#define RINGMASTER_COMMON_METRICS_FORMAT_H_

// The rules of the Prometheus text exposition format 0.0.4 that the metrics
// registry (common/metrics.h) relies on: name validation, escaping and number
// formatting. Pure functions; thread-safe.
//
// Reference: https://prometheus.io/docs/instrumenting/exposition_formats/

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// The Content-Type of a text format 0.0.4 exposition.
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// INVALID_ARGUMENT unless `name` matches [a-zA-Z_:][a-zA-Z0-9_:]* and does not
// start with "__" (reserved for Prometheus' internal use).
absl::Status ValidateMetricName(absl::string_view name);

// INVALID_ARGUMENT unless `label` matches [a-zA-Z_][a-zA-Z0-9_]* and does not
// start with "__". `metric` only names the metric in the message.
absl::Status ValidateLabelName(absl::string_view metric, absl::string_view label);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF). The text format is UTF-8, so label values and help
// texts must be.
bool IsValidUtf8(absl::string_view s);

// Help text escaping: backslash -> \\, newline -> \n.
std::string EscapeHelp(absl::string_view help);

// Label value escaping: backslash -> \\, double quote -> \", newline -> \n.
std::string EscapeLabelValue(absl::string_view value);

// The shortest decimal form that parses back to exactly `value` ("0.1", "5",
// "1e+21"), and +Inf, -Inf and NaN as Prometheus spells them.
std::string FormatMetricValue(double value);

// Appends `{name="value",...}` (nothing when both lists are empty) with the
// values escaped. `extra_name`/`extra_value`, when `extra_name` is not empty,
// are appended as the last pair (a histogram's "le").
void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  absl::string_view extra_name, absl::string_view extra_value, std::string* out);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_FORMAT_H_
