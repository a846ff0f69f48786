#include "coordinator/store/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/store/log_store_files.h"

namespace ringmaster::coordinator {

using log_files::PlainName;

namespace {

constexpr size_t kIoBlock = 64 << 10;
constexpr int64_t kMinSegmentBytes = 4 << 10;

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

int64_t SegmentBytes(const LogStoreOptions& options) {
  if (options.segment_bytes > 0) return options.segment_bytes;
  return std::max(options.quota_per_job / 16, kMinSegmentBytes);
}

}  // namespace

// One Append's lines for one file, formatted, in order.
struct LogStore::Pending {
  struct Record {
    std::string bytes;
    absl::Time time;
    bool marker = false;
  };
  std::vector<Record> records;
  int64_t last_sequence[3];
  int64_t bytes() const {
    int64_t n = 0;
    for (const Record& r : records) n += static_cast<int64_t>(r.bytes.size());
    return n;
  }
};

LogStore::LogStore(LogStoreOptions options) : options_(std::move(options)), segment_bytes_(SegmentBytes(options_)) {}

absl::StatusOr<std::unique_ptr<LogStore>> LogStore::Open(const LogStoreOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.root, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", options.root, ": ", ec.message()));
  std::unique_ptr<LogStore> store(new LogStore(options));
  RETURN_IF_ERROR(store->Scan());
  std::lock_guard<std::mutex> lock(store->mu_);
  for (auto& [job, bytes] : store->job_bytes_) {
    AppendResult ignored;
    store->MakeRoomLocked(job, 0, &ignored);  // a quota lowered since the last run
    if (options.listener != nullptr) options.listener->OnJobLogBytes(job, bytes);
  }
  return store;
}

absl::Status LogStore::DeleteJob(const std::string& job_id) {
  if (job_id.empty() || job_id.find('/') != std::string::npos || job_id == "." || job_id == "..") {
    return absl::InvalidArgumentError(absl::StrCat("log store: bad job id \"", job_id, "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  bool known = job_bytes_.erase(job_id) > 0;
  for (auto it = files_.lower_bound(FileKey{job_id, INT64_MIN, INT32_MIN}); it != files_.end() && std::get<0>(it->first) == job_id;) {
    it = files_.erase(it);
    known = true;
  }
  std::error_code ec;
  std::filesystem::remove_all(absl::StrCat(options_.root, "/", job_id), ec);
  if (known && options_.listener != nullptr) options_.listener->OnJobDeleted(job_id);
  if (ec) return absl::InternalError(absl::StrCat("log store: removing the logs of ", job_id, ": ", ec.message()));
  return absl::OkStatus();
}

std::string LogStore::SegmentPath(const FileKey& key, int64_t first_line, int64_t offset) const {
  return absl::StrCat(options_.root, "/", std::get<0>(key), "/gen-", std::get<1>(key), "/",
                      log_files::SegmentName(std::get<2>(key), first_line, offset));
}

absl::Status LogStore::Scan() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator job(options_.root, ec), end; !ec && job != end; job.increment(ec)) {
    const std::string job_id = job->path().filename().string();
    if (!PlainName(job_id) || !job->is_directory(ec)) continue;
    for (fs::directory_iterator gen(job->path(), ec); !ec && gen != end; gen.increment(ec)) {
      int64_t g = 0;
      const std::string gen_name = gen->path().filename().string();
      if (gen_name.rfind("gen-", 0) != 0 || !absl::SimpleAtoi(gen_name.substr(4), &g)) continue;
      std::map<int32_t, std::vector<std::tuple<int64_t, int64_t, std::string>>> ranks;
      for (fs::directory_iterator file(gen->path(), ec); !ec && file != end; file.increment(ec)) {
        std::optional<log_files::SegmentId> id = log_files::ParseSegmentName(file->path().filename().string());
        if (id.has_value()) ranks[id->rank].emplace_back(id->first_line, id->offset, file->path().string());
      }
      for (auto& [rank, segments] : ranks) RETURN_IF_ERROR(IndexFile({job_id, g, rank}, std::move(segments)));
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot read ", options_.root, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status LogStore::IndexFile(const FileKey& key,
                                 std::vector<std::tuple<int64_t, int64_t, std::string>> segment_files) {
  std::sort(segment_files.begin(), segment_files.end());
  FileIndex index;
  for (const auto& [first_line, first_offset, path] : segment_files) {
    if (first_line < index.lines || first_offset < index.size) continue;  // overlaps the one before: not ours
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return IoError("cannot stat", path);
    if (index.last_time == absl::InfinitePast()) index.last_time = absl::FromTimeT(st.st_mtime);
    Segment segment{first_line, first_offset, 0, 0, absl::InfiniteFuture(), path};
    index.lines = first_line;
    index.size = first_offset;
    int64_t offset = 0;
    std::string carry;
    while (offset < st.st_size) {
      ASSIGN_OR_RETURN(std::string block,
                       log_files::ReadRange(path, offset, std::min<int64_t>(kIoBlock, st.st_size - offset)));
      if (block.empty()) break;
      offset += static_cast<int64_t>(block.size());
      carry += block;
      size_t pos = 0;
      for (size_t nl; (nl = carry.find('\n', pos)) != std::string::npos; pos = nl + 1) {
        if (index.lines % options_.index_every_lines == 0) index.checkpoints.push_back({index.size, index.lines});
        v1::LogLine line;
        if (log_files::ParseRecord(absl::string_view(carry).substr(pos, nl - pos), &line)) {
          int64_t& last = index.last_sequence[log_files::StreamIndex(line.stream())];
          last = std::max(last, line.sequence());
          const absl::Time t = FromProtoTime(line.time());
          if (segment.lines == 0) segment.first_time = t;
          index.last_time = std::max(index.last_time, t);
        }
        const auto n = static_cast<int64_t>(nl - pos + 1);
        segment.size += n;
        segment.lines += 1;
        index.size += n;
        index.lines += 1;
      }
      carry.erase(0, pos);
    }
    if (segment.size != st.st_size && ::truncate(path.c_str(), segment.size) != 0) {
      return IoError("cannot cut the unfinished last line of", path);  // a crash mid-append left it
    }
    if (!index.segments.empty() && index.segments.back().size == 0) {
      ::unlink(index.segments.back().path.c_str());  // an empty one that a later one replaced
      index.segments.pop_back();
    }
    index.segments.push_back(std::move(segment));
  }
  if (index.segments.empty()) return absl::OkStatus();
  for (const Segment& s : index.segments) job_bytes_[std::get<0>(key)] += s.size;
  files_[key] = std::move(index);
  return absl::OkStatus();
}

LogStore::Segment& LogStore::ActiveSegmentLocked(const FileKey& key, FileIndex& index) {
  if (!index.segments.empty()) {
    Segment& last = index.segments.back();
    const bool at_end = last.offset + last.size == index.size;
    const bool full = options_.quota_per_job > 0 && last.size >= segment_bytes_;
    if (at_end && !full) return last;
    if (last.size == 0) {
      ::unlink(last.path.c_str());
      index.segments.pop_back();
    }
  }
  index.segments.push_back(
      Segment{index.lines, index.size, 0, 0, absl::InfiniteFuture(), SegmentPath(key, index.lines, index.size)});
  return index.segments.back();
}

bool LogStore::DropOldestLocked(const std::string& job_id, AppendResult* result) {
  std::map<FileKey, FileIndex>::iterator oldest = files_.end();
  for (auto it = files_.lower_bound(FileKey{job_id, INT64_MIN, INT32_MIN});
       it != files_.end() && std::get<0>(it->first) == job_id; ++it) {
    if (it->second.segments.empty() || it->second.segments.front().size == 0) continue;
    if (oldest == files_.end() ||
        it->second.segments.front().first_time < oldest->second.segments.front().first_time) {
      oldest = it;
    }
  }
  if (oldest == files_.end()) return false;
  FileIndex& index = oldest->second;
  const Segment gone = index.segments.front();
  index.segments.pop_front();
  ::unlink(gone.path.c_str());
  job_bytes_[job_id] -= gone.size;
  result->dropped += gone.lines;
  if (options_.listener != nullptr) options_.listener->OnLinesDropped(job_id, "quota", gone.lines);
  if (index.segments.empty()) {
    // An empty segment where the next lines go keeps the count of the
    // dropped ones across a restart.
    Segment next{index.lines, index.size, 0, 0, absl::InfiniteFuture(),
                 SegmentPath(oldest->first, index.lines, index.size)};
    const int fd = ::open(next.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    index.segments.push_back(std::move(next));
  }
  const int64_t kept = index.segments.front().first_line;
  while (!index.checkpoints.empty() && index.checkpoints.front().line < kept) index.checkpoints.pop_front();
  return true;
}

void LogStore::MakeRoomLocked(const std::string& job_id, int64_t incoming, AppendResult* result) {
  if (options_.quota_per_job <= 0) return;
  while (job_bytes_[job_id] + incoming > options_.quota_per_job && DropOldestLocked(job_id, result)) {
  }
}

absl::Status LogStore::WriteLocked(const FileKey& key, FileIndex& index, Pending& pending, AppendResult* result) {
  const std::string& job_id = std::get<0>(key);
  const int64_t quota = options_.quota_per_job;
  if (quota > 0 && pending.bytes() > quota) {
    // More than the whole quota at once: everything older goes, and so do
    // this batch's oldest lines.
    MakeRoomLocked(job_id, quota, result);
    int64_t bytes = pending.bytes();
    size_t cut = 0;
    int64_t cut_lines = 0;
    while (cut < pending.records.size() && bytes > quota) {
      bytes -= static_cast<int64_t>(pending.records[cut].bytes.size());
      index.size += static_cast<int64_t>(pending.records[cut].bytes.size());
      index.lines += 1;
      cut_lines += 1;
      ++cut;
    }
    pending.records.erase(pending.records.begin(), pending.records.begin() + static_cast<ptrdiff_t>(cut));
    result->dropped += cut_lines;
    if (options_.listener != nullptr) options_.listener->OnLinesDropped(job_id, "quota", cut_lines);
  }
  MakeRoomLocked(job_id, pending.bytes(), result);
  if (pending.records.empty()) {
    std::copy(std::begin(pending.last_sequence), std::end(pending.last_sequence), std::begin(index.last_sequence));
    return absl::OkStatus();
  }
  Segment& segment = ActiveSegmentLocked(key, index);
  std::string bytes;
  for (const auto& r : pending.records) bytes += r.bytes;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(segment.path).parent_path(), ec);
  int fd = ::open(segment.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open", segment.path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done < bytes.size()) {
    absl::Status status = IoError("cannot write", segment.path);
    if (::ftruncate(fd, segment.size) != 0) status = IoError("cannot write (and cannot undo)", segment.path);
    ::close(fd);
    return status;
  }
  ::close(fd);
  std::copy(std::begin(pending.last_sequence), std::end(pending.last_sequence), std::begin(index.last_sequence));
  for (const auto& r : pending.records) {
    const auto n = static_cast<int64_t>(r.bytes.size());
    if (index.lines % options_.index_every_lines == 0) index.checkpoints.push_back({index.size, index.lines});
    if (segment.lines == 0) segment.first_time = r.time;
    index.last_time = std::max(index.last_time, r.time);
    segment.size += n;
    segment.lines += 1;
    index.size += n;
    index.lines += 1;
    if (r.marker) {
      index.refused_lines = 0;
      index.refused_bytes = 0;
    } else {
      ++result->appended;
    }
  }
  job_bytes_[job_id] += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<AppendResult> LogStore::Append(const v1::LogChunk& chunk) {
  AppendResult result;
  std::vector<std::string> touched_jobs;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // One write per file; sequences advance only once the write succeeded.
    std::map<FileKey, Pending> pending;
    for (const v1::LogLine& line : chunk.lines()) {
      if (!PlainName(line.job_id()) || line.rank() < 0 || line.generation() < 1) {
        ++result.invalid;
        continue;
      }
      const FileKey key{line.job_id(), line.generation(), line.rank()};
      auto it = pending.find(key);
      if (it == pending.end()) {
        auto file = files_.find(key);
        it = pending.emplace(key, Pending{}).first;
        if (file != files_.end()) {
          std::copy(std::begin(file->second.last_sequence), std::end(file->second.last_sequence),
                    std::begin(it->second.last_sequence));
        } else {
          std::fill(std::begin(it->second.last_sequence), std::end(it->second.last_sequence), 0);
        }
      }
      int64_t& last = it->second.last_sequence[log_files::StreamIndex(line.stream())];
      if (line.sequence() > 0 && line.sequence() <= last) {
        ++result.duplicates;
        continue;
      }
      if (line.sequence() > 0) last = line.sequence();
      // The time as the file keeps it (microseconds), so that a marker
      // placed at a segment's first line sorts with it, not after it.
      const absl::Time stored = absl::FromUnixMicros(absl::ToUnixMicros(FromProtoTime(line.time())));
      it->second.records.push_back({log_files::FormatRecord(line, options_.max_line_bytes), stored});
    }
    absl::Status room = options_.reserve != nullptr && !pending.empty() ? options_.reserve->CheckRoomForLogs()
                                                                        : absl::OkStatus();
    if (!room.ok()) {
      // Nothing stored; each rank's count becomes a marker before its next lines.
      std::map<std::string, int64_t> refused;
      for (auto& [key, file] : pending) {
        if (file.records.empty()) continue;
        FileIndex& index = files_[key];
        index.refused_lines += static_cast<int64_t>(file.records.size());
        index.refused_bytes += file.bytes();
        refused[std::get<0>(key)] += static_cast<int64_t>(file.records.size());
      }
      if (options_.listener != nullptr) {
        for (const auto& [job, lines] : refused) options_.listener->OnLinesDropped(job, "disk_low", lines);
      }
      return room;
    }
    for (auto& [key, file] : pending) {
      if (file.records.empty()) continue;
      FileIndex& index = files_[key];
      if (index.refused_lines > 0) {
        const absl::Time t = file.records.front().time;
        file.records.insert(
            file.records.begin(),
            {log_files::FormatMarkerRecord(
                 t, index.refused_lines, index.refused_bytes,
                 absl::StrCat("... ", index.refused_lines, " lines (", index.refused_bytes,
                              " bytes) dropped: the coordinator's disk was under its reserve (--disk-reserve) ...")),
             t, /*marker=*/true});
      }
      status = WriteLocked(key, index, file, &result);
      if (!status.ok()) break;
      if (touched_jobs.empty() || touched_jobs.back() != std::get<0>(key)) touched_jobs.push_back(std::get<0>(key));
    }
    if (options_.listener != nullptr) {
      std::string last;
      for (auto& [key, file] : pending) {  // in job order
        const std::string& job = std::get<0>(key);
        if (job == last) continue;
        last = job;
        options_.listener->OnJobLogBytes(job, job_bytes_[job]);
      }
    }
  }
  std::sort(touched_jobs.begin(), touched_jobs.end());
  touched_jobs.erase(std::unique(touched_jobs.begin(), touched_jobs.end()), touched_jobs.end());
  for (const std::string& job : touched_jobs) Notify(job);
  if (!status.ok()) return status;
  return result;
}

int64_t LogStore::Subscribe(const std::string& job_id, std::function<void()> on_append) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  const int64_t id = next_subscriber_++;
  subscribers_[id] = {job_id, std::move(on_append)};
  return id;
}

void LogStore::Unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  subscribers_.erase(id);
}

void LogStore::Notify(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  for (auto& [id, subscriber] : subscribers_) {
    if (subscriber.first == job_id) subscriber.second();
  }
}

int64_t LogStore::LineCount(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (auto it = files_.lower_bound({job_id, INT64_MIN, INT32_MIN});
       it != files_.end() && std::get<0>(it->first) == job_id; ++it) {
    for (const Segment& s : it->second.segments) n += s.lines;
  }
  return n;
}

int64_t LogStore::JobBytes(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = job_bytes_.find(job_id);
  return it == job_bytes_.end() ? 0 : it->second;
}

}  // namespace ringmaster::coordinator
