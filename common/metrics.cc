#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics_format.h"

namespace ringmaster {
namespace {

// The word in "# TYPE".
absl::string_view ExpositionType(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kGauge:
    case MetricType::kCallbackGauge:
      return "gauge";
  }
  return "untyped";
}

// The kind as a user registers it, for error messages.
absl::string_view KindName(MetricType type) {
  return type == MetricType::kCallbackGauge ? "callback gauge" : ExpositionType(type);
}

template <typename T>
constexpr MetricType TypeOf() {
  if constexpr (std::is_same_v<T, Counter>) return MetricType::kCounter;
  if constexpr (std::is_same_v<T, Gauge>) return MetricType::kGauge;
  if constexpr (std::is_same_v<T, Histogram>) return MetricType::kHistogram;
  return MetricType::kCallbackGauge;
}

// `counter(job, rank) "Help."`, histograms with their buckets.
std::string Describe(const MetricDef& def) {
  std::string out = absl::StrCat(KindName(def.type), "(", absl::StrJoin(def.label_names, ", "),
                                 ") \"", EscapeHelp(def.help), "\"");
  if (def.type == MetricType::kHistogram) {
    absl::StrAppend(&out, " buckets [",
                    absl::StrJoin(def.buckets, ", ",
                                  [](std::string* s, double b) { s->append(FormatMetricValue(b)); }),
                    "]");
  }
  return out;
}

// The series names a family writes, its own name first.
std::vector<std::string> ExposedNames(const MetricDef& def) {
  if (def.type != MetricType::kHistogram) return {def.name};
  return {def.name, def.name + "_bucket", def.name + "_sum", def.name + "_count"};
}

// Checks names, labels, help and buckets; drops a trailing +Inf bucket.
absl::Status ValidateAndNormalize(MetricDef* def) {
  if (absl::Status s = ValidateMetricName(def->name); !s.ok()) return s;
  if (def->type == MetricType::kCounter && !absl::EndsWith(def->name, "_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter \"", def->name, "\" must have a name ending in \"_total\""));
  }
  if (def->help.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metric \"", def->name, "\" has no help text"));
  }
  if (!IsValidUtf8(def->help)) {
    return absl::InvalidArgumentError(
        absl::StrCat("help text of metric \"", def->name, "\" is not valid UTF-8"));
  }
  for (size_t i = 0; i < def->label_names.size(); ++i) {
    const std::string& label = def->label_names[i];
    if (absl::Status s = ValidateLabelName(def->name, label); !s.ok()) return s;
    if (def->type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid label name \"le\" of histogram \"", def->name, "\": reserved for bucket bounds"));
    }
    if (std::find(def->label_names.begin(), def->label_names.begin() + i, label) !=
        def->label_names.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate label name \"", label, "\" in metric \"", def->name, "\""));
    }
  }
  if (def->type != MetricType::kHistogram) {
    def->buckets.clear();
    return absl::OkStatus();
  }
  std::vector<double>& b = def->buckets;
  if (!b.empty() && std::isinf(b.back()) && b.back() > 0) b.pop_back();
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(b[i]) || (std::isinf(b[i]) && b[i] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bucket bound ", FormatMetricValue(b[i]),
                                                     " of histogram \"", def->name,
                                                     "\" is not allowed"));
    }
    if (i > 0 && !(b[i] > b[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket bounds of histogram \"", def->name, "\" must be strictly increasing: ",
          FormatMetricValue(b[i]), " follows ", FormatMetricValue(b[i - 1])));
    }
  }
  return absl::OkStatus();
}

std::string LabelSet(const std::vector<std::string>& names,
                     const std::vector<std::string>& values) {
  std::string out;
  AppendLabels(names, values, "", "", &out);
  return out.empty() ? "{}" : out;
}

}  // namespace

// ---- Histogram, CallbackGauge -------------------------------------------------

Histogram::Histogram(const std::vector<double>& upper_bounds)
    : upper_bounds_(upper_bounds),
      bucket_counts_(new std::atomic<uint64_t>[upper_bounds.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) bucket_counts_[i].store(0);
}

