#include "coordinator/store/disk_space.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/cli_flags.h"

namespace ringmaster::coordinator {

absl::StatusOr<DiskUsage> StatvfsDiskSpace::Measure() const {
  struct statvfs st;
  if (::statvfs(path_.c_str(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot measure the free space of ", path_, ": ", std::strerror(errno)));
  }
  const auto unit = static_cast<int64_t>(st.f_frsize != 0 ? st.f_frsize : st.f_bsize);
  DiskUsage usage;
  usage.free_bytes = static_cast<int64_t>(st.f_bavail) * unit;
  usage.total_bytes = static_cast<int64_t>(st.f_blocks) * unit;
  return usage;
}

absl::StatusOr<DiskReserveOptions> ParseDiskReserve(const std::string& text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  DiskReserveOptions options;
  if (absl::ConsumeSuffix(&t, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(absl::StripTrailingAsciiWhitespace(t), &percent) || !(percent >= 0 && percent <= 100)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk-reserve: \"", text, "\" is not a percentage of the filesystem in [0%, 100%]"));
    }
    options.bytes = 0;
    options.fraction = percent / 100;
    return options;
  }
  int64_t bytes = 0;
  if (absl::Status s = ParseByteSizeFlag("--disk-reserve", text, /*allow_zero=*/true, &bytes); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(), ", or a percentage of the filesystem (e.g. 5%)"));
  }
  options.bytes = bytes;
  options.fraction = 0;
  return options;
}

std::string DescribeDiskReserve(const DiskReserveOptions& options) {
  const std::string percent = absl::StrCat(absl::StrFormat("%g", options.fraction * 100), "% of the filesystem");
  if (options.bytes > 0 && options.fraction > 0) {
    return absl::StrCat(FormatByteSize(options.bytes), " or ", percent, ", whichever is smaller");
  }
  if (options.bytes > 0) return FormatByteSize(options.bytes);
  if (options.fraction > 0) return percent;
  return "none";
}

DiskReserve::State DiskReserve::Check() const {
  State state;
  absl::StatusOr<DiskUsage> usage = disk_->Measure();
  if (!usage.ok()) {
    state.measure = usage.status();
    return state;
  }
  state.usage = *usage;
  int64_t reserve = -1;
  if (options_.bytes > 0) reserve = options_.bytes;
  if (options_.fraction > 0) {
    const auto part = static_cast<int64_t>(std::ceil(options_.fraction * static_cast<double>(usage->total_bytes)));
    reserve = reserve < 0 ? part : std::min(reserve, part);
  }
  state.reserve_bytes = std::max<int64_t>(reserve, 0);
  state.low = usage->free_bytes < state.reserve_bytes;
  return state;
}

std::string DiskReserve::LowMessage(const State& state) const {
  return absl::StrCat("the coordinator's disk is low: ", FormatByteSize(state.usage.free_bytes), " free on ",
                      disk_->path(), ", under its reserve of ", FormatByteSize(state.reserve_bytes),
                      " (--disk-reserve): new log lines are refused until space is freed");
}

absl::Status DiskReserve::CheckRoomForLogs() const {
  const State state = Check();
  if (!state.low) return absl::OkStatus();
  return absl::ResourceExhaustedError(LowMessage(state));
}

}  // namespace ringmaster::coordinator
