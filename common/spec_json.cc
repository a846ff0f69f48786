// A job spec written as JSON, parsed by nlohmann-json (common/json.h) into the
// SpecNode tree the mapper reads. Its SAX interface builds the tree directly,
// so a repeated key reaches the mapper (which reports it by field), and
// numbers keep the text they were written with. Syntax errors carry
// nlohmann's line and column. Its SAX events carry no position, so the input
// is read through an iterator that records how far the parser has read: a
// value starts at the first character after the previous event's token that
// is not whitespace, ',' or ':'.

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "common/spec_tree.h"

namespace ringmaster::spec_internal {
namespace {

// An iterator over the text that records the furthest position read.
class TrackingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* at, size_t* furthest, const char* begin) : at_(at), furthest_(furthest), begin_(begin) {}
  reference operator*() const {
    *furthest_ = std::max(*furthest_, static_cast<size_t>(at_ - begin_) + 1);
    return *at_;
  }
  TrackingIterator& operator++() {
    ++at_;
    return *this;
  }
  bool operator==(const TrackingIterator& o) const { return at_ == o.at_; }
  bool operator!=(const TrackingIterator& o) const { return at_ != o.at_; }

 private:
  const char* at_;
  size_t* furthest_;
  const char* begin_;
};

// 1-based line and column of each byte offset of a text.
class Positions {
 public:
  explicit Positions(absl::string_view text) : text_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') line_starts_.push_back(i + 1);
    }
  }
  // Where the token after `from` starts: past whitespace and separators.
  size_t NextTokenStart(size_t from) const {
    while (from < text_.size() && absl::string_view(" \t\r\n,:").find(text_[from]) != absl::string_view::npos) ++from;
    return from;
  }
  void Locate(size_t offset, SpecNode* node) const {
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    node->line = static_cast<int>(line - line_starts_.begin()) + 1;
    node->column = static_cast<int>(offset - *line) + 1;
  }

 private:
  absl::string_view text_;
  std::vector<size_t> line_starts_;
};

class SpecNodeBuilder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  // `read` is how far the parser has read `text` (TrackingIterator).
  SpecNodeBuilder(absl::string_view text, const size_t* read) : positions_(text), read_(read) {}

  bool null() override { return Value(SpecNode()); }
  bool boolean(bool value) override { return Value(SpecNode::Scalar(value ? "true" : "false")); }
  bool number_integer(number_integer_t value) override { return Value(SpecNode::Scalar(absl::StrCat(value))); }
  bool number_unsigned(number_unsigned_t value) override { return Value(SpecNode::Scalar(absl::StrCat(value))); }
  bool number_float(number_float_t /*value*/, const string_t& text) override {
    return Value(SpecNode::Scalar(text));  // as written: "1e-3" stays "1e-3"
  }
  bool string(string_t& value) override { return Value(SpecNode::Scalar(std::move(value), /*quoted=*/true)); }
  bool binary(binary_t& /*value*/) override { return false; }  // not produced by the text parser
  bool start_object(std::size_t /*elements*/) override {
    SpecNode node;
    node.kind = SpecNode::Kind::kMap;
    Locate(&node);
    open_.push_back(std::move(node));
    return true;
  }
  bool key(string_t& key) override {
    keys_.push_back(SpecNode::Scalar(std::move(key), /*quoted=*/true));
    Locate(&keys_.back());
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*elements*/) override {
    SpecNode node;
    node.kind = SpecNode::Kind::kList;
    Locate(&node);
    open_.push_back(std::move(node));
    return true;
  }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    error_ = JsonSyntaxError(error);
    return false;
  }

  absl::StatusOr<SpecNode> Result() && {
    if (!error_.ok()) return error_;
    return std::move(root_);
  }

 private:
  // The token of the event being handled starts after the previous one's.
  void Locate(SpecNode* node) {
    positions_.Locate(positions_.NextTokenStart(previous_end_), node);
    previous_end_ = *read_;
  }

  // A finished value goes into the innermost open list or map (after its
  // key), or becomes the document.
  bool Value(SpecNode node, bool located = false) {
    if (!located) Locate(&node);
    if (open_.empty()) {
      root_ = std::move(node);
    } else if (open_.back().kind == SpecNode::Kind::kList) {
      open_.back().items.push_back(std::move(node));
    } else {
      open_.back().entries.emplace_back(std::move(keys_.back()), std::move(node));
      keys_.pop_back();
    }
    return true;
  }
  bool Close() {
    SpecNode node = std::move(open_.back());
    open_.pop_back();
    previous_end_ = *read_;  // past the ']' or '}'
    return Value(std::move(node), /*located=*/true);
  }

  const Positions positions_;
  const size_t* read_;
  size_t previous_end_ = 0;     // how far the parser had read at the previous event
  std::vector<SpecNode> open_;  // lists and maps being filled, innermost last
  std::vector<SpecNode> keys_;  // the pending key of each open map
  SpecNode root_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<SpecNode> ParseJsonTree(absl::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == absl::string_view::npos) return SpecNode();  // empty, as for YAML
  size_t read = 0;
  SpecNodeBuilder builder(text, &read);
  nlohmann::json::sax_parse(TrackingIterator(text.data(), &read, text.data()),
                            TrackingIterator(text.data() + text.size(), &read, text.data()), &builder);
  return std::move(builder).Result();
}

}  // namespace ringmaster::spec_internal
