#ifndef RINGMASTER_COMMON_UTF8_H_
#define RINGMASTER_COMMON_UTF8_H_

// UTF-8 checks and repairs, the one copy: protobuf `string` fields and JSON
// strings must hold UTF-8; what trainers print, tensor names and checkpoint
// state need not. Well-formed means RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF. Pure functions; thread-safe.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ringmaster {

bool IsValidUtf8(absl::string_view bytes);

// `bytes` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string SanitizeUtf8(absl::string_view bytes);

// The length of the longest prefix of `bytes` of at most `max_bytes` that
// does not end in the middle of a UTF-8 sequence (for splitting long lines).
size_t Utf8SafePrefix(absl::string_view bytes, size_t max_bytes);

// The longest suffix of `bytes` of at most `max_bytes` that starts at a
// character (for the tail of a log).
absl::string_view Utf8SafeSuffix(absl::string_view bytes, size_t max_bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_UTF8_H_
