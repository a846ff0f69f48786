#include "coordinator/core/queue_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/spec_limits.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {
namespace {

constexpr absl::string_view kEveryUser = "*";
constexpr absl::string_view kUnlimitedWord = "unlimited";

std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// Text from the file, quoted into a message: escaped and cut to 64 bytes.
std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return absl::StrCat("\"", absl::CEscape(text), "\"");
  return absl::StrCat("\"", absl::CEscape(text.substr(0, kShown)), "...\" (", text.size(), " bytes)");
}

std::string TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return Shown(node.Scalar());
    default:
      return "nothing";
  }
}

// "1d12h" is not accepted: days only as a whole "<number>d", the common case
// of a half-life; everything else as absl::ParseDuration ("36h", "90m", "inf").
bool ParseHalfLife(absl::string_view text, absl::Duration* out) {
  absl::string_view days = text;
  double count = 0;
  if (absl::ConsumeSuffix(&days, "d") && absl::SimpleAtod(days, &count) && std::isfinite(count)) {
    *out = absl::Hours(24) * count;
    return true;
  }
  return absl::ParseDuration(text, out);
}

// A user name as the token file has it: one whitespace-free word.
bool ValidUserName(absl::string_view name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isspace(static_cast<unsigned char>(c)) || absl::ascii_iscntrl(static_cast<unsigned char>(c));
  });
}

bool ValidQueueName(absl::string_view name) {
  return !name.empty() && name.size() <= kMaxLabelKeyBytes && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' || c == '-';
  });
}

}  // namespace

// Turns the YAML tree into a QueueConfig, checking as it goes. Every error
// names the origin, the field path and the line.
class QueueConfigParser {
 public:
  explicit QueueConfigParser(std::string origin) : origin_(std::move(origin)) {}

