#include "worker/log_shipper.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/proto_time.h"
#include "common/utf8.h"

namespace ringmaster::worker {

LogShipper::LogShipper(const Clock* clock, LogShipperOptions options) : clock_(clock), options_(options) {}

LogShipper::~LogShipper() {
  Close();
  std::lock_guard<std::mutex> lock(sources_mu_);
  for (auto& [key, tail] : tails_) {
    if (tail.fd >= 0) close(tail.fd);
  }
}

bool LogShipper::Watch(const LogSource& source) {
  std::lock_guard<std::mutex> lock(sources_mu_);
  Key key{source.job_id, source.generation, source.rank};
  if (finished_.count(key) > 0 || tails_.count(key) > 0) return false;
  // Finished ranks of older generations of this job are not watched again.
  for (auto it = finished_.begin(); it != finished_.end();) {
    if (std::get<0>(*it) == source.job_id && std::get<1>(*it) < source.generation) {
      it = finished_.erase(it);
    } else {
      ++it;
    }
  }
  Tail tail;
  tail.source = source;
  tails_.emplace(key, std::move(tail));
  return true;
}

void LogShipper::Retarget(const LogSource& source) {
  std::lock_guard<std::mutex> lock(sources_mu_);
  auto it = tails_.find(Key{source.job_id, source.generation, source.rank});
  if (it == tails_.end()) return;
  Tail& tail = it->second;
  if (tail.fd >= 0) close(tail.fd);
  tail.fd = -1;
  tail.partial.clear();
  tail.source = source;
}

void LogShipper::Finish(const std::string& job_id, int64_t generation, int32_t rank) {
  std::lock_guard<std::mutex> lock(sources_mu_);
  Key key{job_id, generation, rank};
  finished_.insert(key);
  auto it = tails_.find(key);
  if (it == tails_.end()) return;
  ReadLocked(it->second, /*final=*/true);
  if (it->second.fd >= 0) close(it->second.fd);
  tails_.erase(it);
}

void LogShipper::Poll() {
  std::lock_guard<std::mutex> lock(sources_mu_);
  for (auto& [key, tail] : tails_) ReadLocked(tail, /*final=*/false);
}

void LogShipper::ReadLocked(Tail& tail, bool final) {
  if (tail.fd < 0) tail.fd = open(tail.source.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (tail.fd >= 0) {
    char buffer[64 << 10];
    while (true) {
      ssize_t n = pread(tail.fd, buffer, sizeof(buffer), tail.source.offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      tail.source.offset += n;
      tail.partial.append(buffer, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = tail.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
        size_t end = nl;
        if (end > start && tail.partial[end - 1] == '\r') --end;
        EmitLocked(tail, tail.partial.substr(start, end - start));
      }
      tail.partial.erase(0, start);
      while (tail.partial.size() >= options_.max_line_bytes) {  // a line too long to wait for its end
        size_t cut = Utf8SafePrefix(tail.partial, options_.max_line_bytes);
        EmitLocked(tail, tail.partial.substr(0, cut));
        tail.partial.erase(0, cut);
      }
    }
  }
  if (final && !tail.partial.empty()) {
    EmitLocked(tail, std::move(tail.partial));
    tail.partial.clear();
  }
}

void LogShipper::EmitLocked(Tail& tail, std::string text) {
  std::string clean = SanitizeUtf8(text);
  size_t start = 0;
  do {  // an empty line is a line too
    const size_t cut = Utf8SafePrefix(absl::string_view(clean).substr(start), options_.max_line_bytes);
    v1::LogLine line;
    line.set_job_id(tail.source.job_id);
    line.set_generation(tail.source.generation);
    line.set_rank(tail.source.rank);
    line.set_stream(v1::LOG_STREAM_UNSPECIFIED);
    line.set_sequence(tail.next_sequence++);
    *line.mutable_time() = ToProtoTime(clock_->Now());
    line.set_text(clean.substr(start, cut));
    start += cut;
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queued_bytes_ + line.text().size() > options_.max_buffered_bytes) {
      ++dropped_;
      continue;
    }
    queued_bytes_ += line.text().size();
    queue_.push_back(std::move(line));
    queue_cv_.notify_all();
  } while (start < clean.size());
}

void LogShipper::Start() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable() || stop_thread_) return;
  thread_ = std::thread([this] { PollLoop(); });
}

void LogShipper::PollLoop() {
  std::unique_lock<std::mutex> lock(thread_mu_);
  while (!stop_thread_) {
    lock.unlock();
    Poll();
    lock.lock();
    thread_cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.poll_interval), [&] { return stop_thread_; });
  }
}

void LogShipper::Close() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(thread_mu_);
    stop_thread_ = true;
    thread = std::move(thread_);
  }
  thread_cv_.notify_all();
  if (thread.joinable()) thread.join();
  Poll();
  std::lock_guard<std::mutex> lock(queue_mu_);
  closed_ = true;
  queue_cv_.notify_all();
}

std::optional<v1::LogChunk> LogShipper::NextChunk(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return closed_ || !queue_.empty(); });
  if (queue_.empty()) return std::nullopt;
  v1::LogChunk chunk;
  while (!queue_.empty() && static_cast<size_t>(chunk.lines_size()) < options_.max_chunk_lines) {
    queued_bytes_ -= queue_.front().text().size();
    *chunk.add_lines() = std::move(queue_.front());
    queue_.pop_front();
  }
  return chunk;
}

uint64_t LogShipper::dropped_lines() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return dropped_;
}

size_t LogShipper::buffered_bytes() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queued_bytes_;
}

bool LogShipper::closed() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return closed_;
}

}  // namespace ringmaster::worker
