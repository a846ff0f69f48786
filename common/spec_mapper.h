#ifndef RINGMASTER_COMMON_SPEC_MAPPER_H_
#define RINGMASTER_COMMON_SPEC_MAPPER_H_

// Maps a parsed document (SpecNode) onto a protobuf message by walking its
// descriptor, following protobuf's JSON mapping: fields by their proto name
// or lowerCamelCase JSON name, enum values by name (case-insensitively, or by
// the ringmaster.v1.alias option, or by number), numbers from numbers or
// numeric strings, null leaving a field unset. Unlike the stock JSON parser,
// every error is INVALID_ARGUMENT naming the field path and the reason, with
// the source position when the node has one:
//   optimizer.lr: expected a number, got "fast" (line 7, column 7)
// Well-known types and bytes fields are not supported (JobSpec has none).
// Internal to //common:spec.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/spec_tree.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ringmaster::spec_internal {

// "a.b" from ("a", "b"); "b" from ("", "b").
std::string JoinPath(absl::string_view parent, absl::string_view child);

// The field named `name` (proto name or JSON name), or nullptr.
const google::protobuf::FieldDescriptor* FindFieldByAnyName(
    const google::protobuf::Descriptor& descriptor, absl::string_view name);

// Merges a kMap node into `message`: each entry sets one field (replacing
// lists and maps wholesale). `path` is the message's own field path ("" for
// the root). Unknown fields, duplicate fields and two members of one oneof
// are errors.
absl::Status MapNodeOntoMessage(const SpecNode& node, absl::string_view path,
                                google::protobuf::Message* message);

// Sets `field` of `message` from `value`, as the field's type requires (a
// scalar, a list for repeated fields, a mapping for messages and maps; null
// clears the field). `path` names the field in errors.
absl::Status SetFieldFromNode(const SpecNode& value, absl::string_view path,
                              const google::protobuf::FieldDescriptor& field,
                              google::protobuf::Message* message);

// Sets one entry of the map field `field`, replacing an entry with the same
// key (looked for only when `may_exist`: the search is linear in the entries,
// so a caller that knows the key is new, as a whole mapping does, says so and
// a mapping of n entries costs O(n), not O(n^2)). `path` names the entry
// ("labels.team") in errors.
absl::Status SetMapEntry(const SpecNode& key, const SpecNode& value, absl::string_view path,
                         const google::protobuf::FieldDescriptor& field,
                         google::protobuf::Message* message, bool may_exist = true);

}  // namespace ringmaster::spec_internal

#endif  // RINGMASTER_COMMON_SPEC_MAPPER_H_
