#ifndef RINGMASTER_COMMON_METRICS_H_
#define RINGMASTER_COMMON_METRICS_H_

// Ringmaster's metrics: counters, gauges, histograms and callback gauges,
// grouped in families with labels, held by a MetricsRegistry and exposed in the
// Prometheus text format 0.0.4 (MetricsRegistry::ExposeText; served over HTTP
// by common/metrics_http.h). There is no prometheus-cpp on our platforms.
//
//   MetricsRegistry registry;
//   ASSIGN_OR_RETURN(Family<Counter>* steps,
//                    registry.AddCounter("ringmaster_trainer_steps_total",
//                                        "Optimizer steps taken.", {"job", "rank"}));
//   ASSIGN_OR_RETURN(Counter* rank_steps, steps->WithLabels({"j42", "3"}));
//   ...
//   rank_steps->Inc();  // the hot path
//
// Hot path: look a series up once with WithLabels (a map lookup under the
// family's lock) and keep the pointer. Counter::Inc, Gauge::Set/Inc/Dec and
// Histogram::Observe are then lock-free: one relaxed atomic read-modify-write
// (a compare-exchange loop on a double; Observe adds a bucket increment), no
// map lookup, no allocation, no lock.
//
// Lifetime: families and series are never freed before the registry. A pointer
// returned by Add*() or WithLabels() stays valid for the registry's life, even
// after Remove(): a removed series is no longer exposed and writes to it are
// dropped from view, and it keeps its memory (tens of bytes; a histogram
// 8 bytes per bucket more) until the registry is destroyed. WithLabels() after
// Remove() makes a fresh series that starts from zero (Prometheus sees a
// counter reset, which rate() handles).
//
// Naming (validated, INVALID_ARGUMENT otherwise): metric names match
// [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, neither starts
// with "__"; counters end in "_total"; histograms may not use the label "le";
// help text is non-empty UTF-8; label values are UTF-8 (any characters,
// escaped on output). Ringmaster's conventions, checked by `promtool check
// metrics` rather than here: names start with "ringmaster_" and carry base
// units ("_seconds", "_bytes"); labels are "job", "rank", "node" where they apply.
//
// Exposition is deterministic: families sorted by name, series by label values
// (byte-wise, label by label in declaration order).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringmaster {

namespace metrics_internal {
// target += amount, atomically (std::atomic<double> has no fetch_add in C++17).
inline void AtomicAdd(std::atomic<double>* target, double amount) {
  double current = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}
}  // namespace metrics_internal

// A monotonically increasing value (events, bytes, seconds spent).
// Thread-safe and lock-free. Aligned to a cache line so that series updated by
// different threads do not share one.
class alignas(64) Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `amount`. A counter never goes down: negative and NaN amounts are
  // ignored.
  void Inc(double amount = 1.0) {
    if (!(amount >= 0.0)) return;
    metrics_internal::AtomicAdd(&value_, amount);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue length, loss, loss scale, bytes in use).
