#ifndef RINGMASTER_COMMON_METRICS_H_
#define RINGMASTER_COMMON_METRICS_H_

// Ringmaster's metrics are prometheus-cpp's (Debian 12's prometheus-cpp-dev
// 1.0.1): counters, gauges and histograms live in prometheus::Family objects
// of a prometheus::Registry, and the exposition is prometheus::TextSerializer's.
// MetricsRegistry adds the little prometheus-cpp lacks:
//   - registration that returns a Status instead of throwing
//     (std::invalid_argument for a bad name or a clashing type), and that
//     checks Ringmaster's rules: names and label names valid, counters end in
//     "_total", help text one non-empty line without a backslash
//     (prometheus-cpp 1.0.1 escapes neither in HELP);
//   - gauges whose value is computed when scraped (CallbackGauges);
//   - ExposeText, for /metrics (common/metrics_http.h) and for tests.
//
//   MetricsRegistry registry;
//   ASSIGN_OR_RETURN(prometheus::Family<prometheus::Counter>* steps,
//                    registry.AddCounter("ringmaster_trainer_steps_total", "Optimizer steps taken."));
//   prometheus::Counter& rank_steps = steps->Add({{"job", "j42"}, {"rank", "3"}});
//   ...
//   rank_steps.Increment();  // the hot path
//
// Hot path: add a series once (Family::Add, a hash lookup under the family's
// lock) and keep the reference. Counter::Increment and Gauge::Set are then a
// relaxed atomic update; Histogram::Observe takes the series' own lock.
// bench/metrics_bench measures both.
//
// Lifetime: a series lives until Family::Remove, which destroys it; remove
// only series no other thread refers to (each owner here removes its own
// under its own lock). Families live as long as the registry.
//
// Conventions checked by `promtool check metrics` (common/metrics_promtool.h)
// rather than here: names start with "ringmaster_" and carry base units
// ("_seconds", "_bytes"); labels are "job", "rank", "node" where they apply.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ringmaster {

// Content-Type of the text exposition format 0.0.4.
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// A family of gauges computed at scrape time (queue length, live sessions),
// one callback per set of labels. Thread-safe. Callbacks run on the scraping
// thread with this family's lock held: they must be quick and must not call
// back into this family; one that throws leaves its series out of that
// scrape. When Set returns, the callback it replaced is not
// running and will not run again, so what it refers to may be destroyed.
class CallbackGauges final : public prometheus::Collectable {
 public:
  CallbackGauges(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}

  // Installs the series' callback; nullptr removes the series.
  void Set(const prometheus::Labels& labels, std::function<double()> callback);

  std::vector<prometheus::MetricFamily> Collect() const override;
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  const std::string help_;
  mutable absl::Mutex mu_;
  std::map<prometheus::Labels, std::function<double()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// Prometheus' default buckets, for durations in seconds:
// 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10.
prometheus::Histogram::BucketBoundaries DefaultSecondsBuckets();

// `count` bounds: start, start*factor, start*factor^2, ... INVALID_ARGUMENT
// unless start > 0, factor > 1 and count >= 1.
absl::StatusOr<prometheus::Histogram::BucketBoundaries> ExponentialBuckets(double start, double factor, int count);

// A process's metrics: a prometheus::Registry and the callback families beside
// it, rendered together. Thread-safe.
//
// Add*() registers a family, or returns the existing one of that name and type.
// INVALID_ARGUMENT for a bad name or help text (see above); ALREADY_EXISTS
// when the name is taken by another type.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  absl::StatusOr<prometheus::Family<prometheus::Counter>*> AddCounter(const std::string& name,
                                                                      const std::string& help);
  absl::StatusOr<prometheus::Family<prometheus::Gauge>*> AddGauge(const std::string& name, const std::string& help);
  // Each series is added with its bucket bounds: family->Add(labels, buckets).
  absl::StatusOr<prometheus::Family<prometheus::Histogram>*> AddHistogram(const std::string& name,
                                                                          const std::string& help);
  absl::StatusOr<CallbackGauges*> AddCallbackGauges(const std::string& name, const std::string& help);

  // Every family, the registry's then the callback families.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in text format 0.0.4 (kPrometheusTextContentType).
  std::string ExposeText() const;

  prometheus::Registry& registry() { return registry_; }

 private:
  // OK if `name` may name a family of `type` ("counter", ...): valid, and not
  // taken by another type. Records the type.
  absl::Status Claim(const std::string& name, const std::string& help, const std::string& type);

  prometheus::Registry registry_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> types_ ABSL_GUARDED_BY(mu_);  // family name -> type
  std::map<std::string, std::unique_ptr<CallbackGauges>> callback_families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_H_
