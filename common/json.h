#ifndef RINGMASTER_COMMON_JSON_H_
#define RINGMASTER_COMMON_JSON_H_

// JSON is nlohmann-json's (Debian's nlohmann-json3-dev), the one JSON library
// of the project: job specs written as JSON (common/spec_json.cc) and the
// files of a checkpoint (manifest, state, safetensors header). What is here
// turns its exceptions into a Status and keeps its parser strict:
//   - malformed text: INVALID_ARGUMENT "malformed JSON at line L, column C:
//     <nlohmann's reason>";
//   - an object that repeats a key: the same error (nlohmann would keep the
//     last one silently);
//   - strings must be UTF-8 (nlohmann checks) and only whitespace may follow
//     the value.
// Thread-safe (no state).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ringmaster {

// Objects keep their members in document order (nlohmann::ordered_json).
absl::StatusOr<nlohmann::ordered_json> ParseJson(absl::string_view text);

// The Status for an error nlohmann reported while parsing.
absl::Status JsonSyntaxError(const nlohmann::json::exception& e);

// `s` as a JSON string literal, quotes included. INVALID_ARGUMENT unless `s`
// is valid UTF-8.
absl::StatusOr<std::string> JsonQuote(absl::string_view s);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_JSON_H_
