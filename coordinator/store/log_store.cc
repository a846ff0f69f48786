#include "coordinator/store/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/proto_time.h"

namespace ringmaster::coordinator {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%dT%H:%M:%E6SZ";
constexpr size_t kIoBlock = 64 << 10;

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

int StreamIndex(v1::LogStream s) { return s == v1::LOG_STREAM_STDOUT ? 1 : s == v1::LOG_STREAM_STDERR ? 2 : 0; }

const char* StreamName(int index) { return index == 1 ? "out" : index == 2 ? "err" : "-"; }

v1::LogStream StreamFromName(absl::string_view name) {
  if (name == "out") return v1::LOG_STREAM_STDOUT;
  if (name == "err") return v1::LOG_STREAM_STDERR;
  return v1::LOG_STREAM_UNSPECIFIED;
}

std::string Escape(absl::string_view text, size_t max_bytes) {
  text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
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

std::string Unescape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[i + 1] == 'n' ? '\n' : text[i + 1];
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// "<time> <stream> <sequence> <text>" -> LogLine (job, generation, rank not set).
bool ParseLine(absl::string_view line, v1::LogLine* out) {
  size_t a = line.find(' ');
  size_t b = a == absl::string_view::npos ? a : line.find(' ', a + 1);
  size_t c = b == absl::string_view::npos ? b : line.find(' ', b + 1);
  if (c == absl::string_view::npos) return false;
  absl::Time t;
  std::string error;
  int64_t seq = 0;
  if (!absl::ParseTime(kTimeFormat, std::string(line.substr(0, a)), &t, &error)) return false;
  if (!absl::SimpleAtoi(line.substr(b + 1, c - b - 1), &seq)) return false;
  *out->mutable_time() = ToProtoTime(t);
  out->set_stream(StreamFromName(line.substr(a + 1, b - a - 1)));
  out->set_sequence(seq);
  out->set_text(Unescape(line.substr(c + 1)));
  return true;
}

// Reads [offset, offset + length) of a file (less at its end).
absl::StatusOr<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open", path);
  std::string buf(static_cast<size_t>(std::max<int64_t>(length, 0)), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, offset + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = IoError("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);
  return buf;
}

// The offset just past the `skip`-th newline at or after `offset`.
absl::StatusOr<int64_t> SkipLines(const std::string& path, int64_t offset, int64_t skip, int64_t size) {
  while (skip > 0 && offset < size) {
    ASSIGN_OR_RETURN(std::string block, ReadRange(path, offset, std::min<int64_t>(kIoBlock, size - offset)));
    if (block.empty()) break;
    size_t pos = 0;
    while (skip > 0) {
      size_t nl = block.find('\n', pos);
      if (nl == std::string::npos) break;
      --skip;
      pos = nl + 1;
    }
    offset += skip > 0 ? static_cast<int64_t>(block.size()) : static_cast<int64_t>(pos);
  }
  return offset;
}

bool Earlier(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
  return a.seconds() != b.seconds() ? a.seconds() < b.seconds() : a.nanos() < b.nanos();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LogStore>> LogStore::Open(const LogStoreOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.root, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", options.root, ": ", ec.message()));
  std::unique_ptr<LogStore> store(new LogStore(options));
  RETURN_IF_ERROR(store->Scan());
  return store;
}

absl::Status LogStore::DeleteJob(const std::string& job_id) {
  if (job_id.empty() || job_id.find('/') != std::string::npos || job_id == "." || job_id == "..") {
    return absl::InvalidArgumentError(absl::StrCat("log store: bad job id \"", job_id, "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = files_.lower_bound(FileKey{job_id, INT64_MIN, INT32_MIN}); it != files_.end() && std::get<0>(it->first) == job_id;) {
    it = files_.erase(it);
  }
  std::error_code ec;
  std::filesystem::remove_all(absl::StrCat(options_.root, "/", job_id), ec);
  if (ec) return absl::InternalError(absl::StrCat("log store: removing the logs of ", job_id, ": ", ec.message()));
  return absl::OkStatus();
}

std::string LogStore::PathOf(const FileKey& key) const {
  return absl::StrCat(options_.root, "/", std::get<0>(key), "/gen-", std::get<1>(key), "/rank-", std::get<2>(key),
                      ".log");
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
      for (fs::directory_iterator file(gen->path(), ec); !ec && file != end; file.increment(ec)) {
        int32_t r = 0;
        std::string name = file->path().filename().string();
        if (name.rfind("rank-", 0) != 0 || name.size() < 10 || name.substr(name.size() - 4) != ".log") continue;
        if (!absl::SimpleAtoi(name.substr(5, name.size() - 9), &r)) continue;
        RETURN_IF_ERROR(IndexFile({job_id, g, r}, file->path().string()));
      }
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot read ", options_.root, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status LogStore::IndexFile(const FileKey& key, const std::string& path) {
  FileIndex index;
  index.path = path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return IoError("cannot stat", path);
  int64_t offset = 0;
  std::string carry;
  while (offset < st.st_size) {
    ASSIGN_OR_RETURN(std::string block, ReadRange(path, offset, std::min<int64_t>(kIoBlock, st.st_size - offset)));
    if (block.empty()) break;
    offset += static_cast<int64_t>(block.size());
    carry += block;
    size_t pos = 0;
    for (size_t nl; (nl = carry.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      if (index.lines % options_.index_every_lines == 0) index.checkpoints.push_back(index.size);
      v1::LogLine line;
      if (ParseLine(absl::string_view(carry).substr(pos, nl - pos), &line)) {
        int64_t& last = index.last_sequence[StreamIndex(line.stream())];
        last = std::max(last, line.sequence());
      }
      index.size += static_cast<int64_t>(nl - pos + 1);
      ++index.lines;
    }
    carry.erase(0, pos);
  }
  if (index.size != st.st_size && ::truncate(path.c_str(), index.size) != 0) {
    return IoError("cannot cut the unfinished last line of", path);  // a crash mid-append left it
  }
  files_[key] = std::move(index);
  return absl::OkStatus();
}

absl::StatusOr<AppendResult> LogStore::Append(const v1::LogChunk& chunk) {
  AppendResult result;
  std::vector<std::string> touched_jobs;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // One write per file; sequences advance only once the write succeeded.
    struct Pending {
      std::string bytes;
      std::vector<int64_t> sizes;
      int64_t last_sequence[3];
    };
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
        if (file == files_.end()) file = files_.emplace(key, FileIndex{PathOf(key)}).first;
        it = pending.emplace(key, Pending{}).first;
        std::copy(std::begin(file->second.last_sequence), std::end(file->second.last_sequence),
                  std::begin(it->second.last_sequence));
      }
      int64_t& last = it->second.last_sequence[StreamIndex(line.stream())];
      if (line.sequence() > 0 && line.sequence() <= last) {
        ++result.duplicates;
        continue;
      }
      if (line.sequence() > 0) last = line.sequence();
      std::string record = absl::StrCat(absl::FormatTime(kTimeFormat, FromProtoTime(line.time()), absl::UTCTimeZone()),
                                        " ", StreamName(StreamIndex(line.stream())), " ", line.sequence(), " ",
                                        Escape(line.text(), options_.max_line_bytes), "\n");
      it->second.sizes.push_back(static_cast<int64_t>(record.size()));
      it->second.bytes += record;
    }
    for (auto& [key, file] : pending) {
      if (file.bytes.empty()) continue;
      const std::string& bytes = file.bytes;
      FileIndex& index = files_.at(key);
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(index.path).parent_path(), ec);
      int fd = ::open(index.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) {
        status = IoError("cannot open", index.path);
        break;
      }
      size_t done = 0;
      while (done < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      if (done < bytes.size()) {
        status = IoError("cannot write", index.path);
        if (::ftruncate(fd, index.size) != 0) status = IoError("cannot write (and cannot undo)", index.path);
        ::close(fd);
        break;
      }
      ::close(fd);
      std::copy(std::begin(file.last_sequence), std::end(file.last_sequence), std::begin(index.last_sequence));
      for (int64_t n : file.sizes) {
        if (index.lines % options_.index_every_lines == 0) index.checkpoints.push_back(index.size);
        index.size += n;
        ++index.lines;
        ++result.appended;
      }
      if (touched_jobs.empty() || touched_jobs.back() != std::get<0>(key)) touched_jobs.push_back(std::get<0>(key));
    }
  }
  std::sort(touched_jobs.begin(), touched_jobs.end());
  touched_jobs.erase(std::unique(touched_jobs.begin(), touched_jobs.end()), touched_jobs.end());
  for (const std::string& job : touched_jobs) Notify(job);
  if (!status.ok()) return status;
  return result;
}

std::vector<std::pair<LogStore::FileKey, LogStore::FileIndex>> LogStore::MatchingLocked(const LogQuery& query) const {
  std::vector<std::pair<FileKey, FileIndex>> out;
  for (auto it = files_.lower_bound({query.job_id, query.min_generation, INT32_MIN});
       it != files_.end() && std::get<0>(it->first) == query.job_id; ++it) {
    const auto& [job, gen, rank] = it->first;
    if (gen > query.max_generation) break;
    if (query.rank.has_value() && rank != *query.rank) continue;
    if (it->second.size == 0) continue;
    FileIndex copy;
    copy.path = it->second.path;
    copy.size = it->second.size;
    copy.lines = it->second.lines;
    out.emplace_back(it->first, std::move(copy));
  }
  return out;
}

absl::StatusOr<LogCursor> LogStore::TailCursor(const LogQuery& query, int64_t tail_lines) const {
  LogCursor cursor;
  if (tail_lines <= 0) return cursor;
  struct Start {
    std::pair<int64_t, int32_t> file;
    std::string path;
    int64_t offset, skip, size;
  };
  std::vector<Start> starts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, copy] : MatchingLocked(query)) {
      if (copy.lines <= tail_lines) continue;
      const FileIndex& index = files_.at(key);
      const int64_t first = index.lines - tail_lines;
      const size_t cp = static_cast<size_t>(first / options_.index_every_lines);
      starts.push_back({{std::get<1>(key), std::get<2>(key)},
                        index.path,
                        index.checkpoints[cp],
                        first - static_cast<int64_t>(cp) * options_.index_every_lines,
                        index.size});
    }
  }
  for (const Start& s : starts) {
    ASSIGN_OR_RETURN(cursor.offsets[s.file], SkipLines(s.path, s.offset, s.skip, s.size));
  }
  return cursor;
}

absl::StatusOr<v1::LogChunk> LogStore::Read(const LogQuery& query, LogCursor* cursor, size_t max_lines,
                                            size_t max_bytes) const {
  std::vector<std::pair<FileKey, FileIndex>> files;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files = MatchingLocked(query);
  }
  struct Batch {
    std::pair<int64_t, int32_t> file;
    std::vector<std::pair<v1::LogLine, int64_t>> lines;  // line, offset past it
    bool exhausted = false;                              // read to the file's end
    size_t next = 0;
  };
  std::vector<Batch> batches;
  // Enough for one line of the longest kind, escaped, whatever max_bytes says.
  const int64_t budget = static_cast<int64_t>(max_bytes + 2 * options_.max_line_bytes + 64);
  for (const auto& [key, index] : files) {
    Batch batch;
    batch.file = {std::get<1>(key), std::get<2>(key)};
    const int64_t from = cursor->offsets.count(batch.file) ? cursor->offsets[batch.file] : 0;
    if (from >= index.size) continue;
    const int64_t length = std::min(budget, index.size - from);
    ASSIGN_OR_RETURN(std::string data, ReadRange(index.path, from, length));
    size_t pos = 0;
    for (size_t nl; batch.lines.size() < max_lines && (nl = data.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      v1::LogLine line;
      if (!ParseLine(absl::string_view(data).substr(pos, nl - pos), &line)) line.set_text(data.substr(pos, nl - pos));
      line.set_job_id(std::get<0>(key));
      line.set_generation(std::get<1>(key));
      line.set_rank(std::get<2>(key));
      batch.lines.emplace_back(std::move(line), from + static_cast<int64_t>(nl + 1));
    }
    if (batch.lines.empty()) continue;
    batch.exhausted = batch.lines.back().second == index.size;
    batches.push_back(std::move(batch));
  }
  // Merge by time, but never past the last line read of a file that has
  // more: what that file holds next may be earlier than other files' lines.
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
    cursor->offsets[best->file] = end;
    *chunk.add_lines() = std::move(line);
  }
  return chunk;
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
    n += it->second.lines;
  }
  return n;
}

}  // namespace ringmaster::coordinator
