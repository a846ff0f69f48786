#include "common/metrics.h"

#include <cmath>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "prometheus/check_names.h"
#include "prometheus/text_serializer.h"

namespace ringmaster {
namespace {

// Registers a family with prometheus-cpp, whose errors are exceptions.
template <typename T>
absl::StatusOr<prometheus::Family<T>*> Register(prometheus::detail::Builder<T> builder,
                                               prometheus::Registry& registry, const std::string& name) {
  try {
    return &builder.Register(registry);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": ", e.what()));
  }
}

}  // namespace

void CallbackGauges::Set(const prometheus::Labels& labels, std::function<double()> callback) {
  absl::MutexLock lock(&mu_);
  if (callback == nullptr) {
    callbacks_.erase(labels);
  } else {
    callbacks_[labels] = std::move(callback);
  }
}

std::vector<prometheus::MetricFamily> CallbackGauges::Collect() const {
  prometheus::MetricFamily family;
  family.name = name_;
  family.help = help_;
  family.type = prometheus::MetricType::Gauge;
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, callback] : callbacks_) {
    prometheus::ClientMetric metric;
    for (const auto& [name, value] : labels) metric.label.push_back({name, value});
    try {
      metric.gauge.value = callback();
    } catch (const std::exception&) {
      continue;  // left out of this scrape
    }
    family.metric.push_back(std::move(metric));
  }
  return {std::move(family)};
}

prometheus::Histogram::BucketBoundaries DefaultSecondsBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

absl::StatusOr<prometheus::Histogram::BucketBoundaries> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("exponential buckets need start > 0, factor > 1, count >= 1; got ",
                                                   start, ", ", factor, ", ", count));
  }
  prometheus::Histogram::BucketBoundaries bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start * std::pow(factor, i));
  return bounds;
}

absl::Status MetricsRegistry::Claim(const std::string& name, const std::string& help, const std::string& type) {
  if (!prometheus::CheckMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("metric name \"", name, "\" is not [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (type == "counter" && !absl::EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(absl::StrCat("counter ", name, ": the name must end in _total"));
  }
  if (help.empty() || absl::StrContains(help, "\n")) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": help must be one non-empty line"));
  }
  if (absl::StrContains(help, "\\")) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", name, ": help must not contain a backslash (prometheus-cpp does not escape it)"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = types_.emplace(name, type);
  if (!inserted && it->second != type) {
    return absl::AlreadyExistsError(absl::StrCat("metric ", name, " is already a ", it->second));
  }
  return absl::OkStatus();
}

absl::StatusOr<prometheus::Family<prometheus::Counter>*> MetricsRegistry::AddCounter(const std::string& name,
                                                                                     const std::string& help) {
  RETURN_IF_ERROR(Claim(name, help, "counter"));
  return Register(prometheus::BuildCounter().Name(name).Help(help), registry_, name);
}

absl::StatusOr<prometheus::Family<prometheus::Gauge>*> MetricsRegistry::AddGauge(const std::string& name,
                                                                                 const std::string& help) {
  RETURN_IF_ERROR(Claim(name, help, "gauge"));
  return Register(prometheus::BuildGauge().Name(name).Help(help), registry_, name);
}

absl::StatusOr<prometheus::Family<prometheus::Histogram>*> MetricsRegistry::AddHistogram(const std::string& name,
                                                                                         const std::string& help) {
  RETURN_IF_ERROR(Claim(name, help, "histogram"));
  return Register(prometheus::BuildHistogram().Name(name).Help(help), registry_, name);
}

absl::StatusOr<CallbackGauges*> MetricsRegistry::AddCallbackGauges(const std::string& name, const std::string& help) {
  RETURN_IF_ERROR(Claim(name, help, "callback gauge"));
  absl::MutexLock lock(&mu_);
  std::unique_ptr<CallbackGauges>& family = callback_families_[name];
  if (family == nullptr) family = std::make_unique<CallbackGauges>(name, help);
  return family.get();
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  // Callback families are collected outside mu_: their callbacks may read
  // anything (but this registry's registration).
  std::vector<const CallbackGauges*> callbacks;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : callback_families_) callbacks.push_back(family.get());
  }
  for (const CallbackGauges* family : callbacks) {
    for (prometheus::MetricFamily& f : family->Collect()) families.push_back(std::move(f));
  }
  return families;
}

std::string MetricsRegistry::ExposeText() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

}  // namespace ringmaster
