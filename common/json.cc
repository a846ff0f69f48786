#include "common/json.h"

#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace ringmaster {

absl::Status JsonSyntaxError(const nlohmann::json::exception& e) {
  // "[json.exception.parse_error.101] parse error at line 2, column 29: syntax error ..."
  absl::string_view what = e.what();
  if (const size_t at = what.find(" at line "); at != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON", what.substr(at)));
  }
  if (const size_t bracket = what.find("] "); bracket != absl::string_view::npos) what.remove_prefix(bracket + 2);
  return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", what));
}

absl::StatusOr<nlohmann::ordered_json> ParseJson(absl::string_view text) {
  // The keys of every object being parsed, innermost last.
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  using Event = nlohmann::ordered_json::parse_event_t;
  auto strict = [&](int /*depth*/, Event event, nlohmann::ordered_json& parsed) {
    switch (event) {
      case Event::object_start:
        keys.emplace_back();
        break;
      case Event::object_end:
        keys.pop_back();
        break;
      case Event::key:
        if (!keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
          repeated = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    nlohmann::ordered_json value = nlohmann::ordered_json::parse(text.begin(), text.end(), strict);
    if (!repeated.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("malformed JSON: an object repeats the key \"", repeated, "\""));
    }
    return value;
  } catch (const nlohmann::json::exception& e) {
    return JsonSyntaxError(e);
  }
}

absl::StatusOr<std::string> JsonQuote(absl::string_view s) {
  if (!IsValidUtf8(s)) return absl::InvalidArgumentError("a JSON string must be valid UTF-8");
  return nlohmann::json(std::string(s)).dump();
}

}  // namespace ringmaster
