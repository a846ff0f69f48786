#ifndef RINGMASTER_ENGINE_CHECKPOINT_JSON_H_
#define RINGMASTER_ENGINE_CHECKPOINT_JSON_H_

// A small, strict JSON (RFC 8259) parser for the files a checkpoint holds
// (safetensors headers, MANIFEST.json, state.json), and the quoting their
// writers use. Strict: strings must be valid UTF-8 without raw control
// characters, an object may not repeat a key, nesting is limited to 64 levels,
// and only whitespace may follow the value.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type = Type::kNull;
  bool boolean = false;
  // Numbers: `number` always; `integer` too when the literal has no fraction or
  // exponent and fits int64 (then is_integer is true).
  double number = 0;
  int64_t integer = 0;
  bool is_integer = false;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in document order

  // The member named `key` of an object, or nullptr.
  const JsonValue* Find(absl::string_view key) const;
};

// INVALID_ARGUMENT "JSON error at byte N: <what>" for anything that is not
// one strict JSON value.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// `s` as a JSON string literal, quotes included. `s` must be valid UTF-8
// (see IsValidUtf8); control characters are escaped.
std::string JsonQuote(absl::string_view s);

bool IsValidUtf8(absl::string_view s);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_JSON_H_
