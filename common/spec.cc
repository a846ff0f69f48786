// Parsing, loading and --set overrides of job specs (see spec.h). Defaults
// live in spec_defaults.cc, validation in spec_validate*.cc.

#include "common/spec.h"

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/spec_mapper.h"
#include "common/spec_tree.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using spec_internal::FindFieldByAnyName;
using spec_internal::JoinPath;
using spec_internal::SpecNode;

// Debian's Abseil has its own string_view type; the public API takes the
// standard one.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Spec files are small; a larger file is almost certainly the wrong file.
constexpr size_t kMaxSpecFileBytes = 16 << 20;

absl::Status WithPrefix(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status WithSuffix(const absl::Status& status, absl::string_view suffix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), suffix));
}

// The field an assignment sets, lower case without '_' ("lrschedule.warmupsteps"), so
// that proto and JSON names compare equal.
std::string SetKey(absl::string_view assignment) {
  std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(assignment.substr(0, assignment.find('='))));
  key.erase(std::remove(key.begin(), key.end(), '_'), key.end());
  return key;
}

absl::StatusOr<v1::JobSpec> Overridden(v1::JobSpec spec, const std::vector<std::string>& overrides) {
  const std::string name = spec.name();
  RETURN_IF_ERROR(ApplyOverrides(&spec, overrides));
  if (spec.name().empty()) spec.set_name(name);  // as ReadJobSpecFile names it
  return spec;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
    if (contents.size() > kMaxSpecFileBytes) {
      std::fclose(file);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", kMaxSpecFileBytes >> 20, " MiB; not a job spec"));
    }
  }
  const bool failed = std::ferror(file) != 0;
  const int read_errno = errno;
  std::fclose(file);
  if (failed) return absl::ErrnoToStatus(read_errno, absl::StrCat("cannot read ", path));
  return contents;
}

// "runs/My Job.v2.yaml" -> "My-Job.v2": the base name without its extension,
// reduced to the characters JobSpec.name allows.
std::string NameFromPath(absl::string_view path) {
  absl::string_view base = path.substr(path.find_last_of('/') + 1);
  base = base.substr(0, base.find_last_of('.'));
  std::string name;
  for (char c : base) {
    const bool allowed =
        absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (name.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    name += allowed ? c : '-';
  }
  return name.substr(0, 63);
}

// A --set value as a scalar node: surrounding matching quotes are removed;
// a bare `null` is a null node (resets the field).
SpecNode ScalarFromText(absl::string_view text) {
  if (text == "null") return SpecNode();
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
      text.back() == text.front()) {
    return SpecNode::Scalar(std::string(text.substr(1, text.size() - 2)), /*quoted=*/true);
  }
  return SpecNode::Scalar(std::string(text));
}

// A --set value for a repeated field: "a,b", "[a, b]", "" or "[]"; a bare
// `null` is a null node.
SpecNode ListFromText(absl::string_view text) {
  if (text == "null") return SpecNode();
  SpecNode list;
  list.kind = SpecNode::Kind::kList;
  text = absl::StripAsciiWhitespace(text);
  if (absl::StartsWith(text, "[") && absl::EndsWith(text, "]")) {
    text = absl::StripAsciiWhitespace(text.substr(1, text.size() - 2));
  }
  if (text.empty()) return list;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    list.items.push_back(ScalarFromText(absl::StripAsciiWhitespace(item)));
  }
  return list;
}

// Removes the entry `key` from the string-keyed map `field`, if present.
void RemoveMapEntry(absl::string_view key, const FieldDescriptor& field, Message* message) {
  const google::protobuf::Reflection& reflection = *message->GetReflection();
  const FieldDescriptor& key_field = *field.message_type()->map_key();
  if (key_field.cpp_type() != FieldDescriptor::CPPTYPE_STRING) return;  // JobSpec has none
  const int size = reflection.FieldSize(*message, &field);
  for (int i = 0; i < size; ++i) {
    const Message& entry = reflection.GetRepeatedMessage(*message, &field, i);
    if (entry.GetReflection()->GetString(entry, &key_field) == key) {
      reflection.SwapElements(message, &field, i, size - 1);
      reflection.RemoveLast(message, &field);
      return;
    }
  }
}

