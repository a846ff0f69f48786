#include "common/spec_mapper.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/options.pb.h"

namespace ringmaster::spec_internal {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;

absl::Status FieldError(absl::string_view path, absl::string_view reason, const SpecNode& at) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason, NodeLocation(at)));
}

// How a spec writes an enum value: its alias, else its lowercase name.
std::string EnumSpelling(const EnumValueDescriptor& value) {
  const std::string& alias = value.options().GetExtension(v1::alias);
  return alias.empty() ? absl::AsciiStrToLower(value.name()) : alias;
}

std::string EnumChoices(const EnumDescriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->number() != 0) names.push_back(EnumSpelling(*type.value(i)));
  }
  return absl::StrCat("one of ", absl::StrJoin(names, ", "));
}

// What a scalar field expects, for "expected ..., got ..." messages.
std::string Expected(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return "an integer";
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return "a number";
    case FieldDescriptor::CPPTYPE_BOOL:
      return "true or false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumChoices(*field.enum_type());
    case FieldDescriptor::CPPTYPE_STRING:
      return "a string";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return "a mapping";
  }
  return "a value";
}

// An integer in [min, max] from a scalar ("12", "-3", "1e3", "2.0").
absl::StatusOr<int64_t> ParseSigned(const SpecNode& value, absl::string_view path, int64_t min,
                                    int64_t max) {
  int64_t parsed;
  uint64_t unsigned_parsed;
  double real;
  const std::string range = absl::StrCat("an integer in [", min, ", ", max, "]");
  if (absl::SimpleAtoi(value.text, &parsed)) {
    if (parsed < min || parsed > max)
      return FieldError(path, absl::StrCat("expected ", range, ", got ", value.text), value);
    return parsed;
  }
  if (absl::SimpleAtoi(value.text, &unsigned_parsed)) {
    return FieldError(path, absl::StrCat("expected ", range, ", got ", value.text), value);
  }
  if (absl::SimpleAtod(value.text, &real) && std::isfinite(real)) {
    if (std::trunc(real) != real) {
      return FieldError(path, absl::StrCat("expected an integer, got ", DescribeNode(value)),
                        value);
    }
    if (real < static_cast<double>(min) || real > static_cast<double>(max)) {
      return FieldError(path, absl::StrCat("expected ", range, ", got ", value.text), value);
    }
    return static_cast<int64_t>(real);
  }
  return FieldError(path, absl::StrCat("expected an integer, got ", DescribeNode(value)), value);
}

absl::StatusOr<uint64_t> ParseUnsigned(const SpecNode& value, absl::string_view path,
                                       uint64_t max) {
  uint64_t parsed;
  if (absl::SimpleAtoi(value.text, &parsed) && parsed <= max) return parsed;
  int64_t signed_parsed;
  double real;
  const std::string range = absl::StrCat("an integer in [0, ", max, "]");
  if (absl::SimpleAtoi(value.text, &signed_parsed) || absl::SimpleAtoi(value.text, &parsed)) {
    return FieldError(path, absl::StrCat("expected ", range, ", got ", value.text), value);
  }
  if (absl::SimpleAtod(value.text, &real) && std::isfinite(real)) {
    if (std::trunc(real) != real) {
      return FieldError(path, absl::StrCat("expected an integer, got ", DescribeNode(value)),
                        value);
    }
    if (real < 0 || real >= 18446744073709551616.0 || real > static_cast<double>(max)) {
      return FieldError(path, absl::StrCat("expected ", range, ", got ", value.text), value);
    }
    return static_cast<uint64_t>(real);
  }
  return FieldError(path, absl::StrCat("expected an integer, got ", DescribeNode(value)), value);
}

absl::StatusOr<double> ParseReal(const SpecNode& value, absl::string_view path, double max_abs) {
  double parsed;
  if (!absl::SimpleAtod(value.text, &parsed)) {
    return FieldError(path, absl::StrCat("expected a number, got ", DescribeNode(value)), value);
  }
  if (!std::isfinite(parsed) || std::fabs(parsed) > max_abs) {
    return FieldError(path, absl::StrCat("expected a finite number, got ", DescribeNode(value)),
                      value);
  }
  return parsed;
}

absl::StatusOr<const EnumValueDescriptor*> ParseEnum(const SpecNode& value, absl::string_view path,
                                                     const EnumDescriptor& type) {
  for (int i = 0; i < type.value_count(); ++i) {
    const EnumValueDescriptor& candidate = *type.value(i);
    if (absl::EqualsIgnoreCase(candidate.name(), value.text)) return &candidate;
    const std::string& alias = candidate.options().GetExtension(v1::alias);
    if (!alias.empty() && absl::EqualsIgnoreCase(alias, value.text)) return &candidate;
  }
  int number;
  if (absl::SimpleAtoi(value.text, &number) && type.FindValueByNumber(number) != nullptr) {
    return type.FindValueByNumber(number);
  }
  return FieldError(
      path, absl::StrCat("unknown value ", DescribeNode(value), "; expected ", EnumChoices(type)),
      value);
}

