// A small strict JSON parser (RFC 8259) that keeps line and column of every
// value, so that spec errors can point into the file. Produces SpecNodes.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/spec_tree.h"

namespace ringmaster::spec_internal {
namespace {

// Deeper documents are rejected (a job spec is at most about 5 levels deep).
constexpr int kMaxDepth = 64;

class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<SpecNode> ParseDocument() {
    SkipWhitespace();
    if (AtEnd()) return SpecNode();  // empty: kNull, as for YAML
    absl::StatusOr<SpecNode> value = ParseValue(0);
    if (!value.ok()) return value;
    SkipWhitespace();
    if (!AtEnd()) return Error("unexpected content after the JSON value");
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      Advance();
    }
  }

  absl::Status Error(absl::string_view reason) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at line ", line_, ", column ", column_, ": ", reason));
  }

  absl::Status UnexpectedChar(absl::string_view expected) const {
    if (AtEnd()) return Error(absl::StrCat("expected ", expected, ", got the end of the text"));
    return Error(absl::StrCat("expected ", expected, ", got '", std::string(1, Peek()), "'"));
  }

  SpecNode StartNode(SpecNode::Kind kind) const {
    SpecNode node;
    node.kind = kind;
    node.line = line_;
    node.column = column_;
    return node;
  }

  absl::StatusOr<SpecNode> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error(absl::StrCat("nesting deeper than ", kMaxDepth, " levels"));
    switch (Peek()) {
      case '{':
        return ParseObject(depth);
      case '[':
        return ParseArray(depth);
      case '"': {
        SpecNode node = StartNode(SpecNode::Kind::kScalar);
        node.quoted = true;
        absl::Status status = ParseString(&node.text);
        if (!status.ok()) return status;
        return node;
      }
      case 't':
        return ParseLiteral("true", SpecNode::Kind::kScalar);
      case 'f':
        return ParseLiteral("false", SpecNode::Kind::kScalar);
      case 'n':
        return ParseLiteral("null", SpecNode::Kind::kNull);
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return ParseNumber();
        return UnexpectedChar("a value");
    }
  }

  absl::StatusOr<SpecNode> ParseLiteral(absl::string_view word, SpecNode::Kind kind) {
    SpecNode node = StartNode(kind);
    if (text_.substr(pos_, word.size()) != word) return UnexpectedChar("a value");
    for (size_t i = 0; i < word.size(); ++i) Advance();
    if (kind == SpecNode::Kind::kScalar) node.text = std::string(word);
    return node;
  }

  void AdvanceDigits() {
    while (Peek() >= '0' && Peek() <= '9') Advance();
  }

  absl::StatusOr<SpecNode> ParseNumber() {
    SpecNode node = StartNode(SpecNode::Kind::kScalar);
    const size_t start = pos_;
    if (Peek() == '-') Advance();
    if (Peek() == '0') {
      Advance();
    } else if (Peek() >= '1' && Peek() <= '9') {
      AdvanceDigits();
    } else {
      return UnexpectedChar("a digit");
    }
    if (Peek() == '.') {
      Advance();
      if (!(Peek() >= '0' && Peek() <= '9')) return UnexpectedChar("a digit after '.'");
      AdvanceDigits();
    }
    if (Peek() == 'e' || Peek() == 'E') {
      Advance();
      if (Peek() == '+' || Peek() == '-') Advance();
      if (!(Peek() >= '0' && Peek() <= '9')) return UnexpectedChar("a digit in the exponent");
      AdvanceDigits();
    }
    node.text = std::string(text_.substr(start, pos_ - start));
    return node;
  }

  absl::StatusOr<unsigned> ParseHex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = Peek();
      unsigned digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return UnexpectedChar("a hex digit");
      }
      value = value * 16 + digit;
      Advance();
    }
    return value;
  }

  static void AppendUtf8(unsigned code_point, std::string* out) {
    if (code_point < 0x80) {
      *out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
      *out += static_cast<char>(0xC0 | (code_point >> 6));
      *out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else if (code_point < 0x10000) {
      *out += static_cast<char>(0xE0 | (code_point >> 12));
      *out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (code_point >> 18));
      *out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
  }

  // \uXXXX (after the "\u"), combining a surrogate pair.
  absl::Status ParseUnicodeEscape(std::string* out) {
    absl::StatusOr<unsigned> high = ParseHex4();
    if (!high.ok()) return high.status();
    unsigned code_point = *high;
    if (code_point >= 0xD800 && code_point <= 0xDBFF) {
      if (Peek() != '\\') return UnexpectedChar("a low surrogate \\u escape");
      Advance();
      if (Peek() != 'u') return UnexpectedChar("a low surrogate \\u escape");
      Advance();
      absl::StatusOr<unsigned> low = ParseHex4();
      if (!low.ok()) return low.status();
      if (*low < 0xDC00 || *low > 0xDFFF) return Error("invalid low surrogate");
      code_point = 0x10000 + ((code_point - 0xD800) << 10) + (*low - 0xDC00);
    } else if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
      return Error("unpaired low surrogate");
    }
    AppendUtf8(code_point, out);
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    Advance();  // the opening quote
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      const char c = Peek();
      if (c == '"') {
        Advance();
        return absl::OkStatus();
      }
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        *out += c;
        Advance();
        continue;
      }
      Advance();
      const char escape = Peek();
      if (AtEnd()) return Error("unterminated string");
      Advance();
      switch (escape) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          absl::Status status = ParseUnicodeEscape(out);
          if (!status.ok()) return status;
          break;
        }
        default:
          return Error(absl::StrCat("invalid escape '\\", std::string(1, escape), "'"));
      }
    }
  }

  absl::StatusOr<SpecNode> ParseArray(int depth) {
    SpecNode node = StartNode(SpecNode::Kind::kList);
    Advance();  // '['
    SkipWhitespace();
    if (Peek() == ']') {
      Advance();
      return node;
    }
    while (true) {
      SkipWhitespace();
      absl::StatusOr<SpecNode> item = ParseValue(depth + 1);
      if (!item.ok()) return item;
      node.items.push_back(*std::move(item));
      SkipWhitespace();
      if (Peek() == ',') {
        Advance();
        continue;
      }
      if (Peek() == ']') {
        Advance();
        return node;
      }
      return UnexpectedChar("',' or ']'");
    }
  }

  absl::StatusOr<SpecNode> ParseObject(int depth) {
    SpecNode node = StartNode(SpecNode::Kind::kMap);
    Advance();  // '{'
    SkipWhitespace();
    if (Peek() == '}') {
      Advance();
      return node;
    }
    while (true) {
      SkipWhitespace();
      if (Peek() != '"') return UnexpectedChar("a quoted member name");
      SpecNode key = StartNode(SpecNode::Kind::kScalar);
      key.quoted = true;
      absl::Status status = ParseString(&key.text);
      if (!status.ok()) return status;
      SkipWhitespace();
      if (Peek() != ':') return UnexpectedChar("':'");
      Advance();
      SkipWhitespace();
      absl::StatusOr<SpecNode> value = ParseValue(depth + 1);
      if (!value.ok()) return value;
      node.entries.emplace_back(std::move(key), *std::move(value));
      SkipWhitespace();
      if (Peek() == ',') {
        Advance();
        continue;
      }
      if (Peek() == '}') {
        Advance();
        return node;
      }
      return UnexpectedChar("',' or '}'");
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace

absl::StatusOr<SpecNode> ParseJsonTree(absl::string_view text) {
  return JsonParser(text).ParseDocument();
}

}  // namespace ringmaster::spec_internal
