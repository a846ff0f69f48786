#include "engine/checkpoint/json.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace ringmaster::engine {
namespace {

constexpr int kMaxDepth = 64;

// Length of the UTF-8 sequence starting at s[i], or 0 if it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t code = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2, code = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, code = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, code = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMinCode[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinCode[n] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return n;
}

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    *out += static_cast<char>(code);
  } else if (code < 0x800) {
    *out += static_cast<char>(0xc0 | (code >> 6));
    *out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    *out += static_cast<char>(0xe0 | (code >> 12));
    *out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (code >> 18));
    *out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

// Recursive-descent parser over `text_`; pos_ is the next unread byte.
class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue value;
    if (absl::Status status = ParseValue(0, &value); !status.ok()) return status;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected data after the value");
    return value;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("JSON error at byte %d: %s", pos_, what));
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }

  absl::Status ParseValue(int depth, JsonValue* out) {
    if (depth >= kMaxDepth) return Error("nested deeper than 64 levels");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      out->type = JsonValue::Type::kString;
      return ParseString(&out->string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    if (Consume("true") || Consume("false")) {
      out->type = JsonValue::Type::kBool;
      out->boolean = c == 't';
      return absl::OkStatus();
    }
    if (Consume("null")) return absl::OkStatus();
    return Error(absl::StrFormat("unexpected character '%c'", c));
  }

  absl::Status ParseObject(int depth, JsonValue* out) {
    out->type = JsonValue::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (Consume("}")) return absl::OkStatus();
    for (;;) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a string key");
      std::string key;
      if (absl::Status status = ParseString(&key); !status.ok()) return status;
      if (out->Find(key) != nullptr) return Error(absl::StrFormat("duplicate key %s", JsonQuote(key)));
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      JsonValue value;
      if (absl::Status status = ParseValue(depth + 1, &value); !status.ok()) return status;
      out->object.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Consume("}")) return absl::OkStatus();
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseArray(int depth, JsonValue* out) {
    out->type = JsonValue::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (Consume("]")) return absl::OkStatus();
    for (;;) {
      JsonValue value;
      if (absl::Status status = ParseValue(depth + 1, &value); !status.ok()) return status;
      out->array.push_back(std::move(value));
      SkipSpace();
      if (Consume("]")) return absl::OkStatus();
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseHex4(uint32_t* code) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      int digit;
      if (!absl::ascii_isxdigit(text_[pos_]) || !absl::SimpleHexAtoi(text_.substr(pos_, 1), &digit)) {
        return Error("bad hex digit in \\u escape");
      }
      ++pos_;
      *code = (*code << 4) | static_cast<uint32_t>(digit);
    }
    return absl::OkStatus();
  }

  absl::Status ParseEscape(std::string* out) {
    if (pos_ >= text_.size()) return Error("unterminated string");
    const char e = text_[pos_++];
    switch (e) {
      case '"':
        *out += '"';
        return absl::OkStatus();
      case '\\':
        *out += '\\';
        return absl::OkStatus();
      case '/':
        *out += '/';
        return absl::OkStatus();
      case 'b':
        *out += '\b';
        return absl::OkStatus();
      case 'f':
        *out += '\f';
        return absl::OkStatus();
      case 'n':
        *out += '\n';
        return absl::OkStatus();
      case 'r':
        *out += '\r';
        return absl::OkStatus();
      case 't':
        *out += '\t';
        return absl::OkStatus();
      case 'u':
        break;
      default:
        return Error(absl::StrFormat("bad escape '\\%c'", e));
    }
    uint32_t code;
    if (absl::Status status = ParseHex4(&code); !status.ok()) return status;
    if (code >= 0xdc00 && code <= 0xdfff) return Error("unpaired low surrogate");
    if (code >= 0xd800 && code <= 0xdbff) {
      uint32_t low = 0;
      if (!Consume("\\u")) return Error("unpaired high surrogate");
      if (absl::Status status = ParseHex4(&low); !status.ok()) return status;
      if (low < 0xdc00 || low > 0xdfff) return Error("unpaired high surrogate");
      code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
    }
    AppendUtf8(code, out);
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // '"'
    for (;;) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c == '\\') {
        ++pos_;
        if (absl::Status status = ParseEscape(out); !status.ok()) return status;
      } else if (c < 0x20) {
        return Error("control character in string");
      } else {
        const size_t n = Utf8SequenceLength(text_, pos_);
        if (n == 0) return Error("invalid UTF-8 in string");
        out->append(text_.data() + pos_, n);
        pos_ += n;
      }
    }
  }

  absl::Status ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t first = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - first;
    };
    Consume("-");
    const size_t int_start = pos_;
    const size_t int_digits = digits();
    if (int_digits == 0) return Error("expected digits");
    if (int_digits > 1 && text_[int_start] == '0') return Error("leading zero in number");
    bool integral = true;
    if (Consume(".")) {
      integral = false;
      if (digits() == 0) return Error("expected digits after '.'");
    }
    if (Consume("e") || Consume("E")) {
      integral = false;
      if (!Consume("+")) Consume("-");
      if (digits() == 0) return Error("expected exponent digits");
    }
    const absl::string_view literal = text_.substr(start, pos_ - start);
    out->type = JsonValue::Type::kNumber;
    if (!absl::SimpleAtod(literal, &out->number)) return Error("number out of range");
    out->is_integer = integral && absl::SimpleAtoi(literal, &out->integer);
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [name, value] : object) {
    if (name == key) return &value;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).ParseDocument(); }

std::string JsonQuote(absl::string_view s) { return "\"" + JsonEscape(std::string(s)) + "\""; }

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace ringmaster::engine
