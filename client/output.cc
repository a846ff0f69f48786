#include "client/output.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::client {

Table::Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void Table::AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

void Table::Render(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

void Table::RenderCsv(std::ostream& out) const {
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out << ',';
      const std::string& cell = row[i];
      if (cell.find_first_of(",\"\r\n") == std::string::npos) {
        out << cell;
        continue;
      }
      out << '"';
      for (char c : cell) out << (c == '"' ? "\"\"" : std::string(1, c));
      out << '"';
    }
    out << "\n";
  }
}

namespace {

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  // Cannot fail for messages of a linked-in descriptor pool.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// "2026-11-18T11:01:40Z" and "2026-11-18": YAML 1.1 readers make dates of them.
bool LooksLikeDate(const std::string& text) {
  return text.size() >= 10 && absl::ascii_isdigit(text[0]) && absl::ascii_isdigit(text[1]) &&
         absl::ascii_isdigit(text[2]) && absl::ascii_isdigit(text[3]) && text[4] == '-';
}

// A plain scalar `text` would be read as a boolean (YAML 1.1's yes/no/on/off
// included), a number or a date; the emitter itself quotes null and "".
bool ReadsAsNonString(const std::string& text) {
  const YAML::Node node(text);
  bool b;
  double d;
  long long i;
  return YAML::convert<bool>::decode(node, b) || YAML::convert<double>::decode(node, d) ||
         YAML::convert<long long>::decode(node, i) || LooksLikeDate(text);
}

void EmitScalar(const YAML::Node& node, YAML::Emitter& out) {
  // yaml-cpp tags a quoted (JSON string) scalar "!", a plain one "?".
  if (node.Tag() == "!" && ReadsAsNonString(node.Scalar())) out << YAML::DoubleQuoted;
  out << node.Scalar();
}

void EmitNode(const YAML::Node& node, YAML::Emitter& out) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      if (node.size() == 0) out << YAML::Flow;  // "{}" on the key's line
      out << YAML::BeginMap;
      for (const auto& entry : node) {
        out << YAML::Key;
        EmitScalar(entry.first, out);
        out << YAML::Value;
        EmitNode(entry.second, out);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      if (node.size() == 0) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const YAML::Node& item : node) EmitNode(item, out);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      EmitScalar(node, out);
      return;
    default:
      out << YAML::Null;
  }
}

}  // namespace

void PrintJsonLine(const google::protobuf::Message& message, std::ostream& out) { out << ToJson(message) << "\n"; }

void PrintJsonAsYaml(absl::string_view json, std::ostream& out) {
  out << "---\n";
  YAML::Emitter emitter;
  try {
    EmitNode(YAML::Load(std::string(json)), emitter);
  } catch (const YAML::Exception&) {
    out << json << "\n";  // JSON is YAML too, only not in block style
    return;
  }
  out << emitter.c_str() << "\n";
}

void PrintYamlDocument(const google::protobuf::Message& message, std::ostream& out) {
  PrintJsonAsYaml(ToJson(message), out);
}

bool IsStructured(OutputFormat format) { return format == OutputFormat::kJson || format == OutputFormat::kYaml; }

void PrintMessage(const google::protobuf::Message& message, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kYaml) {
    PrintYamlDocument(message, out);
  } else {
    PrintJsonLine(message, out);
  }
}

namespace {

std::string StripPrefix(const std::string& name, const char* prefix) {
  if (absl::StartsWith(name, prefix)) return name.substr(std::string(prefix).size());
  return name.empty() ? "UNKNOWN" : name;
}

}  // namespace

std::string StateName(v1::JobState state) { return StripPrefix(v1::JobState_Name(state), "JOB_STATE_"); }

std::string NodeStateName(v1::NodeState state) { return StripPrefix(v1::NodeState_Name(state), "NODE_STATE_"); }

std::string EventKindName(v1::JobEventKind kind) {
  return StripPrefix(v1::JobEventKind_Name(kind), "JOB_EVENT_KIND_");
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

bool IsSet(const google::protobuf::Timestamp& t) { return t.seconds() != 0 || t.nanos() != 0; }

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  if (!IsSet(t)) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProto(t), absl::UTCTimeZone());
}

std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now) {
  if (!IsSet(t)) return "-";
  const int64_t seconds = std::max<int64_t>(0, absl::ToInt64Seconds(now - FromProto(t)));
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrCat(seconds / 60, "m");
  if (seconds < 86400) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

std::string FormatDurationShort(absl::Duration d) {
  const int64_t seconds = std::max<int64_t>(0, absl::ToInt64Seconds(d));
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  if (seconds < 86400) return absl::StrFormat("%dh%02dm", seconds / 3600, seconds % 3600 / 60);
  return absl::StrFormat("%dd%02dh", seconds / 86400, seconds % 86400 / 3600);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

std::string FormatProgressCell(const v1::StepMetrics& progress) {
  if (progress.total_steps() > 0) {
    return absl::StrCat(progress.step(), "/", progress.total_steps(), " (",
                        progress.step() * 100 / progress.total_steps(), "%)");
  }
  if (progress.step() > 0) return absl::StrCat(progress.step());
  return "-";
}

std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  // By key: a Map's iteration order is unspecified.
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

namespace {

std::string FormatRanks(const v1::Placement& placement, const v1::ResourceSpec& resources) {
  if (placement.world_size() > 0) return absl::StrCat(placement.world_size());
  if (resources.has_nodes() && resources.has_ranks_per_node()) {
    return absl::StrCat(resources.nodes() * resources.ranks_per_node());
  }
  return "-";
}

}  // namespace

std::string FormatRanks(const v1::Job& job) { return FormatRanks(job.placement(), job.spec().resources()); }

std::string FormatRanks(const v1::JobSummary& job) { return FormatRanks(job.placement(), job.spec().resources()); }

}  // namespace ringmaster::client
