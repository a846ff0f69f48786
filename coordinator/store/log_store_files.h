#ifndef RINGMASTER_COORDINATOR_STORE_LOG_STORE_FILES_H_
#define RINGMASTER_COORDINATOR_STORE_LOG_STORE_FILES_H_

// The LogStore's on-disk format (log_store.h), as free functions: records,
// segment file names, and bounded reads. Internal to the log_store target.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/logs.pb.h"

namespace ringmaster::coordinator::log_files {

// A job id, as a directory name: letters, digits, '-', '_', '.'; not "." or "..".
bool PlainName(const std::string& s);

// 0: unspecified ("-"), 1: stdout ("out"), 2: stderr ("err").
int StreamIndex(v1::LogStream s);

// "<time> <stream> <sequence> <text>\n", the text cut at max_text_bytes and
// escaped.
std::string FormatRecord(const v1::LogLine& line, size_t max_text_bytes);
// A stored marker: "<time> dropped <lines>/<bytes> <text>\n".
std::string FormatMarkerRecord(absl::Time time, int64_t lines, int64_t bytes, const std::string& text);
// A record (without its "\n") -> LogLine (job, generation, rank not set; a
// marker has dropped_lines/dropped_bytes). False if it is not one.
bool ParseRecord(absl::string_view record, v1::LogLine* out);

// "rank-<r>.log" (first_line and offset 0) or "rank-<r>.<first_line>.<offset>.log".
std::string SegmentName(int32_t rank, int64_t first_line, int64_t offset);
struct SegmentId {
  int32_t rank = 0;
  int64_t first_line = 0;
  int64_t offset = 0;
};
std::optional<SegmentId> ParseSegmentName(const std::string& name);

// [offset, offset + length) of a file (less at its end). NOT_FOUND if the
// file is gone (a segment the quota dropped), UNAVAILABLE on another error.
absl::StatusOr<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length);
// The offset just past the `skip`-th newline at or after `offset` (at most `size`).
absl::StatusOr<int64_t> SkipLines(const std::string& path, int64_t offset, int64_t skip, int64_t size);

}  // namespace ringmaster::coordinator::log_files

#endif  // RINGMASTER_COORDINATOR_STORE_LOG_STORE_FILES_H_