void Histogram::Observe(double value) {
  size_t index = upper_bounds_.size();  // +Inf
  if (!std::isnan(value)) {
    index = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
            upper_bounds_.begin();
  }
  bucket_counts_[index].fetch_add(1, std::memory_order_relaxed);
  metrics_internal::AtomicAdd(&sum_, value);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  snapshot.cumulative_counts.reserve(upper_bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    total += bucket_counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative_counts.push_back(total);
  }
  snapshot.count = total;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

void CallbackGauge::SetCallback(std::function<double()> callback) {
  std::function<double()> previous;
  {
    absl::MutexLock lock(&mu_);
    previous = std::exchange(callback_, std::move(callback));
  }
  // `previous` (and what it captured) is destroyed here, outside the lock.
}

std::optional<double> CallbackGauge::Value() const {
  absl::MutexLock lock(&mu_);
  if (!callback_) return std::nullopt;
  try {
    return callback_();
  } catch (...) {
    return std::nullopt;  // Skipped in this scrape; exceptions stop here.
  }
}

bool MetricDef::operator==(const MetricDef& other) const {
  return name == other.name && help == other.help && type == other.type &&
         label_names == other.label_names && buckets == other.buckets;
}

// ---- Family<T> ---------------------------------------------------------------

template <typename T>
Family<T>::Family(MetricDef def) : FamilyBase(std::move(def)) {
  if (def_.label_names.empty()) {
    absl::MutexLock lock(&mu_);
    series_.emplace(std::vector<std::string>{}, NewSeries());
  }
}

template <typename T>
std::unique_ptr<T> Family<T>::NewSeries() const {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::unique_ptr<Histogram>(new Histogram(def_.buckets));
  } else {
    return std::make_unique<T>();
  }
}

template <typename T>
absl::Status Family<T>::CheckArity(const std::vector<std::string>& label_values) const {
  if (label_values.size() == def_.label_names.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "metric \"", def_.name, "\" has ", def_.label_names.size(), " label(s) (",
      absl::StrJoin(def_.label_names, ", "), "), got ", label_values.size(), " value(s)"));
}

template <typename T>
absl::StatusOr<T*> Family<T>::WithLabels(const std::vector<std::string>& label_values) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = series_.find(label_values);
    if (it != series_.end()) return it->second.get();
  }
  if (absl::Status s = CheckArity(label_values); !s.ok()) return s;
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (!IsValidUtf8(label_values[i])) {
      return absl::InvalidArgumentError(absl::StrCat("value of label \"", def_.label_names[i],
                                                     "\" of metric \"", def_.name,
                                                     "\" is not valid UTF-8"));
    }
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = series_.try_emplace(label_values);
  if (inserted) it->second = NewSeries();
  return it->second.get();
}

template <typename T>
void Family<T>::Retire(std::unique_ptr<T> series) {
  if constexpr (std::is_same_v<T, CallbackGauge>) {
    // Release what the callback captured; it will never be called again.
    series->SetCallback(nullptr);
  }
  retired_.push_back(std::move(series));
}

