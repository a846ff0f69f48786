// LogStore's readers: TailCursor and Read (log_store.h).
#include <algorithm>
#include <climits>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/store/log_store.h"
#include "coordinator/store/log_store_files.h"

namespace ringmaster::coordinator {
namespace {

// A read that meets a segment the quota deleted meanwhile starts again from
// a fresh copy of the index (which then says where the log resumes).
constexpr int kAttempts = 4;

bool Earlier(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
  return a.seconds() != b.seconds() ? a.seconds() < b.seconds() : a.nanos() < b.nanos();
}

}  // namespace

std::vector<LogStore::FileView> LogStore::MatchingLocked(const LogQuery& query) const {
  std::vector<FileView> out;
  for (auto it = files_.lower_bound({query.job_id, query.min_generation, INT32_MIN});
       it != files_.end() && std::get<0>(it->first) == query.job_id; ++it) {
    const auto& [job, gen, rank] = it->first;
    if (gen > query.max_generation) break;
    if (query.rank.has_value() && rank != *query.rank) continue;
    const FileIndex& index = it->second;
    if (index.size == 0) continue;
    FileView view;
    view.key = it->first;
    view.segments.assign(index.segments.begin(), index.segments.end());
    view.lines = index.lines;
    view.size = index.size;
    view.last_time = index.last_time;
    out.push_back(std::move(view));
  }
  return out;
}

v1::LogLine LogStore::QuotaMarker(const FileKey& key, int64_t lines, int64_t bytes, absl::Time time) const {
  v1::LogLine marker;
  marker.set_job_id(std::get<0>(key));
  marker.set_generation(std::get<1>(key));
  marker.set_rank(std::get<2>(key));
  *marker.mutable_time() = ToProtoTime(time);
  marker.set_dropped_lines(lines);
  marker.set_dropped_bytes(bytes);
  marker.set_text(absl::StrCat("... ", lines, " lines (", bytes, " bytes) dropped: the job's log quota",
                               options_.quota_per_job > 0
                                   ? absl::StrCat(" of ", FormatByteSize(options_.quota_per_job), " is full")
                                   : std::string(" was full"),
                               " (--log-quota-per-job; the oldest lines go first) ..."));
  return marker;
}

absl::StatusOr<LogCursor> LogStore::TailCursor(const LogQuery& query, int64_t tail_lines) const {
  absl::StatusOr<LogCursor> cursor;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    cursor = TailCursorOnce(query, tail_lines);
    if (cursor.status().code() != absl::StatusCode::kNotFound) return cursor;
  }
  return absl::UnavailableError(absl::StrCat("the logs of ", query.job_id, " kept changing under the read: ",
                                             cursor.status().message()));
}

absl::StatusOr<LogCursor> LogStore::TailCursorOnce(const LogQuery& query, int64_t tail_lines) const {
  LogCursor cursor;
  if (tail_lines <= 0) return cursor;
  struct Start {
    std::pair<int64_t, int32_t> file;
    std::string path;
    int64_t segment_offset;  // of the segment in the rank's log
    int64_t from, skip, size;  // within the segment
    int64_t line;              // the line to start at
  };
  std::vector<Start> starts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const FileView& view : MatchingLocked(query)) {
      const FileIndex& index = files_.at(view.key);
      const int64_t first = index.lines - tail_lines;
      // Fewer lines kept than asked for: from the start, marker included.
      if (index.segments.empty() || first < index.segments.front().first_line) continue;
      const Segment* segment = &index.segments.front();
      for (const Segment& s : index.segments) {
        if (s.first_line <= first && first < s.first_line + s.lines) segment = &s;
      }
      LogCursor::Position at{segment->offset, segment->first_line};
      auto cp = std::upper_bound(index.checkpoints.begin(), index.checkpoints.end(), first,
                                 [](int64_t line, const LogCursor::Position& p) { return line < p.line; });
      if (cp != index.checkpoints.begin() && std::prev(cp)->line >= at.line) at = *std::prev(cp);
      starts.push_back({{std::get<1>(view.key), std::get<2>(view.key)},
                        segment->path,
                        segment->offset,
                        at.offset - segment->offset,
                        first - at.line,
                        segment->size,
                        first});
    }
  }
  for (const Start& s : starts) {
    ASSIGN_OR_RETURN(int64_t local, log_files::SkipLines(s.path, s.from, s.skip, s.size));
    cursor.positions[s.file] = {s.segment_offset + local, s.line};
  }
  return cursor;
}

