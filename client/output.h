#ifndef RINGMASTER_CLIENT_OUTPUT_H_
#define RINGMASTER_CLIENT_OUTPUT_H_

// How the CLI shows things: aligned tables, protobuf JSON lines and YAML
// documents, and the small formatters (states, times, ages, durations, sizes,
// labels) that tables and `describe` share. Pure functions; thread-compatible.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "proto/job.pb.h"
#include "proto/node.pb.h"

namespace ringmaster::client {

// Columns separated by two spaces, each as wide as its widest cell; the last
// column is not padded. The header is the first row.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);
  void Render(std::ostream& out) const;
  // The rows as CSV (RFC 4180: a cell with a comma, quote or line break is
  // quoted, its quotes doubled), each line ending in "\n".
  void RenderCsv(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// The message as one line of protobuf JSON (canonical lowerCamelCase names,
// default values omitted), followed by a newline.
void PrintJsonLine(const google::protobuf::Message& message, std::ostream& out);

// The message as one YAML document: a `---` line, then its protobuf JSON (as
// PrintJsonLine) in block style. A string that YAML would read as something
// else (true, no, 1, null, a timestamp) is double-quoted, so the document
// reads back as the JSON does (int64 values stay strings, as in JSON).
void PrintYamlDocument(const google::protobuf::Message& message, std::ostream& out);
// The same for a JSON text (one value); a text yaml-cpp cannot parse is
// printed as it is after the `---` line.
void PrintJsonAsYaml(absl::string_view json, std::ostream& out);

// json and yaml print whole responses (PrintMessage) instead of tables.
bool IsStructured(OutputFormat format);
// PrintYamlDocument for kYaml, else PrintJsonLine.
void PrintMessage(const google::protobuf::Message& message, OutputFormat format, std::ostream& out);

// "RUNNING" for JOB_STATE_RUNNING; "READY" for NODE_STATE_READY.
std::string StateName(v1::JobState state);
std::string NodeStateName(v1::NodeState state);
// "RANK_EXITED" for JOB_EVENT_KIND_RANK_EXITED.
std::string EventKindName(v1::JobEventKind kind);
// SUCCEEDED, FAILED or CANCELLED.
bool IsTerminal(v1::JobState state);

absl::Time FromProto(const google::protobuf::Timestamp& t);
bool IsSet(const google::protobuf::Timestamp& t);
// "2026-11-21T10:00:05Z" (UTC, to the second); "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& t);
// The age of something created at `t`, by its largest unit: "45s", "12m",
// "3h", "5d"; "-" when unset; "0s" when in the future.
std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now);
// "45s", "3m20s", "1h05m", "2d03h" (two units at most); negative as "0s".
std::string FormatDurationShort(absl::Duration d);
// "512 B", "1.5 KiB", "20.0 MiB", "1.2 GiB".
std::string FormatBytes(int64_t bytes);
// "step/total (pct%)" or "-" when nothing was reported (jobs table).
std::string FormatProgressCell(const v1::StepMetrics& progress);
// Labels as "k1=v1,k2=v2", sorted by key; "-" when there are none.
std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels);
// Ranks of a job: the current placement's world size, else the spec's
// nodes x ranks_per_node, else "-".
std::string FormatRanks(const v1::Job& job);
std::string FormatRanks(const v1::JobSummary& job);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_OUTPUT_H_
