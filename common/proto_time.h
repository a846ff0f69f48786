#ifndef RINGMASTER_COMMON_PROTO_TIME_H_
#define RINGMASTER_COMMON_PROTO_TIME_H_

// absl::Time <-> google.protobuf.Timestamp / Duration, and the microsecond
// integers the store keeps. Pure functions; thread-safe.

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace ringmaster {

inline google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / 1000000000;
  int64_t rem = nanos % 1000000000;
  if (rem < 0) {
    rem += 1000000000;
    --seconds;
  }
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(rem));
  return ts;
}

inline absl::Time FromProtoTime(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

inline google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out.set_seconds(nanos / 1000000000);
  out.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

inline absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// Microseconds since the Unix epoch, as stored.
inline int64_t ToMicros(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1000000 + ts.nanos() / 1000;
}

inline google::protobuf::Timestamp FromMicros(int64_t us) {
  return ToProtoTime(absl::FromUnixMicros(us));
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_PROTO_TIME_H_