template <typename T>
absl::Status Family<T>::Remove(const std::vector<std::string>& label_values) {
  if (absl::Status s = CheckArity(label_values); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = series_.find(label_values);
  if (it == series_.end()) {
    return absl::NotFoundError(absl::StrCat("metric \"", def_.name, "\" has no series ",
                                            LabelSet(def_.label_names, label_values)));
  }
  Retire(std::move(it->second));
  series_.erase(it);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<int> Family<T>::RemoveMatching(absl::string_view label_name,
                                              absl::string_view label_value) {
  auto pos = std::find(def_.label_names.begin(), def_.label_names.end(), label_name);
  if (pos == def_.label_names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric \"", def_.name, "\" has no label \"", label_name, "\""));
  }
  const size_t index = pos - def_.label_names.begin();
  absl::MutexLock lock(&mu_);
  int removed = 0;
  for (auto it = series_.begin(); it != series_.end();) {
    if (it->first[index] == label_value) {
      Retire(std::move(it->second));
      it = series_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

template <typename T>
size_t Family<T>::SeriesCount() const {
  absl::ReaderMutexLock lock(&mu_);
  return series_.size();
}

template <typename T>
void Family<T>::AppendText(std::string* out) const {
  absl::StrAppend(out, "# HELP ", def_.name, " ", EscapeHelp(def_.help), "\n", "# TYPE ",
                  def_.name, " ", ExpositionType(def_.type), "\n");
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [values, series] : series_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      const Histogram::Snapshot snap = series->Read();
      for (size_t i = 0; i < snap.cumulative_counts.size(); ++i) {
        const std::string le =
            i < snap.upper_bounds.size() ? FormatMetricValue(snap.upper_bounds[i]) : "+Inf";
        absl::StrAppend(out, def_.name, "_bucket");
        AppendLabels(def_.label_names, values, "le", le, out);
        absl::StrAppend(out, " ", snap.cumulative_counts[i], "\n");
      }
      absl::StrAppend(out, def_.name, "_sum");
      AppendLabels(def_.label_names, values, "", "", out);
      absl::StrAppend(out, " ", FormatMetricValue(snap.sum), "\n", def_.name, "_count");
      AppendLabels(def_.label_names, values, "", "", out);
      absl::StrAppend(out, " ", snap.count, "\n");
    } else {
      std::optional<double> value;
      if constexpr (std::is_same_v<T, CallbackGauge>) {
        value = series->Value();
        if (!value.has_value()) continue;
      } else {
        value = series->Value();
      }
      out->append(def_.name);
      AppendLabels(def_.label_names, values, "", "", out);
      absl::StrAppend(out, " ", FormatMetricValue(*value), "\n");
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;
template class Family<CallbackGauge>;

// ---- Buckets -----------------------------------------------------------------

std::vector<double> DefaultSecondsBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

absl::StatusOr<std::vector<double>> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("exponential buckets need start > 0, factor > 1 and count >= 1; got start ",
                     FormatMetricValue(start), ", factor ", FormatMetricValue(factor), ", count ",
                     count));
  }
  std::vector<double> buckets;
  buckets.reserve(count);
  for (double bound = start; static_cast<int>(buckets.size()) < count; bound *= factor) {
    buckets.push_back(bound);
  }
  return buckets;
}

// ---- MetricsRegistry ---------------------------------------------------------

template <typename T>
absl::StatusOr<Family<T>*> MetricsRegistry::Add(MetricDef def) {
  def.type = TypeOf<T>();
  if (absl::Status s = ValidateAndNormalize(&def); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto existing = families_.find(def.name);
  if (existing != families_.end()) {
    const MetricDef& old = existing->second->def();
    if (old == def) return static_cast<Family<T>*>(existing->second.get());
    return absl::AlreadyExistsError(absl::StrCat("metric \"", def.name,
                                                 "\" is already registered as ", Describe(old),
                                                 "; cannot register it as ", Describe(def)));
  }
  const std::vector<std::string> names = ExposedNames(def);
  for (const std::string& name : names) {
    auto clash = exposed_names_.find(name);
    if (clash != exposed_names_.end()) {
      return absl::AlreadyExistsError(absl::StrCat("metric \"", def.name, "\" would expose \"",
                                                   name, "\", which metric \"", clash->second,
                                                   "\" already exposes"));
    }
  }
  for (const std::string& name : names) exposed_names_.emplace(name, def.name);
  std::string family_name = def.name;
  auto* family = new Family<T>(std::move(def));
  families_.emplace(std::move(family_name), std::unique_ptr<FamilyBase>(family));
  return family;
}

absl::StatusOr<Family<Counter>*> MetricsRegistry::AddCounter(absl::string_view name,
                                                             absl::string_view help,
                                                             std::vector<std::string> label_names) {
  return Add<Counter>(
      MetricDef{std::string(name), std::string(help), MetricType::kCounter, std::move(label_names), {}});
}

absl::StatusOr<Family<Gauge>*> MetricsRegistry::AddGauge(absl::string_view name,
                                                         absl::string_view help,
                                                         std::vector<std::string> label_names) {
  return Add<Gauge>(
      MetricDef{std::string(name), std::string(help), MetricType::kGauge, std::move(label_names), {}});
}

absl::StatusOr<Family<Histogram>*> MetricsRegistry::AddHistogram(
    absl::string_view name, absl::string_view help, std::vector<std::string> label_names,
    std::vector<double> buckets) {
  return Add<Histogram>(MetricDef{std::string(name), std::string(help), MetricType::kHistogram,
                                  std::move(label_names), std::move(buckets)});
}

absl::StatusOr<Family<CallbackGauge>*> MetricsRegistry::AddCallbackGauge(
    absl::string_view name, absl::string_view help, std::vector<std::string> label_names) {
  return Add<CallbackGauge>(MetricDef{std::string(name), std::string(help),
                                      MetricType::kCallbackGauge, std::move(label_names), {}});
}

std::string MetricsRegistry::ExposeText() const {
  // Families are never removed, so the pointers outlive the lock; scraping
  // them without it keeps registration (and callbacks that register) unblocked.
  std::vector<const FamilyBase*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::string out;
  for (const FamilyBase* family : families) family->AppendText(&out);
  return out;
}

}  // namespace ringmaster
