#ifndef RINGMASTER_COORDINATOR_STORE_DISK_SPACE_H_
#define RINGMASTER_COORDINATOR_STORE_DISK_SPACE_H_

// How full the coordinator's disk is, and the reserve it keeps there.
//
// DiskSpace measures the filesystem that holds a directory. It is injected
// (STYLE.md: like the clock): production uses StatvfsDiskSpace, tests a
// FakeDiskSpace (fake_disk_space.h) they fill and empty at will.
//
// DiskReserve is the policy: the coordinator keeps `reserve` bytes free on
// the filesystem of its state directory (the SQLite database and the logs).
// Under it, new log lines are refused (LogStore::Append answers
// RESOURCE_EXHAUSTED) so that what is left goes to the database: checkpoint
// commits and job state changes are small SQLite rows and keep working until
// the filesystem is truly full. The reserve is the smaller of an absolute
// size (default 1 GiB) and a fraction of the filesystem (default 5%): 1 GiB
// on a large disk, 5% of a small one (512 MiB of a 10 GiB volume), so that a
// small disk is not declared low while it is mostly empty.
//
// Thread-safe: DiskSpace implementations and DiskReserve are immutable
// after construction (FakeDiskSpace guards its values).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::coordinator {

struct DiskUsage {
  // Bytes an unprivileged writer may still use (statvfs f_bavail x f_frsize).
  int64_t free_bytes = 0;
  // Size of the filesystem (f_blocks x f_frsize).
  int64_t total_bytes = 0;
};

class DiskSpace {
 public:
  virtual ~DiskSpace() = default;
  // The filesystem's usage now. UNAVAILABLE when it cannot be measured.
  virtual absl::StatusOr<DiskUsage> Measure() const = 0;
  // The directory measured, for messages.
  virtual const std::string& path() const = 0;
};

// statvfs(2) of `path`.
class StatvfsDiskSpace final : public DiskSpace {
 public:
  explicit StatvfsDiskSpace(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<DiskUsage> Measure() const override;
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
};

struct DiskReserveOptions {
  // The reserve is the smaller of these two; one that is 0 does not count,
  // and with both 0 there is no reserve.
  int64_t bytes = int64_t{1} << 30;
  double fraction = 0.05;  // of the filesystem's size, in [0, 1]
};

// Parses --disk-reserve: a size ("2GiB", common/cli_flags.h's syntax) or a
// percentage of the filesystem ("5%"), which then is the whole reserve;
// "0": none. INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<DiskReserveOptions> ParseDiskReserve(const std::string& text);
// "1 GiB or 5% of the filesystem, whichever is smaller", "2 GiB", "5% of the filesystem", "none".
std::string DescribeDiskReserve(const DiskReserveOptions& options);

class DiskReserve {
 public:
  struct State {
    DiskUsage usage;
    int64_t reserve_bytes = 0;
    bool low = false;      // free_bytes < reserve_bytes
    absl::Status measure;  // not OK: the disk could not be measured (then never low)
  };

  // `disk` is not owned and must outlive this.
  DiskReserve(const DiskSpace* disk, DiskReserveOptions options) : disk_(disk), options_(options) {}

  // Measures now.
  State Check() const;
  // OK while the free space is at or above the reserve (or cannot be
  // measured: a failing statvfs must not silence every job); else
  // RESOURCE_EXHAUSTED: "the coordinator's disk is low: 800 MiB free on
  // /var/lib/ringmaster/coordinator, under its reserve of 1 GiB
  // (--disk-reserve): new log lines are refused until space is freed".
  absl::Status CheckRoomForLogs() const;
  // The message of CheckRoomForLogs for a state that is low.
  std::string LowMessage(const State& state) const;

  const DiskReserveOptions& options() const { return options_; }
  const DiskSpace& disk() const { return *disk_; }

 private:
  const DiskSpace* const disk_;
  const DiskReserveOptions options_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_STORE_DISK_SPACE_H_