// Sets (or, for a repeated field, appends) one scalar value.
absl::Status SetScalar(const SpecNode& value, absl::string_view path, const FieldDescriptor& field,
                       Message* message) {
  if (value.kind != SpecNode::Kind::kScalar) {
    return FieldError(
        path, absl::StrCat("expected ", Expected(field), ", got ", DescribeNode(value)), value);
  }
  const Reflection& reflection = *message->GetReflection();
  const bool add = field.is_repeated();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      absl::StatusOr<int64_t> parsed = ParseSigned(value, path, std::numeric_limits<int32_t>::min(),
                                                   std::numeric_limits<int32_t>::max());
      if (!parsed.ok()) return parsed.status();
      const int32_t v = static_cast<int32_t>(*parsed);
      add ? reflection.AddInt32(message, &field, v) : reflection.SetInt32(message, &field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      absl::StatusOr<int64_t> parsed = ParseSigned(value, path, std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max());
      if (!parsed.ok()) return parsed.status();
      add ? reflection.AddInt64(message, &field, *parsed)
          : reflection.SetInt64(message, &field, *parsed);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      absl::StatusOr<uint64_t> parsed =
          ParseUnsigned(value, path, std::numeric_limits<uint32_t>::max());
      if (!parsed.ok()) return parsed.status();
      const uint32_t v = static_cast<uint32_t>(*parsed);
      add ? reflection.AddUInt32(message, &field, v) : reflection.SetUInt32(message, &field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      absl::StatusOr<uint64_t> parsed =
          ParseUnsigned(value, path, std::numeric_limits<uint64_t>::max());
      if (!parsed.ok()) return parsed.status();
      add ? reflection.AddUInt64(message, &field, *parsed)
          : reflection.SetUInt64(message, &field, *parsed);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      absl::StatusOr<double> parsed = ParseReal(value, path, DBL_MAX);
      if (!parsed.ok()) return parsed.status();
      add ? reflection.AddDouble(message, &field, *parsed)
          : reflection.SetDouble(message, &field, *parsed);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      absl::StatusOr<double> parsed = ParseReal(value, path, FLT_MAX);
      if (!parsed.ok()) return parsed.status();
      const float v = static_cast<float>(*parsed);
      add ? reflection.AddFloat(message, &field, v) : reflection.SetFloat(message, &field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string lower = absl::AsciiStrToLower(value.text);
      if (lower != "true" && lower != "false") {
        return FieldError(path, absl::StrCat("expected true or false, got ", DescribeNode(value)),
                          value);
      }
      add ? reflection.AddBool(message, &field, lower == "true")
          : reflection.SetBool(message, &field, lower == "true");
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      absl::StatusOr<const EnumValueDescriptor*> parsed =
          ParseEnum(value, path, *field.enum_type());
      if (!parsed.ok()) return parsed.status();
      add ? reflection.AddEnum(message, &field, *parsed)
          : reflection.SetEnum(message, &field, *parsed);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      if (field.type() == FieldDescriptor::TYPE_BYTES) {
        return FieldError(path, "bytes fields are not supported in job specs", value);
      }
      add ? reflection.AddString(message, &field, value.text)
          : reflection.SetString(message, &field, value.text);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return FieldError(path, absl::StrCat("expected a mapping, got ", DescribeNode(value)), value);
}

// A map entry's key as text, to find an existing entry with the same key.
std::string MapKeyText(const Message& entry) {
  const FieldDescriptor& key = *entry.GetDescriptor()->map_key();
  const Reflection& reflection = *entry.GetReflection();
  switch (key.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return reflection.GetString(entry, &key);
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(reflection.GetInt32(entry, &key));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(reflection.GetInt64(entry, &key));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(reflection.GetUInt32(entry, &key));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(reflection.GetUInt64(entry, &key));
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection.GetBool(entry, &key) ? "true" : "false";
    default:
      return "";
  }
}

absl::Status SetMap(const SpecNode& value, absl::string_view path, const FieldDescriptor& field,
                    Message* message) {
  if (value.kind != SpecNode::Kind::kMap) {
    return FieldError(path, absl::StrCat("expected a mapping, got ", DescribeNode(value)), value);
  }
  message->GetReflection()->ClearField(message, &field);
  std::set<std::string> seen;
  for (const auto& [key, entry_value] : value.entries) {
    const std::string entry_path = JoinPath(path, key.text);
    if (!seen.insert(key.text).second) return FieldError(entry_path, "duplicate key", key);
    absl::Status status = SetMapEntry(key, entry_value, entry_path, field, message, /*may_exist=*/false);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status SetList(const SpecNode& value, absl::string_view path, const FieldDescriptor& field,
                     Message* message) {
  if (value.kind != SpecNode::Kind::kList) {
    return FieldError(path, absl::StrCat("expected a list, got ", DescribeNode(value)), value);
  }
  const Reflection& reflection = *message->GetReflection();
  reflection.ClearField(message, &field);
  for (size_t i = 0; i < value.items.size(); ++i) {
    const std::string item_path = absl::StrCat(path, "[", i, "]");
    const SpecNode& item = value.items[i];
    absl::Status status =
        field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE
            ? MapNodeOntoMessage(item, item_path, reflection.AddMessage(message, &field))
            : SetScalar(item, item_path, field, message);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

std::string JoinPath(absl::string_view parent, absl::string_view child) {
  if (parent.empty()) return std::string(child);
  return absl::StrCat(parent, ".", child);
}

const FieldDescriptor* FindFieldByAnyName(const Descriptor& descriptor, absl::string_view name) {
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    if (field->name() == name || field->json_name() == name) return field;
  }
  return nullptr;
}

absl::Status MapNodeOntoMessage(const SpecNode& node, absl::string_view path, Message* message) {
  const std::string shown_path = path.empty() ? "job spec" : std::string(path);
  if (node.kind != SpecNode::Kind::kMap) {
    return FieldError(shown_path, absl::StrCat("expected a mapping, got ", DescribeNode(node)),
                      node);
  }
  const Descriptor& descriptor = *message->GetDescriptor();
  std::set<int> seen_fields;
  absl::flat_hash_map<const OneofDescriptor*, const FieldDescriptor*> seen_oneofs;
  for (const auto& [key, value] : node.entries) {
    const FieldDescriptor* field = FindFieldByAnyName(descriptor, key.text);
    if (field == nullptr) return FieldError(JoinPath(path, key.text), "unknown field", key);
    const std::string field_path = JoinPath(path, field->name());
    if (!seen_fields.insert(field->number()).second) {
      return FieldError(field_path, "duplicate field", key);
    }
    if (const OneofDescriptor* oneof = field->real_containing_oneof(); oneof != nullptr) {
      auto [it, inserted] = seen_oneofs.emplace(oneof, field);
      if (!inserted) {
        std::vector<std::string> members;
        for (int i = 0; i < oneof->field_count(); ++i) members.push_back(oneof->field(i)->name());
        return FieldError(shown_path,
                          absl::StrCat("set only one of ", absl::StrJoin(members, ", "), " (got ",
                                       it->second->name(), " and ", field->name(), ")"),
                          key);
      }
    }
    absl::Status status = SetFieldFromNode(value, field_path, *field, message);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status SetFieldFromNode(const SpecNode& value, absl::string_view path,
                              const FieldDescriptor& field, Message* message) {
  if (value.kind == SpecNode::Kind::kNull) {
    message->GetReflection()->ClearField(message, &field);
    return absl::OkStatus();
  }
  if (field.is_map()) return SetMap(value, path, field, message);
  if (field.is_repeated()) return SetList(value, path, field, message);
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return MapNodeOntoMessage(value, path,
                              message->GetReflection()->MutableMessage(message, &field));
  }
  return SetScalar(value, path, field, message);
}

absl::Status SetMapEntry(const SpecNode& key, const SpecNode& value, absl::string_view path,
                         const FieldDescriptor& field, Message* message, bool may_exist) {
  const Reflection& reflection = *message->GetReflection();
  std::unique_ptr<Message> entry(
      reflection.GetMessageFactory()->GetPrototype(field.message_type())->New());
  const Descriptor& entry_type = *field.message_type();
  absl::Status status = SetScalar(key, path, *entry_type.map_key(), entry.get());
  if (!status.ok()) return status;
  if (value.kind == SpecNode::Kind::kNull) {
    return FieldError(
        path, absl::StrCat("expected ", Expected(*entry_type.map_value()), ", got null"), value);
  }
  status = SetFieldFromNode(value, path, *entry_type.map_value(), entry.get());
  if (!status.ok()) return status;
  const std::string key_text = may_exist ? MapKeyText(*entry) : "";
  for (int i = 0; may_exist && i < reflection.FieldSize(*message, &field); ++i) {
    Message* existing = reflection.MutableRepeatedMessage(message, &field, i);
    if (MapKeyText(*existing) == key_text) {
      existing->CopyFrom(*entry);
      return absl::OkStatus();
    }
  }
  reflection.AddMessage(message, &field)->CopyFrom(*entry);
  return absl::OkStatus();
}

}  // namespace ringmaster::spec_internal
