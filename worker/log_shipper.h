#ifndef RINGMASTER_WORKER_LOG_SHIPPER_H_
#define RINGMASTER_WORKER_LOG_SHIPPER_H_

// LogShipper: tails the log file of every rank this node runs and turns what
// the ranks write into LogLines (job, generation, rank, sequence, time, text)
// in a bounded buffer, from which a sender (the PushLogs adapter) takes
// LogChunks. It never blocks a rank: the files are read after the fact, and
// when the buffer is full new lines are dropped and counted; their sequence
// numbers are still used, so a reader sees the gap.
//
// A rank's stdout and stderr share one file, so lines carry
// LOG_STREAM_UNSPECIFIED. Lines lose their "\n" (and a "\r" before it), are
// made valid UTF-8 (U+FFFD) and are split beyond max_line_bytes. A last line
// without "\n" is sent when the rank is Finish()ed.
//
// Thread-safe. Start() runs a polling thread; tests call Poll() instead.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/logs.pb.h"

namespace ringmaster::worker {

struct LogSource {
  std::string job_id;
  int64_t generation = 0;
  int32_t rank = 0;
  std::string path;
  // Bytes of the file that are not this rank's (the file is appended to):
  // shipping starts here.
  int64_t offset = 0;
};

struct LogShipperOptions {
  // Text buffered and not yet taken by NextChunk, at most.
  size_t max_buffered_bytes = 4 << 20;
  // Lines per LogChunk, at most.
  size_t max_chunk_lines = 256;
  // Longer lines are split (the proto's limit is 64 KiB).
  size_t max_line_bytes = 64 << 10;
  // How often the polling thread reads the files.
  absl::Duration poll_interval = absl::Milliseconds(200);
};

class LogShipper {
 public:
  explicit LogShipper(const Clock* clock, LogShipperOptions options = {});
  ~LogShipper();
  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  // Starts tailing a rank's log; true if it was not watched before. No-op
  // (false) for a rank already watched or already finished. The file need
  // not exist yet.
  bool Watch(const LogSource& source);
  // The watched rank's output goes on in another file (a parked process of an
  // older generation became this rank: worker/process_supervisor.h): its
  // tail reads source.path from source.offset from now on. No-op for a rank
  // not watched.
  void Retarget(const LogSource& source);
  // The rank exited: reads its file to the end, sends the unterminated last
  // line, and stops watching it.
  void Finish(const std::string& job_id, int64_t generation, int32_t rank);
  // Reads what every watched file gained since the last Poll.
  void Poll();

  // Starts the polling thread (every poll_interval).
  void Start();
  // Stops the polling thread after a last Poll. NextChunk then returns what
  // is buffered, and nullopt once it is empty (without waiting). Idempotent.
  void Close();

  // Up to max_chunk_lines buffered lines; waits at most `timeout` for some.
  // nullopt when there were none in time (or closed and empty).
  std::optional<v1::LogChunk> NextChunk(absl::Duration timeout);

  uint64_t dropped_lines() const;
  size_t buffered_bytes() const;
  bool closed() const;

 private:
  using Key = std::tuple<std::string, int64_t, int32_t>;
  struct Tail {
    LogSource source;
    int fd = -1;
    std::string partial;  // bytes after the last "\n"
    int64_t next_sequence = 1;
  };

  // Reads `tail`'s file from its offset to the end; `final`: flush the
  // partial line. Requires sources_mu_.
  void ReadLocked(Tail& tail, bool final);
  void EmitLocked(Tail& tail, std::string text);
  void PollLoop();

  const Clock* const clock_;
  const LogShipperOptions options_;

  std::mutex sources_mu_;  // taken before queue_mu_
  std::map<Key, Tail> tails_;
  std::set<Key> finished_;

  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<v1::LogLine> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool closed_ = false;

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_thread_ = false;
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_LOG_SHIPPER_H_
