#include "engine/checkpoint/checkpoint_files.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/checkpoint/json.h"

namespace ringmaster::engine {
namespace {

absl::Status Corrupt(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

bool IsLowerHexSha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string SerializeManifest(const Manifest& manifest) {
  std::vector<std::string> files;
  for (const ManifestEntry& file : manifest.files) {
    files.push_back(absl::StrFormat("    {\"name\": %s, \"size\": %d, \"sha256\": %s}", JsonQuote(file.name), file.size,
                                    JsonQuote(file.sha256)));
  }
  return absl::StrFormat("{\n  \"format\": %s,\n  \"step\": %d,\n  \"files\": [\n%s\n  ]\n}\n",
                         JsonQuote(kManifestFormat), manifest.step, absl::StrJoin(files, ",\n"));
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text, absl::string_view path) {
  absl::StatusOr<JsonValue> json = ParseJson(text);
  if (!json.ok()) return Corrupt(path, json.status().message());
  const JsonValue* format = json->Find("format");
  const JsonValue* step = json->Find("step");
  const JsonValue* files = json->Find("files");
  if (format == nullptr || format->type != JsonValue::Type::kString || format->string != kManifestFormat) {
    return Corrupt(path, absl::StrFormat("\"format\" is not %s", JsonQuote(kManifestFormat)));
  }
  if (step == nullptr || !step->is_integer || step->integer < 0) {
    return Corrupt(path, "\"step\" is not a non-negative integer");
  }
  if (files == nullptr || files->type != JsonValue::Type::kArray) return Corrupt(path, "\"files\" is not an array");
  Manifest manifest;
  manifest.step = step->integer;
  std::set<std::string> names;
  for (const JsonValue& file : files->array) {
    const JsonValue* name = file.Find("name");
    const JsonValue* size = file.Find("size");
    const JsonValue* sha = file.Find("sha256");
    if (name == nullptr || name->type != JsonValue::Type::kString || !IsPlainFileName(name->string) ||
        !names.insert(name->string).second || size == nullptr || !size->is_integer || size->integer < 0 ||
        sha == nullptr || sha->type != JsonValue::Type::kString || !IsLowerHexSha256(sha->string)) {
      return Corrupt(path,
                     "a \"files\" entry is not {\"name\": <unique file name>, \"size\": <bytes>, "
                     "\"sha256\": <64 lower-case hex digits>}");
    }
    manifest.files.push_back({name->string, size->integer, sha->string});
  }
  return manifest;
}

absl::StatusOr<std::string> SerializeState(const StateMap& state) {
  std::vector<std::string> items;
  for (const auto& [key, value] : state) {
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return absl::InvalidArgumentError("a state key or value is not valid UTF-8");
    }
    items.push_back(absl::StrCat("  ", JsonQuote(key), ": ", JsonQuote(value)));
  }
  if (items.empty()) return std::string("{}\n");
  return absl::StrCat("{\n", absl::StrJoin(items, ",\n"), "\n}\n");
}

absl::StatusOr<StateMap> ParseState(absl::string_view text, absl::string_view path) {
  absl::StatusOr<JsonValue> json = ParseJson(text);
  if (!json.ok()) return Corrupt(path, json.status().message());
  if (json->type != JsonValue::Type::kObject) return Corrupt(path, "not a JSON object");
  StateMap state;
  for (const auto& [key, value] : json->object) {
    if (value.type != JsonValue::Type::kString) {
      return Corrupt(path, absl::StrFormat("the value of %s is not a string", JsonQuote(key)));
    }
    state[key] = value.string;
  }
  return state;
}

}  // namespace ringmaster::engine
