// SpecSettings (see spec.h): every setting of an effective spec, with where
// its value came from, by walking the JobSpec descriptor.

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec.h"
#include "common/spec_mapper.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace ringmaster {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using spec_internal::JoinPath;

// One element (index; -1: a singular field) of a scalar field, as a spec file
// writes it: numbers, true/false and enum names as protobuf's text format
// prints them, strings unquoted ("" when empty).
std::string ScalarText(const Message& message, const FieldDescriptor& field, int index) {
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    const Reflection& r = *message.GetReflection();
    const std::string text = index >= 0 ? r.GetRepeatedString(message, &field, index) : r.GetString(message, &field);
    return text.empty() ? "\"\"" : text;
  }
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(message, &field, index, &text);
  return text;
}

std::string FieldText(const Message& message, const FieldDescriptor& field) {
  if (!field.is_repeated()) return ScalarText(message, field, -1);
  std::vector<std::string> items;
  const int n = message.GetReflection()->FieldSize(message, &field);
  for (int i = 0; i < n; ++i) items.push_back(ScalarText(message, field, i));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// Whether the user wrote the field: present (explicit presence), non-zero
// (implicit presence) or non-empty (lists).
bool Written(const Message* message, const FieldDescriptor& field) {
  if (message == nullptr) return false;
  const Reflection& r = *message->GetReflection();
  return field.is_repeated() ? r.FieldSize(*message, &field) > 0 : r.HasField(*message, &field);
}

// The entries of a map<string, string> field, by key.
std::vector<std::pair<std::string, std::string>> MapEntries(const Message& message, const FieldDescriptor& field) {
  std::vector<std::pair<std::string, std::string>> entries;
  const Reflection& r = *message.GetReflection();
  const FieldDescriptor* key = field.message_type()->map_key();
  const FieldDescriptor* value = field.message_type()->map_value();
  for (int i = 0; i < r.FieldSize(message, &field); ++i) {
    const Message& entry = r.GetRepeatedMessage(message, &field, i);
    entries.emplace_back(ScalarText(entry, *key, -1), ScalarText(entry, *value, -1));
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

struct Walk {
  const std::set<std::string>* from_set = nullptr;  // paths some --set wrote
  bool known = true;                                // the submitted spec is known
  std::vector<SpecSetting>* out = nullptr;

  void Add(std::string path, std::string value, bool written) {
    SpecSetting::Source source = SpecSetting::Source::kUnknown;
    if (known) {
      source = !written                    ? SpecSetting::Source::kDefault
               : from_set->count(path) > 0 ? SpecSetting::Source::kSet
                                           : SpecSetting::Source::kSpec;
    }
    out->push_back({std::move(path), std::move(value), source});
  }

  // Every setting of `effective` under `prefix`; `submitted` is the same
  // message as submitted (null when it was not written at all).
  void Visit(const Message& effective, const Message* submitted, const std::string& prefix) {
    const google::protobuf::Descriptor& descriptor = *effective.GetDescriptor();
    const Reflection& r = *effective.GetReflection();
    for (int i = 0; i < descriptor.field_count(); ++i) {
      const FieldDescriptor& field = *descriptor.field(i);
      const std::string path = JoinPath(prefix, field.name());
      if (field.is_map()) {
        std::vector<std::pair<std::string, std::string>> written;
        if (submitted != nullptr) written = MapEntries(*submitted, field);
        for (auto& [key, value] : MapEntries(effective, field)) {
          const bool from_user = std::find(written.begin(), written.end(), std::pair(key, value)) != written.end();
          Add(JoinPath(path, key), value, from_user);
        }
      } else if (field.is_repeated()) {
        if (r.FieldSize(effective, &field) > 0) Add(path, FieldText(effective, field), Written(submitted, field));
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!r.HasField(effective, &field)) continue;  // does not apply (a loss scaler for bf16)
        const bool written = Written(submitted, field);
        Visit(r.GetMessage(effective, &field),
                written ? &submitted->GetReflection()->GetMessage(*submitted, &field) : nullptr, path);
      } else if (field.has_presence() && !r.HasField(effective, &field)) {
        continue;  // an option of another kind (momentum for AdamW) or another oneof member
      } else {
        Add(path, FieldText(effective, field), Written(submitted, field));
      }
    }
  }
};

// The leaf paths an assignment writes (into an empty spec); none for a
// malformed one or a `null`.
void CollectSetPaths(const std::string& assignment, std::set<std::string>* paths) {
  v1::JobSpec written;
  if (!ApplyOverride(&written, assignment).ok()) return;
  std::vector<SpecSetting> settings;
  std::set<std::string> none;
  Walk walk{&none, true, &settings};
  walk.Visit(written, &written, "");
  for (const SpecSetting& s : settings) {
    if (s.source != SpecSetting::Source::kDefault) paths->insert(s.path);
  }
}

}  // namespace

std::vector<SpecSetting> SpecSettings(const v1::JobSpec& effective, const v1::JobSpec* submitted,
                                      const std::vector<std::string>& overrides) {
  std::set<std::string> from_set;
  for (const std::string& assignment : overrides) CollectSetPaths(assignment, &from_set);
  std::vector<SpecSetting> settings;
  Walk walk{&from_set, submitted != nullptr, &settings};
  walk.Visit(effective, submitted, "");
  return settings;
}

std::string_view SettingSourceName(SpecSetting::Source source) {
  switch (source) {
    case SpecSetting::Source::kSpec: return "spec";
    case SpecSetting::Source::kSet: return "--set";
    case SpecSetting::Source::kDefault: return "default";
    case SpecSetting::Source::kUnknown: break;
  }
  return "-";
}

}  // namespace ringmaster