// Applies `key`=`value` to `spec` (no error context added).
absl::Status SetPath(absl::string_view key, absl::string_view value, v1::JobSpec* spec) {
  const std::vector<std::string> segments = absl::StrSplit(key, '.');
  Message* message = spec;
  std::string path;
  for (size_t i = 0; i < segments.size(); ++i) {
    const FieldDescriptor* field = FindFieldByAnyName(*message->GetDescriptor(), segments[i]);
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(JoinPath(path, segments[i]), ": unknown field"));
    }
    path = JoinPath(path, field->name());
    const bool last = i + 1 == segments.size();
    if (field->is_map()) {
      if (last) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": is a map; set one entry (", path, ".<key>=value)"));
      }
      const std::string map_key = absl::StrJoin(segments.begin() + i + 1, segments.end(), ".");
      const SpecNode value_node = ScalarFromText(value);
      if (value_node.kind == SpecNode::Kind::kNull) {
        RemoveMapEntry(map_key, *field, message);
        return absl::OkStatus();
      }
      return spec_internal::SetMapEntry(SpecNode::Scalar(map_key), value_node,
                                        JoinPath(path, map_key), *field, message);
    }
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (last) {
      if (is_message) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": is a message; set one of its fields (", path, ".<field>=value)"));
      }
      const SpecNode value_node =
          field->is_repeated() ? ListFromText(value) : ScalarFromText(value);
      return spec_internal::SetFieldFromNode(value_node, path, *field, message);
    }
    if (!is_message || field->is_repeated()) {
      return absl::InvalidArgumentError(absl::StrCat(JoinPath(path, segments[i + 1]),
                                                     ": unknown field (", path, " has no fields)"));
    }
    message = message->GetReflection()->MutableMessage(message, field);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SpecFormat> SpecFormatFromPath(std::string_view path) {
  const std::string lower = absl::AsciiStrToLower(AbslView(path));
  if (absl::EndsWith(lower, ".yaml") || absl::EndsWith(lower, ".yml")) return SpecFormat::kYaml;
  if (absl::EndsWith(lower, ".json")) return SpecFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat(AbslView(path),
                   ": unknown job spec format; the file name must end in .yaml, .yml "
                   "or .json"));
}

absl::StatusOr<v1::JobSpec> ParseJobSpec(std::string_view std_text, SpecFormat format) {
  const absl::string_view text = AbslView(std_text);
  ASSIGN_OR_RETURN(const SpecNode root, format == SpecFormat::kYaml
                                            ? spec_internal::ParseYamlTree(text)
                                            : spec_internal::ParseJsonTree(text));
  if (root.kind == SpecNode::Kind::kNull) {
    return absl::InvalidArgumentError("job spec: the document is empty");
  }
  v1::JobSpec spec;
  RETURN_IF_ERROR(spec_internal::MapNodeOntoMessage(root, "", &spec));
  return spec;
}

absl::Status ApplyOverride(v1::JobSpec* spec, std::string_view std_assignment) {
  const absl::string_view assignment = AbslView(std_assignment);
  const std::string context = absl::StrCat(" (in --set \"", assignment, "\")");
  const size_t equals = assignment.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing '=' in --set \"", assignment, "\"; expected key.path=value"));
  }
  const absl::string_view key = absl::StripAsciiWhitespace(assignment.substr(0, equals));
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty key in --set \"", assignment, "\"; expected key.path=value"));
  }
  // Work on a copy so that a failed assignment leaves `spec` unchanged (setting
  // a oneof member clears its siblings before the value is checked).
  v1::JobSpec updated = *spec;
  RETURN_IF_ERROR(WithSuffix(SetPath(key, assignment.substr(equals + 1), &updated), context));
  *spec = std::move(updated);
  return absl::OkStatus();
}