absl::StatusOr<v1::LogChunk> LogStore::Read(const LogQuery& query, LogCursor* cursor, size_t max_lines,
                                            size_t max_bytes) const {
  absl::StatusOr<v1::LogChunk> chunk;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    LogCursor copy = *cursor;
    chunk = ReadOnce(query, &copy, max_lines, max_bytes);
    if (chunk.ok()) {
      *cursor = std::move(copy);
      return chunk;
    }
    if (chunk.status().code() != absl::StatusCode::kNotFound) return chunk;
  }
  return absl::UnavailableError(absl::StrCat("the logs of ", query.job_id, " kept changing under the read: ",
                                             chunk.status().message()));
}

absl::StatusOr<v1::LogChunk> LogStore::ReadOnce(const LogQuery& query, LogCursor* cursor, size_t max_lines,
                                                size_t max_bytes) const {
  std::vector<FileView> files;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files = MatchingLocked(query);
  }
  struct Batch {
    std::pair<int64_t, int32_t> file;
    std::vector<std::pair<v1::LogLine, LogCursor::Position>> lines;  // line, position past it
    bool exhausted = false;                                          // read to the log's end
    size_t next = 0;
  };
  std::vector<Batch> batches;
  // Enough for one line of the longest kind, escaped, whatever max_bytes says.
  const int64_t budget = static_cast<int64_t>(max_bytes + 2 * options_.max_line_bytes + 64);
  for (const FileView& view : files) {
    Batch batch;
    batch.file = {std::get<1>(view.key), std::get<2>(view.key)};
    auto known = cursor->positions.find(batch.file);
    LogCursor::Position at = known != cursor->positions.end() ? known->second : LogCursor::Position{};
    if (at.offset >= view.size) continue;
    // The first segment with bytes past the cursor; what lies before it
    // (and past the cursor) was dropped.
    const Segment* segment = nullptr;
    for (const Segment& s : view.segments) {
      if (s.size > 0 && s.offset + s.size > at.offset) {
        segment = &s;
        break;
      }
    }
    const LogCursor::Position resume =
        segment != nullptr ? LogCursor::Position{segment->offset, segment->first_line} : LogCursor::Position{view.size, view.lines};
    if (at.offset < resume.offset) {
      batch.lines.emplace_back(QuotaMarker(view.key, resume.line - at.line, resume.offset - at.offset,
                                           segment != nullptr && segment->first_time != absl::InfiniteFuture()
                                               ? segment->first_time
                                               : view.last_time),
                               resume);
      at = resume;
    }
    if (segment != nullptr) {
      const int64_t from = at.offset - segment->offset;
      const int64_t length = std::min(budget, segment->size - from);
      ASSIGN_OR_RETURN(std::string data, log_files::ReadRange(segment->path, from, length));
      size_t pos = 0;
      for (size_t nl; batch.lines.size() < max_lines && (nl = data.find('\n', pos)) != std::string::npos;
           pos = nl + 1) {
        v1::LogLine line;
        if (!log_files::ParseRecord(absl::string_view(data).substr(pos, nl - pos), &line)) {
          line.set_text(data.substr(pos, nl - pos));
        }
        line.set_job_id(std::get<0>(view.key));
        line.set_generation(std::get<1>(view.key));
        line.set_rank(std::get<2>(view.key));
        at.offset += static_cast<int64_t>(nl - pos + 1);
        at.line += 1;
        batch.lines.emplace_back(std::move(line), at);
      }
    }
    if (batch.lines.empty()) continue;
    batch.exhausted = batch.lines.back().second.offset == view.size;
    batches.push_back(std::move(batch));
  }
  // Merge by time, but never past the last line read of a log that has
  // more: what that log holds next may be earlier than other logs' lines.
  const google::protobuf::Timestamp* horizon = nullptr;
  for (const Batch& b : batches) {
    if (!b.exhausted && (horizon == nullptr || Earlier(b.lines.back().first.time(), *horizon))) {
      horizon = &b.lines.back().first.time();
    }
  }
  v1::LogChunk chunk;
  size_t bytes = 0;
  while (static_cast<size_t>(chunk.lines_size()) < max_lines && (bytes < max_bytes || chunk.lines_size() == 0)) {
    Batch* best = nullptr;
    for (Batch& b : batches) {
      if (b.next == b.lines.size()) continue;
      if (best == nullptr || Earlier(b.lines[b.next].first.time(), best->lines[best->next].first.time())) best = &b;
    }
    if (best == nullptr) break;
    auto& [line, end] = best->lines[best->next++];
    if (horizon != nullptr && Earlier(*horizon, line.time())) break;
    bytes += line.text().size();
    cursor->positions[best->file] = end;
    *chunk.add_lines() = std::move(line);
  }
  return chunk;
}

}  // namespace ringmaster::coordinator