// Thread-safe and lock-free.
class alignas(64) Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double amount = 1.0) { metrics_internal::AtomicAdd(&value_, amount); }
  void Dec(double amount = 1.0) { metrics_internal::AtomicAdd(&value_, -amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted in buckets with fixed upper bounds (step time, RPC
// latency). Created by Family<Histogram>, which owns the bounds. Observe is
// thread-safe and lock-free.
class Histogram {
 public:
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose upper bound is >= value (NaN goes
  // to +Inf only) and adds it to the sum.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;        // Finite bounds; +Inf is implicit.
    std::vector<uint64_t> cumulative_counts;  // One per bound, then the +Inf bucket.
    double sum = 0.0;
    uint64_t count = 0;  // Equals cumulative_counts.back().
  };
  // The counts are consistent with each other; under concurrent Observe calls
  // the sum may be from a moment slightly before or after them.
  Snapshot Read() const;

 private:
  template <typename T>
  friend class Family;
  // `upper_bounds` are validated by the registry: strictly increasing, no NaN,
  // no +Inf.
  explicit Histogram(const std::vector<double>& upper_bounds);

  const std::vector<double> upper_bounds_;
  // Per-bucket (non-cumulative) counts; the last one is the +Inf bucket.
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;
  std::atomic<double> sum_{0.0};
};

// A gauge whose value is computed when the registry is scraped (queue length,
// live sessions). A series without a callback is not exposed.
// Thread-safe. The callback runs on the scraping thread with this gauge's and
// its family's locks held: it must be quick and must not call into its own
// family (WithLabels, Remove) or this gauge (SetCallback), or it deadlocks.
class CallbackGauge {
 public:
  CallbackGauge() = default;
  CallbackGauge(const CallbackGauge&) = delete;
  CallbackGauge& operator=(const CallbackGauge&) = delete;

  // Installs `callback` (nullptr removes it). When SetCallback returns, the
  // previous callback is not running and will not run again, so the objects it
  // refers to may be destroyed.
  void SetCallback(std::function<double()> callback);
  // The callback's value now; nullopt when there is none or it throws (the
  // series is then left out of that scrape).
  std::optional<double> Value() const;

 private:
  mutable absl::Mutex mu_;
  std::function<double()> callback_ ABSL_GUARDED_BY(mu_);
};

enum class MetricType { kCounter, kGauge, kHistogram, kCallbackGauge };

// What a family is; two registrations of the same name must agree on all of it.
struct MetricDef {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<double> buckets;  // Histograms only: finite upper bounds.

  bool operator==(const MetricDef& other) const;
};

// A metric family: one name, help, type and list of label names, and one series
// per distinct list of label values. Thread-safe.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const MetricDef& def() const { return def_; }
  // Appends "# HELP", "# TYPE" and every series in text format 0.0.4.
  virtual void AppendText(std::string* out) const = 0;

 protected:
  explicit FamilyBase(MetricDef def) : def_(std::move(def)) {}

  const MetricDef def_;
};

template <typename T>
class Family final : public FamilyBase {
 public:
  // The series with these label values (one per label name, in declaration
  // order), created on first use. The pointer stays valid for the registry's
  // life; keep it rather than calling WithLabels on a hot path.
  // INVALID_ARGUMENT for the wrong number of values or a value that is not UTF-8.
  // An unlabelled family has one series, WithLabels({}), present from the start.
  absl::StatusOr<T*> WithLabels(const std::vector<std::string>& label_values);

  // Stops exposing the series (e.g. a finished job's rank). Its pointer stays
  // valid; see "Lifetime" above. NOT_FOUND if there is no such series;
  // INVALID_ARGUMENT for the wrong number of values.
  absl::Status Remove(const std::vector<std::string>& label_values);

  // Removes every series whose label `label_name` equals `label_value` (e.g.
  // all ranks of job "j42"); returns how many. INVALID_ARGUMENT if the family
  // has no such label.
  absl::StatusOr<int> RemoveMatching(absl::string_view label_name, absl::string_view label_value);

  // Number of exposed series.
  size_t SeriesCount() const;

  void AppendText(std::string* out) const override;

 private:
  friend class MetricsRegistry;
  explicit Family(MetricDef def);

  std::unique_ptr<T> NewSeries() const;
  void Retire(std::unique_ptr<T> series) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckArity(const std::vector<std::string>& label_values) const;

  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> series_ ABSL_GUARDED_BY(mu_);
  // Removed series, kept so that pointers handed out stay valid.
  std::vector<std::unique_ptr<T>> retired_ ABSL_GUARDED_BY(mu_);
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;
extern template class Family<CallbackGauge>;

// Prometheus' default buckets, for durations in seconds:
// 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10.
std::vector<double> DefaultSecondsBuckets();

// `count` bounds: start, start*factor, start*factor^2, ... INVALID_ARGUMENT
// unless start > 0, factor > 1 and count >= 1.
absl::StatusOr<std::vector<double>> ExponentialBuckets(double start, double factor, int count);

// Owns every metric family of a process and renders them for a scrape.
// Thread-safe: registration, WithLabels, updates and ExposeText may run
// concurrently from any threads.
//
// Add*() registers a family, or returns the existing one when the name is
// already registered with the same definition (type, help, label names,
// buckets). Errors: INVALID_ARGUMENT for a bad name, label name, help text or
// bucket list; ALREADY_EXISTS when the name is taken by a different definition,
// or when the family would expose a series name another family already exposes
// (histogram "x" exposes x_bucket, x_sum, x_count).
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  absl::StatusOr<Family<Counter>*> AddCounter(absl::string_view name, absl::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(absl::string_view name, absl::string_view help,
                                          std::vector<std::string> label_names = {});
  // `buckets`: strictly increasing upper bounds; a trailing +Inf may be given
  // and is implied otherwise.
  absl::StatusOr<Family<Histogram>*> AddHistogram(
      absl::string_view name, absl::string_view help, std::vector<std::string> label_names = {},
      std::vector<double> buckets = DefaultSecondsBuckets());
  absl::StatusOr<Family<CallbackGauge>*> AddCallbackGauge(absl::string_view name,
                                                          absl::string_view help,
                                                          std::vector<std::string> label_names = {});

  // Every family in text format 0.0.4 (kPrometheusTextContentType).
  std::string ExposeText() const;

 private:
  template <typename T>
  absl::StatusOr<Family<T>*> Add(MetricDef def);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  // Every sample name a family writes (and the family name) -> that family.
  absl::flat_hash_map<std::string, std::string> exposed_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_H_
