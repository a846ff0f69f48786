#ifndef RINGMASTER_COORDINATOR_LOG_STORE_H_
#define RINGMASTER_COORDINATOR_LOG_STORE_H_

// LogStore: the log lines of every rank, as workers push them, for
// JobService.StreamLogs (`ringmaster logs`).
//
// Owns the log files of every (job, generation, rank) under the root
// directory, one line per LogLine:
//
//   2026-11-21T10:00:00.123456Z out 17 the text
//
// (time of the worker's read, stream out|err|-, the line's sequence, text;
// a newline inside the text is written as "\n"). Files survive coordinator
// restarts: Open() scans them to rebuild the index.
//
// Disk (docs/deploy.md, "The coordinator's disk"):
//   - Quota: a job's files hold at most `quota_per_job` bytes. A rank's log
//     is cut into segments, <root>/<job>/gen-<g>/rank-<r>.log for the first
//     and rank-<r>.<L>.<B>.log for one that starts after L lines and B bytes
//     of that rank's log (the names keep the count of what was dropped
//     across restarts). Beyond the quota the job's oldest segment (by the
//     time of its first line, across its ranks and generations) is deleted,
//     until the new lines fit; a batch larger than the whole quota keeps its
//     newest lines. A reader gets one marker line where a rank's lines were
//     dropped: "... N lines (M bytes) dropped: the job's log quota of 64 KiB
//     is full ..." (LogLine.dropped_lines/dropped_bytes set).
//   - Reserve: while `reserve` says the disk is low, Append stores nothing
//     and answers RESOURCE_EXHAUSTED; the refused lines are counted per rank
//     and a marker line saying so is stored before that rank's next lines
//     ("<time> dropped <lines>/<bytes> <text>" on disk).
//
// In memory, per rank: its segments, its line count and size (dropped lines
// included: positions never move when old lines go), the last sequence per
// stream (lines at or below it are duplicates of a retried push and are
// dropped), and the position of every `index_every_lines`-th line still kept
// (to find the last N lines without reading the file). Reads return at most
// max_lines / max_bytes at a time: memory stays bounded whatever the size
// of the logs.
//
// Follow: Subscribe(job, callback) is called after every Append that added
// lines of that job.
//
// Thread-safe. Appends are serialized; Reads run concurrently with them
// (a read sees the lines whose Append has returned; a segment deleted under
// a read is read past, with its marker).

#include <cstdint>
#include <deque>
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
#include "absl/time/time.h"
#include "coordinator/store/disk_space.h"
#include "proto/logs.pb.h"

namespace ringmaster::coordinator {

// What happens to the logs' disk use, for metrics. Called with the
// LogStore's lock held: implementations must be quick and must not call the
// LogStore.
class LogStoreListener {
 public:
  virtual ~LogStoreListener() = default;
  // The job's files now hold `bytes` (after Open, an append or a drop).
  virtual void OnJobLogBytes(const std::string& job_id, int64_t bytes) = 0;
  // `lines` of the job were dropped: reason "quota" (its oldest lines, to
  // make room) or "disk_low" (new lines refused under the disk reserve).
  virtual void OnLinesDropped(const std::string& job_id, const std::string& reason, int64_t lines) = 0;
  // DeleteJob removed the job's logs.
  virtual void OnJobDeleted(const std::string& job_id) = 0;
};

struct LogStoreOptions {
  std::string root;  // directory holding the job directories (created)
  int64_t index_every_lines = 1024;
  size_t max_line_bytes = 64 << 10;  // longer texts are cut
  // Bytes a job's files hold at most (every generation and rank); 0: no quota.
  int64_t quota_per_job = 0;
  // Segment size, the unit the quota drops; 0: quota_per_job / 16, at least
  // 4 KiB. Without a quota a rank's log is one file.
  int64_t segment_bytes = 0;
  // Not owned; null: no reserve. Under it Append refuses new lines.
  const DiskReserve* reserve = nullptr;
  // Not owned; null: none.
  LogStoreListener* listener = nullptr;
};

struct AppendResult {
  int64_t appended = 0;
  int64_t duplicates = 0;  // sequence already stored: dropped
  int64_t invalid = 0;     // no job id, a job id that is not a plain name, rank < 0, generation < 1
  int64_t dropped = 0;     // lines dropped for the quota (older ones of the jobs, or of this chunk)
};

// What a reader wants: one job, one rank or all, one generation or a range.
struct LogQuery {
  std::string job_id;
  std::optional<int32_t> rank;  // nullopt: every rank
  int64_t min_generation = 1;   // generations in [min, max]
  int64_t max_generation = INT64_MAX;
};

// Where a reader is: per (generation, rank) log, the byte offset and line
// number read up to. Logs the cursor does not name are read from their start.
struct LogCursor {
  struct Position {
    int64_t offset = 0;
    int64_t line = 0;
  };
  std::map<std::pair<int64_t, int32_t>, Position> positions;
};

class LogStore {
 public:
  // Creates the root if needed and indexes the files under it (a job over
  // the quota loses its oldest lines now). UNAVAILABLE if the root cannot be
  // created or read.
  static absl::StatusOr<std::unique_ptr<LogStore>> Open(const LogStoreOptions& options);

