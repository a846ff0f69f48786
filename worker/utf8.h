#ifndef RINGMASTER_WORKER_UTF8_H_
#define RINGMASTER_WORKER_UTF8_H_

// Protobuf `string` fields must hold UTF-8; what trainers print need not.
// Thread-safe (no state).

#include <string>

#include "absl/strings/string_view.h"

namespace ringmaster::worker {

// `bytes` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string SanitizeUtf8(absl::string_view bytes);

// The longest prefix of `bytes` of at most `max_bytes` that does not end in
// the middle of a UTF-8 sequence (for splitting long lines).
size_t Utf8SafePrefix(absl::string_view bytes, size_t max_bytes);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_UTF8_H_
