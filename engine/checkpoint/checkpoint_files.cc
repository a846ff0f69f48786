#include "engine/checkpoint/checkpoint_files.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "common/utf8.h"

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
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const ManifestEntry& file : manifest.files) {
    files.push_back({{"name", file.name}, {"size", file.size}, {"sha256", file.sha256}});
  }
  const nlohmann::ordered_json json = {{"format", kManifestFormat}, {"step", manifest.step}, {"files", files}};
  // File names are plain, UTF-8 names the trainer chose; a stray byte is
  // replaced rather than thrown.
  return json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text, absl::string_view path) {
  absl::StatusOr<nlohmann::ordered_json> json = ParseJson(text);
  if (!json.ok()) return Corrupt(path, json.status().message());
  if (!json->is_object()) return Corrupt(path, "not a JSON object");
  const auto format = json->find("format");
  const auto step = json->find("step");
  const auto files = json->find("files");
  if (format == json->end() || !format->is_string() || format->get<std::string>() != kManifestFormat) {
    return Corrupt(path, absl::StrFormat("\"format\" is not \"%s\"", kManifestFormat));
  }
  if (step == json->end() || !step->is_number_integer() || step->get<int64_t>() < 0) {
    return Corrupt(path, "\"step\" is not a non-negative integer");
  }
  if (files == json->end() || !files->is_array()) return Corrupt(path, "\"files\" is not an array");
  Manifest manifest;
  manifest.step = step->get<int64_t>();
  std::set<std::string> names;
  for (const nlohmann::ordered_json& file : *files) {
    const bool ok = file.is_object() && file.contains("name") && file["name"].is_string() &&
                    IsPlainFileName(file["name"].get<std::string>()) &&
                    names.insert(file["name"].get<std::string>()).second && file.contains("size") &&
                    file["size"].is_number_integer() && file["size"].get<int64_t>() >= 0 && file.contains("sha256") &&
                    file["sha256"].is_string() && IsLowerHexSha256(file["sha256"].get<std::string>());
    if (!ok) {
      return Corrupt(path,
                     "a \"files\" entry is not {\"name\": <unique file name>, \"size\": <bytes>, "
                     "\"sha256\": <64 lower-case hex digits>}");
    }
    manifest.files.push_back(
        {file["name"].get<std::string>(), file["size"].get<int64_t>(), file["sha256"].get<std::string>()});
  }
  return manifest;
}

absl::StatusOr<std::string> SerializeState(const StateMap& state) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& [key, value] : state) {
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return absl::InvalidArgumentError("a state key or value is not valid UTF-8");
    }
    json[key] = value;
  }
  return json.dump(2) + "\n";
}

absl::StatusOr<StateMap> ParseState(absl::string_view text, absl::string_view path) {
  absl::StatusOr<nlohmann::ordered_json> json = ParseJson(text);
  if (!json.ok()) return Corrupt(path, json.status().message());
  if (!json->is_object()) return Corrupt(path, "not a JSON object");
  StateMap state;
  for (const auto& [key, value] : json->items()) {
    if (!value.is_string()) {
      return Corrupt(path, absl::StrFormat("the value of %s is not a string", nlohmann::ordered_json(key).dump()));
    }
    state[key] = value.get<std::string>();
  }
  return state;
}

}  // namespace ringmaster::engine