  // Appends the chunk's lines to their files, in order, dropping duplicates
  // and invalid lines (counted) and, beyond the quota, the oldest lines of
  // the jobs concerned. RESOURCE_EXHAUSTED (nothing stored) while the disk
  // is under its reserve. UNAVAILABLE on an I/O error (lines before it are
  // stored; a retry drops them as duplicates).
  absl::StatusOr<AppendResult> Append(const v1::LogChunk& chunk);

  // A cursor positioned at the last `tail_lines` lines of every log that
  // matches (0: the start of every log). Where fewer lines are kept than
  // asked for, the reader starts at the marker of the dropped ones.
  absl::StatusOr<LogCursor> TailCursor(const LogQuery& query, int64_t tail_lines) const;

  // Up to max_lines lines (and about max_bytes of text) past the cursor,
  // across the matching logs merged by time (a log's lines keep their
  // order; a marker comes where lines were dropped); advances the cursor
  // past what is returned. Empty when there is nothing new.
  absl::StatusOr<v1::LogChunk> Read(const LogQuery& query, LogCursor* cursor, size_t max_lines, size_t max_bytes) const;

  // `on_append` runs after every Append that stored lines of `job_id`, on
  // the appending thread, with no LogStore lock held that Read or Append
  // takes. It must be quick and must not Subscribe/Unsubscribe.
  // Unsubscribe returns once the callback is not running and never will.
  int64_t Subscribe(const std::string& job_id, std::function<void()> on_append);
  void Unsubscribe(int64_t id);

  // Lines of a job's files kept so far (tests, diagnostics).
  int64_t LineCount(const std::string& job_id) const;
  // Bytes of a job's files.
  int64_t JobBytes(const std::string& job_id) const;
  // Removes every log of the job (files and index): retention of finished
  // jobs. Readers already holding a cursor of it read nothing more.
  absl::Status DeleteJob(const std::string& job_id);

 private:
  using FileKey = std::tuple<std::string, int64_t, int32_t>;  // job, generation, rank
  struct Segment {
    int64_t first_line = 0;  // lines of the rank's log before it
    int64_t offset = 0;      // bytes of the rank's log before it
    int64_t lines = 0;
    int64_t size = 0;
    absl::Time first_time = absl::InfiniteFuture();  // its first line's
    std::string path;
  };
  struct FileIndex {
    std::deque<Segment> segments;  // kept, oldest first; an empty one marks where the next begins
    int64_t lines = 0;             // lines ever appended, dropped ones included
    int64_t size = 0;              // bytes ever appended, dropped ones included
    int64_t last_sequence[3] = {0, 0, 0};           // by LogStream
    std::deque<LogCursor::Position> checkpoints;    // every index_every_lines-th line still kept
    absl::Time last_time = absl::InfinitePast();    // its newest line's
    int64_t refused_lines = 0;                      // under the disk reserve, not yet marked
    int64_t refused_bytes = 0;
  };
  // A reader's copy of a FileIndex.
  struct FileView {
    FileKey key;
    std::vector<Segment> segments;
    int64_t lines = 0;
    int64_t size = 0;
    absl::Time last_time;
    std::vector<LogCursor::Position> checkpoints;
  };
  struct Pending;  // an Append's lines for one file

  explicit LogStore(LogStoreOptions options);
  absl::Status Scan();
  absl::Status IndexFile(const FileKey& key, std::vector<std::tuple<int64_t, int64_t, std::string>> segment_files);
  std::string SegmentPath(const FileKey& key, int64_t first_line, int64_t offset) const;
  // The files matching `query`, as they are now.
  std::vector<FileView> MatchingLocked(const LogQuery& query) const;
  absl::StatusOr<LogCursor> TailCursorOnce(const LogQuery& query, int64_t tail_lines) const;
  absl::StatusOr<v1::LogChunk> ReadOnce(const LogQuery& query, LogCursor* cursor, size_t max_lines,
                                        size_t max_bytes) const;
  v1::LogLine QuotaMarker(const FileKey& key, int64_t lines, int64_t bytes, absl::Time time) const;
  absl::Status WriteLocked(const FileKey& key, FileIndex& index, Pending& pending, AppendResult* result);
  // Drops the job's oldest segment; false if it has none with lines.
  bool DropOldestLocked(const std::string& job_id, AppendResult* result);
  // Drops the job's oldest lines until `incoming` more bytes fit its quota.
  void MakeRoomLocked(const std::string& job_id, int64_t incoming, AppendResult* result);
  // The segment the next lines of `index` go to.
  Segment& ActiveSegmentLocked(const FileKey& key, FileIndex& index);
  void Notify(const std::string& job_id);

  const LogStoreOptions options_;
  const int64_t segment_bytes_;

  mutable std::mutex mu_;  // the index; held while appending
  std::map<FileKey, FileIndex> files_;
  std::map<std::string, int64_t> job_bytes_;

  std::mutex subscribers_mu_;  // held while callbacks run
  int64_t next_subscriber_ = 1;
  std::map<int64_t, std::pair<std::string, std::function<void()>>> subscribers_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_LOG_STORE_H_
