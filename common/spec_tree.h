#ifndef RINGMASTER_COMMON_SPEC_TREE_H_
#define RINGMASTER_COMMON_SPEC_TREE_H_

// The document tree a job spec is parsed into before it is mapped onto the
// JobSpec proto: YAML and JSON both become a SpecNode, so the mapping (and its
// error messages) is the same for both. Internal to //common:spec.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::spec_internal {

// One value of a parsed document, with where it came from.
struct SpecNode {
  enum class Kind { kNull, kScalar, kList, kMap };

  Kind kind = Kind::kNull;
  // kScalar: the value's text, unquoted and unescaped.
  std::string text;
  // kScalar: written as a quoted string ("x" or 'x'); JSON strings are quoted,
  // JSON numbers and true/false are not.
  bool quoted = false;
  // kList: the items, in order.
  std::vector<SpecNode> items;
  // kMap: (key, value) pairs in source order; keys are scalars; duplicates
  // are kept (the mapper reports them).
  std::vector<std::pair<SpecNode, SpecNode>> entries;
  // 1-based source position of the value's first character; 0 when the node
  // was not parsed from a document (a --set value).
  int line = 0;
  int column = 0;

  static SpecNode Scalar(std::string text, bool quoted = false) {
    SpecNode node;
    node.kind = Kind::kScalar;
    node.text = std::move(text);
    node.quoted = quoted;
    return node;
  }
};

// Parses one YAML document. Errors (INVALID_ARGUMENT): "malformed YAML at line
// L, column C: <reason>"; several documents or a non-scalar mapping key are
// errors too. An empty document gives a kNull node.
absl::StatusOr<SpecNode> ParseYamlTree(absl::string_view text);

// Parses one JSON value (RFC 8259; no comments, no trailing commas). Errors
// (INVALID_ARGUMENT): "malformed JSON at line L, column C: <reason>". Empty
// text (or only whitespace) gives a kNull node.
absl::StatusOr<SpecNode> ParseJsonTree(absl::string_view text);

// How a node reads in an error message: a number or true/false as written,
// any other scalar in double quotes, otherwise "a list", "a mapping", "null".
std::string DescribeNode(const SpecNode& node);

// " (line L, column C)" for a node with a source position, "" otherwise.
std::string NodeLocation(const SpecNode& node);

}  // namespace ringmaster::spec_internal

#endif  // RINGMASTER_COMMON_SPEC_TREE_H_
