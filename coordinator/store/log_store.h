#ifndef RINGMASTER_COORDINATOR_LOG_STORE_H_
#define RINGMASTER_COORDINATOR_LOG_STORE_H_

// LogStore: the log lines of every rank, as workers push them, for
// JobService.StreamLogs (`ringmaster logs`).
//
// Owns one append-only file per (job, generation, rank) under the root
// directory: <root>/<job>/gen-<g>/rank-<r>.log, one line per LogLine:
//
//   2026-11-21T10:00:00.123456Z out 17 the text
//
// (time of the worker's read, stream out|err|-, the line's sequence, text;
// a newline inside the text is written as "\n"). Files survive coordinator
// restarts: Open() scans them to rebuild the index.
//
// In memory, per file only: its size, line count, the last sequence per
// stream (lines at or below it are duplicates of a retried push and are
// dropped) and the byte offset of every `index_every_lines`-th line (to find
// the last N lines without reading the file). Reads return at most
// max_lines / max_bytes at a time: memory stays bounded whatever the size
// of the logs.
//
// Follow: Subscribe(job, callback) is called after every Append that added
// lines of that job.
//
// Thread-safe. Appends are serialized; Reads run concurrently with them
// (a read sees the lines whose Append has returned).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/logs.pb.h"

namespace ringmaster::coordinator {

struct LogStoreOptions {
  std::string root;  // directory holding the job directories (created)
  int64_t index_every_lines = 1024;
  size_t max_line_bytes = 64 << 10;  // longer texts are cut
};

struct AppendResult {
  int64_t appended = 0;
  int64_t duplicates = 0;  // sequence already stored: dropped
  int64_t invalid = 0;     // no job id, a job id that is not a plain name, rank < 0, generation < 1
};

// What a reader wants: one job, one rank or all, one generation or a range.
struct LogQuery {
  std::string job_id;
  std::optional<int32_t> rank;  // nullopt: every rank
  int64_t min_generation = 1;   // generations in [min, max]
  int64_t max_generation = INT64_MAX;
};

// Where a reader is: per (generation, rank) file, the byte offset read up to.
// Files the cursor does not name are read from their start.
struct LogCursor {
  std::map<std::pair<int64_t, int32_t>, int64_t> offsets;
};

class LogStore {
 public:
  // Creates the root if needed and indexes the files under it.
  // UNAVAILABLE if the root cannot be created or read.
  static absl::StatusOr<std::unique_ptr<LogStore>> Open(const LogStoreOptions& options);

  // Appends the chunk's lines to their files, in order, dropping duplicates
  // and invalid lines (counted). UNAVAILABLE on an I/O error (lines before
  // it are stored; a retry drops them as duplicates).
  absl::StatusOr<AppendResult> Append(const v1::LogChunk& chunk);

  // A cursor positioned at the last `tail_lines` lines of every file that
  // matches (0: the start of every file).
  absl::StatusOr<LogCursor> TailCursor(const LogQuery& query, int64_t tail_lines) const;

  // Up to max_lines lines (and about max_bytes of text) past the cursor,
  // across the matching files merged by time (a file's lines keep their
  // order); advances the cursor past what is returned. Empty when there is
  // nothing new.
  absl::StatusOr<v1::LogChunk> Read(const LogQuery& query, LogCursor* cursor, size_t max_lines, size_t max_bytes) const;

  // `on_append` runs after every Append that stored lines of `job_id`, on
  // the appending thread, with no LogStore lock held that Read or Append
  // takes. It must be quick and must not Subscribe/Unsubscribe.
  // Unsubscribe returns once the callback is not running and never will.
  int64_t Subscribe(const std::string& job_id, std::function<void()> on_append);
  void Unsubscribe(int64_t id);

  // Lines stored so far in a job's files (tests, diagnostics).
  int64_t LineCount(const std::string& job_id) const;
  // Removes every log of the job (files and index): retention of finished
  // jobs. Readers already holding a cursor of it read nothing more.
  absl::Status DeleteJob(const std::string& job_id);

 private:
  struct FileIndex {
    std::string path;
    int64_t size = 0;
    int64_t lines = 0;
    int64_t last_sequence[3] = {0, 0, 0};  // by LogStream
    std::vector<int64_t> checkpoints;      // offset of line k * index_every_lines
  };
  using FileKey = std::tuple<std::string, int64_t, int32_t>;  // job, generation, rank

  explicit LogStore(LogStoreOptions options) : options_(std::move(options)) {}
  absl::Status Scan();
  absl::Status IndexFile(const FileKey& key, const std::string& path);
  std::string PathOf(const FileKey& key) const;
  // The files matching `query`, with their sizes now.
  std::vector<std::pair<FileKey, FileIndex>> MatchingLocked(const LogQuery& query) const;
  void Notify(const std::string& job_id);

  const LogStoreOptions options_;

  mutable std::mutex mu_;  // the index; held while appending
  std::map<FileKey, FileIndex> files_;

  std::mutex subscribers_mu_;  // held while callbacks run
  int64_t next_subscriber_ = 1;
  std::map<int64_t, std::pair<std::string, std::function<void()>>> subscribers_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_LOG_STORE_H_