  absl::StatusOr<QueueConfig> Parse(const YAML::Node& root) {
    if (root.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(origin_, ": the file is empty; it needs `queues`"));
    }
    ASSIGN_OR_RETURN(auto fields, Fields(root, "", {"fair_share", "queues", "default_queues"}));
    QueueConfig config;
    if (fields.count("fair_share")) RETURN_IF_ERROR(ParseFairShare(fields["fair_share"], &config.fair_share_));
    if (!fields.count("queues")) return Error("queues", "required", root);
    RETURN_IF_ERROR(ParseQueues(fields["queues"], &config));
    if (fields.count("default_queues")) RETURN_IF_ERROR(ParseDefaults(fields["default_queues"], &config));
    return config;
  }

 private:
  using FieldMap = std::map<std::string, YAML::Node>;

  absl::Status Error(absl::string_view path, absl::string_view reason, const YAML::Node& at) const {
    std::string where;
    if (!at.Mark().is_null()) where = absl::StrCat(" (line ", at.Mark().line + 1, ")");
    return absl::InvalidArgumentError(
        absl::StrCat(origin_, ": ", path.empty() ? "" : absl::StrCat(path, ": "), reason, where));
  }

  // A mapping's entries by key; any key not in `allowed`, or given twice, is
  // an error.
  absl::StatusOr<FieldMap> Fields(const YAML::Node& node, const std::string& path,
                                  std::initializer_list<absl::string_view> allowed) const {
    if (!node.IsMap()) return Error(path, absl::StrCat("expected a mapping, got ", TypeName(node)), node);
    FieldMap fields;
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      const std::string name = key.IsScalar() ? key.Scalar() : "";
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        return Error(Join(path, name),
                     absl::StrCat("unknown key (expected one of: ", absl::StrJoin(allowed, ", "), ")"), key);
      }
      if (!fields.emplace(name, entry.second).second) return Error(Join(path, name), "given twice", key);
    }
    return fields;
  }

  absl::StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& path, absl::string_view what) const {
    if (!node.IsScalar()) return Error(path, absl::StrCat("expected ", what, ", got ", TypeName(node)), node);
    return node.Scalar();
  }

  // A quota: a whole number in [0, kMaxFinite], or "unlimited".
  absl::StatusOr<int64_t> Count(const YAML::Node& node, const std::string& path) const {
    ASSIGN_OR_RETURN(std::string text, Scalar(node, path, "an integer or \"unlimited\""));
    if (text == kUnlimitedWord) return QueueResources::kUnlimited;
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) {
      return Error(path, absl::StrCat("expected an integer or \"unlimited\", got ", Shown(text)), node);
    }
    if (value < 0) return Error(path, absl::StrCat("must be >= 0, got ", value), node);
    if (value > QueueResources::kMaxFinite) {
      return Error(path, absl::StrCat("must be <= ", QueueResources::kMaxFinite, " or \"unlimited\", got ", value),
                   node);
    }
    return value;
  }

  absl::StatusOr<double> Positive(const YAML::Node& node, const std::string& path) const {
    ASSIGN_OR_RETURN(std::string text, Scalar(node, path, "a number"));
    double value = 0;
    if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
      return Error(path, absl::StrCat("expected a number, got ", Shown(text)), node);
    }
    if (value <= 0) return Error(path, absl::StrCat("must be > 0, got ", text), node);
    return value;
  }

  absl::Status ParseFairShare(const YAML::Node& node, FairShareConfig* out) const {
    ASSIGN_OR_RETURN(auto fields, Fields(node, "fair_share", {"half_life", "cpu_slot_weight"}));
    if (fields.count("half_life")) {
      const YAML::Node& value = fields["half_life"];
      ASSIGN_OR_RETURN(std::string text, Scalar(value, "fair_share.half_life", "a duration"));
      if (!ParseHalfLife(text, &out->half_life)) {
        return Error("fair_share.half_life",
                     absl::StrCat("expected a duration such as 7d, 36h or inf, got ", Shown(text)), value);
      }
      if (out->half_life <= absl::ZeroDuration()) {
        return Error("fair_share.half_life", absl::StrCat("must be > 0, got ", text), value);
      }
    }
    if (fields.count("cpu_slot_weight")) {
      ASSIGN_OR_RETURN(out->cpu_slot_weight, Positive(fields["cpu_slot_weight"], "fair_share.cpu_slot_weight"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseQueues(const YAML::Node& node, QueueConfig* config) const {
    if (!node.IsSequence() || node.size() == 0) {
      return Error("queues", absl::StrCat("expected a list of at least one queue, got ", TypeName(node)), node);
    }
    std::map<std::string, size_t> index;  // name -> position, for duplicates
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string path = absl::StrCat("queues[", i, "]");
      ASSIGN_OR_RETURN(Queue queue, ParseQueue(node[i], path));
      const auto [it, added] = index.emplace(queue.name, i);
      if (!added) {
        return Error(path + ".name",
                     absl::StrCat("duplicate queue \"", queue.name, "\" (also queues[", it->second, "])"),
                     node[i]["name"]);
      }
      config->queues_.push_back(std::move(queue));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Queue> ParseQueue(const YAML::Node& node, const std::string& path) const {
    ASSIGN_OR_RETURN(auto fields,
                     Fields(node, path, {"name", "members", "nominal", "borrowing_limit", "weight", "preemption"}));
    for (const char* required : {"name", "members", "nominal"}) {
      if (!fields.count(required)) return Error(Join(path, required), "required", node);
    }
    Queue queue;
    ASSIGN_OR_RETURN(queue.name, Scalar(fields["name"], Join(path, "name"), "a name"));
    if (!ValidQueueName(queue.name)) {
      return Error(
          Join(path, "name"),
          absl::StrCat(Shown(queue.name), " must be 1 to ", kMaxLabelKeyBytes, " characters of [A-Za-z0-9._/-]"),
          fields["name"]);
    }
    ASSIGN_OR_RETURN(queue.members, ParseMembers(fields["members"], Join(path, "members")));
    queue.nominal = QueueResources{};
    RETURN_IF_ERROR(ParseResources(fields["nominal"], Join(path, "nominal"), &queue.nominal));
    if (fields.count("borrowing_limit")) {
      RETURN_IF_ERROR(ParseResources(fields["borrowing_limit"], Join(path, "borrowing_limit"), &queue.borrowing_limit));
    }
    if (fields.count("weight")) {
      ASSIGN_OR_RETURN(queue.weight, Positive(fields["weight"], Join(path, "weight")));
    }
    if (fields.count("preemption")) {
      ASSIGN_OR_RETURN(queue.preempt_within_queue, ParsePreemption(fields["preemption"], Join(path, "preemption")));
    }
    return queue;
  }

  absl::StatusOr<std::vector<std::string>> ParseMembers(const YAML::Node& node, const std::string& path) const {
    if (!node.IsSequence() || node.size() == 0) {
      return Error(path, absl::StrCat("expected a list of user names or \"*\", got ", TypeName(node)), node);
    }
    std::vector<std::string> members;
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item = absl::StrCat(path, "[", i, "]");
      ASSIGN_OR_RETURN(std::string name, Scalar(node[i], item, "a user name"));
      if (!ValidUserName(name)) {
        return Error(item, absl::StrCat(Shown(name), " is not a user name (one word, no spaces)"), node[i]);
      }
      if (std::find(members.begin(), members.end(), name) != members.end()) {
        return Error(item, absl::StrCat("\"", name, "\" listed twice"), node[i]);
      }
      members.push_back(std::move(name));
    }
    return members;
  }

  // Fields absent from the mapping keep the value `out` has on entry.
  absl::Status ParseResources(const YAML::Node& node, const std::string& path, QueueResources* out) const {
    ASSIGN_OR_RETURN(auto fields, Fields(node, path, {"gpus", "cpu_slots"}));
    if (fields.count("gpus")) {
      ASSIGN_OR_RETURN(out->gpus, Count(fields["gpus"], Join(path, "gpus")));
    }
    if (fields.count("cpu_slots")) {
      ASSIGN_OR_RETURN(out->cpu_slots, Count(fields["cpu_slots"], Join(path, "cpu_slots")));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> ParsePreemption(const YAML::Node& node, const std::string& path) const {
    ASSIGN_OR_RETURN(auto fields, Fields(node, path, {"within_queue"}));
    if (!fields.count("within_queue")) return false;
    const std::string field = Join(path, "within_queue");
    ASSIGN_OR_RETURN(std::string text, Scalar(fields["within_queue"], field, "true or false"));
    bool value = false;
    if (!YAML::convert<bool>::decode(fields["within_queue"], value)) {
      return Error(field, absl::StrCat("expected true or false, got ", Shown(text)), fields["within_queue"]);
    }
    return value;
  }

  absl::Status ParseDefaults(const YAML::Node& node, QueueConfig* config) const {
    if (!node.IsMap()) return Error("default_queues", absl::StrCat("expected a mapping, got ", TypeName(node)), node);
    for (const auto& entry : node) {
      const std::string user = entry.first.IsScalar() ? entry.first.Scalar() : "";
      const std::string path = Join("default_queues", user);
      if (!ValidUserName(user) || user == kEveryUser)
        return Error(path, "expected a user name as the key", entry.first);
      ASSIGN_OR_RETURN(std::string name, Scalar(entry.second, path, "a queue name"));
      const Queue* queue = config->Find(name);
      if (queue == nullptr) {
        return Error(path, absl::StrCat("unknown queue ", Shown(name), " (queues: ", config->QueueNames(), ")"),
                     entry.second);
      }
      if (!queue->HasMember(user)) {
        return Error(path, absl::StrCat(user, " is not a member of queue ", name), entry.second);
      }
      if (!config->default_queues_.emplace(user, name).second) return Error(path, "given twice", entry.first);
    }
    return absl::OkStatus();
  }

  const std::string origin_;
};

bool Queue::HasMember(absl::string_view user) const {
  return std::any_of(members.begin(), members.end(),
                     [&](const std::string& member) { return member == user || member == kEveryUser; });
}

absl::StatusOr<QueueConfig> QueueConfig::Parse(absl::string_view yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) where = absl::StrCat(" at line ", e.mark.line + 1, ", column ", e.mark.column + 1);
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed YAML", where, ": ", e.msg));
  }
  try {
    return QueueConfigParser(origin).Parse(root);
  } catch (const YAML::Exception& e) {  // the parser checks types first; this is a backstop
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
}

absl::StatusOr<QueueConfig> QueueConfig::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("cannot read the queues file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read the queues file ", path));
  return Parse(text.str(), path);
}

QueueConfig QueueConfig::Default() {
  Queue queue;
  queue.name = "default";
  queue.members = {std::string(kEveryUser)};
  queue.nominal = {QueueResources::kUnlimited, QueueResources::kUnlimited};
  QueueConfig config;
  config.queues_.push_back(std::move(queue));
  return config;
}

const Queue* QueueConfig::Find(absl::string_view name) const {
  for (const Queue& queue : queues_) {
    if (queue.name == name) return &queue;
  }
  return nullptr;
}

std::string QueueConfig::QueueNames() const {
  return absl::StrJoin(queues_, ", ", [](std::string* out, const Queue& q) { out->append(q.name); });
}

absl::StatusOr<std::string> QueueConfig::ResolveQueue(const std::string& user, const std::string& requested) const {
  if (!requested.empty()) {
    const Queue* queue = Find(requested);
    if (queue == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.queue: unknown queue ", Shown(requested), " (queues: ", QueueNames(), ")"));
    }
    if (!user.empty() && !queue->HasMember(user)) {
      return absl::PermissionDeniedError(absl::StrCat("user ", user, " is not a member of queue ", requested));
    }
    return requested;
  }
  if (user.empty()) return queues_.front().name;
  if (auto it = default_queues_.find(user); it != default_queues_.end()) return it->second;
  const Queue* wildcard = nullptr;
  for (const Queue& queue : queues_) {
    if (std::find(queue.members.begin(), queue.members.end(), user) != queue.members.end()) return queue.name;
    if (wildcard == nullptr && queue.HasMember(user)) wildcard = &queue;
  }
  if (wildcard != nullptr) return wildcard->name;
  return absl::PermissionDeniedError(
      absl::StrCat("user ", user, " is not a member of any queue (queues: ", QueueNames(), ")"));
}

std::vector<std::string> QueueConfig::Validate(const std::vector<std::string>& known_users) const {
  const std::set<std::string> known(known_users.begin(), known_users.end());
  std::vector<std::string> warnings;
  for (const Queue& queue : queues_) {
    for (const std::string& member : queue.members) {
      if (member != kEveryUser && !known.count(member)) {
        warnings.push_back(absl::StrCat("queue ", queue.name, ": member ", member, " is not in the token file"));
      }
    }
  }
  for (const auto& [user, queue] : default_queues_) {
    if (!known.count(user)) {
      warnings.push_back(absl::StrCat("default_queues: user ", user, " is not in the token file"));
    }
  }
  return warnings;
}

namespace {

// 2^(-elapsed / half_life); 1 when usage never decays.
double DecayFactor(absl::Duration elapsed, absl::Duration half_life) {
  if (half_life == absl::InfiniteDuration()) return 1.0;
  return std::exp2(-absl::FDivDuration(elapsed, half_life));
}

// One interval's decayed usage at `now`, in GPU-seconds.
double GpuSeconds(const UsageInterval& interval, absl::Time now, const FairShareConfig& config) {
  return DecayedSlotSeconds(interval.start, interval.end, interval.gpus, now, config.half_life) +
         config.cpu_slot_weight *
             DecayedSlotSeconds(interval.start, interval.end, interval.cpu_slots, now, config.half_life);
}

}  // namespace

double DecayedSlotSeconds(absl::Time start, absl::Time end, int64_t slots, absl::Time now, absl::Duration half_life) {
  const absl::Time stop = std::min(end, now);
  if (slots <= 0 || stop <= start) return 0;
  const double length = absl::ToDoubleSeconds(stop - start);
  if (half_life == absl::InfiniteDuration()) return static_cast<double>(slots) * length;
  // With r = ln 2 / half_life, the integral of 2^(-(now - t) / half_life)
  // over [start, stop] is 2^(-(now - stop) / half_life) (1 - e^(-r length)) / r;
  // expm1 keeps its precision when the interval is short against the half-life.
  const double rate = std::log(2.0) / absl::ToDoubleSeconds(half_life);
  return static_cast<double>(slots) * DecayFactor(now - stop, half_life) * -std::expm1(-rate * length) / rate;
}

std::map<std::string, double> DecayedUsageByQueue(const std::vector<UsageInterval>& intervals, absl::Time now,
                                                  const FairShareConfig& config) {
  std::map<std::string, double> usage;
  for (const UsageInterval& interval : intervals) usage[interval.queue] += GpuSeconds(interval, now, config);
  return usage;
}

absl::Status FairShareLedger::RecordFinished(const UsageInterval& interval) {
  if (interval.end == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(
        absl::StrCat("usage of queue ", interval.queue, ": a running interval cannot be recorded as finished"));
  }
  if (interval.end <= interval.start) return absl::OkStatus();
  Folded& folded = finished_[interval.queue];
  const absl::Time as_of = std::max(folded.as_of, interval.end);
  folded.gpu_seconds = DecayedTo(folded, as_of) + GpuSeconds(interval, as_of, config_);
  folded.as_of = as_of;
  return absl::OkStatus();
}

double FairShareLedger::DecayedTo(const Folded& folded, absl::Time at) const {
  if (folded.gpu_seconds == 0) return 0;  // also avoids 0 * (infinite elapsed)
  return folded.gpu_seconds * DecayFactor(at - folded.as_of, config_.half_life);
}

double FairShareLedger::Usage(const std::string& queue, absl::Time now,
                              const std::vector<UsageInterval>& running) const {
  absl::Time at = now;
  double total = 0;
  if (auto it = finished_.find(queue); it != finished_.end()) {
    at = std::max(now, it->second.as_of);
    total = DecayedTo(it->second, at);
  }
  for (const UsageInterval& interval : running) {
    if (interval.queue == queue) total += GpuSeconds(interval, at, config_);
  }
  return total;
}

double FairShareLedger::WeightedUsage(const Queue& queue, absl::Time now,
                                      const std::vector<UsageInterval>& running) const {
  return Usage(queue.name, now, running) / queue.weight;
}

}  // namespace ringmaster::coordinator
