#include "coordinator/store/log_store_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/proto_time.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator::log_files {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%dT%H:%M:%E6SZ";
constexpr size_t kIoBlock = 64 << 10;
constexpr char kMarkerStream[] = "dropped";

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

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

int StreamIndex(v1::LogStream s) { return s == v1::LOG_STREAM_STDOUT ? 1 : s == v1::LOG_STREAM_STDERR ? 2 : 0; }

std::string FormatRecord(const v1::LogLine& line, size_t max_text_bytes) {
  return absl::StrCat(absl::FormatTime(kTimeFormat, FromProtoTime(line.time()), absl::UTCTimeZone()), " ",
                      StreamName(StreamIndex(line.stream())), " ", line.sequence(), " ",
                      Escape(line.text(), max_text_bytes), "\n");
}

std::string FormatMarkerRecord(absl::Time time, int64_t lines, int64_t bytes, const std::string& text) {
  return absl::StrCat(absl::FormatTime(kTimeFormat, time, absl::UTCTimeZone()), " ", kMarkerStream, " ", lines, "/",
                      bytes, " ", Escape(text, text.size()), "\n");
}

bool ParseRecord(absl::string_view record, v1::LogLine* out) {
  const size_t a = record.find(' ');
  const size_t b = a == absl::string_view::npos ? a : record.find(' ', a + 1);
  const size_t c = b == absl::string_view::npos ? b : record.find(' ', b + 1);
  if (c == absl::string_view::npos) return false;
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(kTimeFormat, std::string(record.substr(0, a)), &t, &error)) return false;
  const absl::string_view stream = record.substr(a + 1, b - a - 1);
  const absl::string_view number = record.substr(b + 1, c - b - 1);
  if (stream == kMarkerStream) {
    std::vector<absl::string_view> counts = absl::StrSplit(number, '/');
    int64_t lines = 0, bytes = 0;
    if (counts.size() != 2 || !absl::SimpleAtoi(counts[0], &lines) || !absl::SimpleAtoi(counts[1], &bytes)) {
      return false;
    }
    out->set_dropped_lines(lines);
    out->set_dropped_bytes(bytes);
    out->set_sequence(0);
    out->set_stream(v1::LOG_STREAM_UNSPECIFIED);
  } else {
    int64_t seq = 0;
    if (!absl::SimpleAtoi(number, &seq)) return false;
    out->set_stream(StreamFromName(stream));
    out->set_sequence(seq);
  }
  *out->mutable_time() = ToProtoTime(t);
  out->set_text(Unescape(record.substr(c + 1)));
  return true;
}

std::string SegmentName(int32_t rank, int64_t first_line, int64_t offset) {
  if (first_line == 0 && offset == 0) return absl::StrCat("rank-", rank, ".log");
  return absl::StrCat("rank-", rank, ".", first_line, ".", offset, ".log");
}

std::optional<SegmentId> ParseSegmentName(const std::string& name) {
  absl::string_view n = name;
  if (!absl::ConsumePrefix(&n, "rank-") || !absl::ConsumeSuffix(&n, ".log")) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(n, '.');
  SegmentId id;
  if (!absl::SimpleAtoi(parts[0], &id.rank) || id.rank < 0) return std::nullopt;
  if (parts.size() == 1) return id;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &id.first_line) || !absl::SimpleAtoi(parts[2], &id.offset) ||
      id.first_line < 0 || id.offset < 0) {
    return std::nullopt;
  }
  return id;
}

absl::StatusOr<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is gone"));
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

}  // namespace ringmaster::coordinator::log_files
