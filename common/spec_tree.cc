#include "common/spec_tree.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::spec_internal {
namespace {

// Deeper documents are rejected (a job spec is at most about 5 levels deep).
constexpr int kMaxDepth = 64;
// Most values a document may expand to; aliases (*name) expand to copies,
// so a small hostile file could otherwise blow up ("billion laughs").
constexpr int kMaxNodes = 100000;
// Scalars longer than this are shortened in error messages.
constexpr size_t kMaxShownChars = 60;

absl::Status YamlError(const YAML::Mark& mark, absl::string_view reason) {
  if (mark.is_null()) return absl::InvalidArgumentError(absl::StrCat("malformed YAML: ", reason));
  return absl::InvalidArgumentError(absl::StrCat("malformed YAML at line ", mark.line + 1,
                                                 ", column ", mark.column + 1, ": ", reason));
}

void SetPosition(const YAML::Node& yaml, SpecNode* node) {
  const YAML::Mark mark = yaml.Mark();
  if (mark.is_null()) return;
  node->line = mark.line + 1;
  node->column = mark.column + 1;
}

// Converts a yaml-cpp node; may throw YAML::Exception (caught by the caller).
// `budget` counts down the values still allowed.
absl::StatusOr<SpecNode> Convert(const YAML::Node& yaml, int depth, int* budget) {
  if (depth > kMaxDepth) {
    return YamlError(yaml.Mark(), absl::StrCat("nesting deeper than ", kMaxDepth, " levels"));
  }
  if (--*budget < 0) {
    // No position: an alias's nodes carry the anchor's marks.
    return YamlError(YAML::Mark::null_mark(),
                     absl::StrCat("the document expands to more than ", kMaxNodes, " values"));
  }
  SpecNode node;
  SetPosition(yaml, &node);
  switch (yaml.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      node.kind = SpecNode::Kind::kNull;
      return node;
    case YAML::NodeType::Scalar:
      node.kind = SpecNode::Kind::kScalar;
      node.text = yaml.Scalar();
      // "!" is the tag of a quoted scalar; "!!str" forces a string too.
      node.quoted = yaml.Tag() == "!" || yaml.Tag() == "tag:yaml.org,2002:str";
      return node;
    case YAML::NodeType::Sequence:
      node.kind = SpecNode::Kind::kList;
      for (const YAML::Node& item : yaml) {
        absl::StatusOr<SpecNode> converted = Convert(item, depth + 1, budget);
        if (!converted.ok()) return converted.status();
        node.items.push_back(*std::move(converted));
      }
      return node;
    case YAML::NodeType::Map:
      node.kind = SpecNode::Kind::kMap;
      for (auto it = yaml.begin(); it != yaml.end(); ++it) {
        if (!it->first.IsScalar()) {
          return YamlError(it->first.Mark(), "a mapping key must be a plain name");
        }
        absl::StatusOr<SpecNode> key = Convert(it->first, depth + 1, budget);
        if (!key.ok()) return key.status();
        absl::StatusOr<SpecNode> value = Convert(it->second, depth + 1, budget);
        if (!value.ok()) return value.status();
        node.entries.emplace_back(*std::move(key), *std::move(value));
      }
      return node;
  }
  return YamlError(yaml.Mark(), "unknown node type");
}

bool LooksLikeNumberOrBool(const std::string& text) {
  double value;
  if (absl::SimpleAtod(text, &value) && std::isfinite(value)) return true;
  const std::string lower = absl::AsciiStrToLower(text);
  return lower == "true" || lower == "false";
}

// Records where documents start. YAML::LoadAll cannot be used: on some
// malformed input (a lone ",") yaml-cpp 0.7's parser reports empty
// documents forever, so its loop never ends; ours stops at the second.
class DocumentStarts final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> marks;
};

}  // namespace

absl::StatusOr<SpecNode> ParseYamlTree(absl::string_view text) {
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {
    }
    if (starts.marks.empty()) return SpecNode();
    if (starts.marks.size() > 1) return YamlError(starts.marks[1], "expected one document, found more than one");
    int budget = kMaxNodes;
    return Convert(YAML::Load(std::string(text)), 0, &budget);
  } catch (const YAML::Exception& e) {
    return YamlError(e.mark, e.msg);
  }
}

std::string DescribeNode(const SpecNode& node) {
  switch (node.kind) {
    case SpecNode::Kind::kNull:
      return "null";
    case SpecNode::Kind::kList:
      return "a list";
    case SpecNode::Kind::kMap:
      return "a mapping";
    case SpecNode::Kind::kScalar:
      break;
  }
  if (!node.quoted && LooksLikeNumberOrBool(node.text)) return node.text;
  std::string shown = node.text.size() > kMaxShownChars
                          ? absl::StrCat(node.text.substr(0, kMaxShownChars), "...")
                          : node.text;
  std::string out = "\"";
  for (char c : shown) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string NodeLocation(const SpecNode& node) {
  if (node.line <= 0) return "";
  return absl::StrCat(" (line ", node.line, ", column ", node.column, ")");
}

}  // namespace ringmaster::spec_internal