namespace {

// A program's relative working_dir is taken against the spec file's
// directory: the worker runs the program on a node, where the CLI's current
// directory means nothing.
void AnchorWorkingDir(const std::string& spec_path, v1::JobSpec* spec) {
  if (!spec->has_program()) return;
  const std::string& dir = spec->program().working_dir();
  if (dir.empty() || dir[0] == '/') return;
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::absolute(spec_path, ec).parent_path();
  if (ec) return;  // validation then names the relative path
  std::string anchored = (base / dir).lexically_normal().string();
  if (anchored.size() > 1 && anchored.back() == '/') anchored.pop_back();
  spec->mutable_program()->set_working_dir(anchored);
}

}  // namespace

absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(const SpecFormat format, SpecFormatFromPath(path));
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  absl::StatusOr<v1::JobSpec> parsed = ParseJobSpec(text, format);
  if (!parsed.ok()) return WithPrefix(absl::StrCat(path, ": "), parsed.status());
  v1::JobSpec spec = *std::move(parsed);
  RETURN_IF_ERROR(ApplyOverrides(&spec, overrides));
  if (spec.name().empty()) spec.set_name(NameFromPath(path));
  AnchorWorkingDir(path, &spec);
  return spec;
}

absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path, const std::vector<std::string>& overrides,
                                            bool validate) {
  ASSIGN_OR_RETURN(v1::JobSpec spec, ReadJobSpecFile(path, overrides));
  ApplyDefaults(&spec);
  if (!validate) return spec;
  if (absl::Status valid = ValidateJobSpec(spec); !valid.ok()) {
    absl::StatusOr<v1::JobSpec> written = ReadJobSpecFile(path);
    absl::Status blamed = written.ok() ? ValidateOverridden(*written, path, overrides) : absl::OkStatus();
    // OK only if the file changed between the two reads.
    return blamed.ok() ? WithPrefix(absl::StrCat(path, ": "), valid) : blamed;
  }
  return spec;
}

absl::Status ApplyOverrides(v1::JobSpec* spec, const std::vector<std::string>& overrides) {
  bool steps_set = false;
  bool warmup_set = false;
  for (const std::string& assignment : overrides) {
    RETURN_IF_ERROR(ApplyOverride(spec, assignment));
    const std::string key = SetKey(assignment);
    steps_set = steps_set || key == "training.steps";
    warmup_set = warmup_set || key == "lrschedule.warmupsteps";
  }
  if (steps_set && !warmup_set && spec->training().has_steps() &&
      spec->lr_schedule().warmup_steps() >= spec->training().steps()) {
    // The spec's warm-up was written for a longer run: a --set that shortens
    // the run shortens its warm-up to a tenth of it.
    spec->mutable_lr_schedule()->set_warmup_steps(spec->training().steps() / 10);
  }
  return absl::OkStatus();
}

absl::Status ValidateOverridden(const v1::JobSpec& written, std::string_view origin,
                                const std::vector<std::string>& overrides) {
  absl::StatusOr<v1::JobSpec> spec = Overridden(written, overrides);
  if (!spec.ok()) return spec.status();
  absl::Status valid = ValidateJobSpec(*spec);
  if (valid.ok()) return valid;
  if (overrides.empty() || !ValidateJobSpec(written).ok()) return WithPrefix(absl::StrCat(AbslView(origin), ": "), valid);
  // The spec alone is valid: name the assignments without which it would be.
  std::vector<std::string> culprits;
  for (size_t i = 0; i < overrides.size(); ++i) {
    std::vector<std::string> others = overrides;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    absl::StatusOr<v1::JobSpec> without = Overridden(written, others);
    if (without.ok() && ValidateJobSpec(*without).ok()) culprits.push_back(overrides[i]);
  }
  if (culprits.empty()) culprits = overrides;
  return WithSuffix(valid, absl::StrCat(" (after --set \"", absl::StrJoin(culprits, "\" --set \""), "\"; ",
                                        AbslView(origin), " alone is valid)"));
}

}  // namespace ringmaster
