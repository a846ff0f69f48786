#include "common/utf8.h"

namespace ringmaster {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Length of the valid UTF-8 sequence at the start of `s`, or 0 if invalid.
size_t ValidSequence(absl::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return 0;
  }
  return len;
}

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

bool IsValidUtf8(absl::string_view bytes) {
  while (!bytes.empty()) {
    const size_t n = ValidSequence(bytes);
    if (n == 0) return false;
    bytes.remove_prefix(n);
  }
  return true;
}

std::string SanitizeUtf8(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    size_t n = ValidSequence(bytes);
    if (n == 0) {
      out += kReplacement;
      bytes.remove_prefix(1);
    } else {
      out.append(bytes.data(), n);
      bytes.remove_prefix(n);
    }
  }
  return out;
}

size_t Utf8SafePrefix(absl::string_view bytes, size_t max_bytes) {
  if (bytes.size() <= max_bytes) return bytes.size();
  size_t cut = max_bytes;
  // Back up over continuation bytes (at most 3) to the start of a sequence.
  for (int i = 0; i < 3 && cut > 0 && IsContinuation(bytes[cut]); ++i) --cut;
  return cut == 0 ? max_bytes : cut;
}

absl::string_view Utf8SafeSuffix(absl::string_view bytes, size_t max_bytes) {
  size_t start = bytes.size() > max_bytes ? bytes.size() - max_bytes : 0;
  // Skip continuation bytes (at most 3) to the start of a sequence.
  for (int i = 0; i < 3 && start < bytes.size() && IsContinuation(bytes[start]); ++i) ++start;
  return bytes.substr(start);
}

}  // namespace ringmaster
