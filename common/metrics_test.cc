#include "common/metrics.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

// Unwraps a StatusOr in a test, failing loudly.
template <typename T>
T Must(absl::StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : T{};
}

TEST(MetricsExpositionTest, UnlabelledCounterIsExposedFromZero) {
  MetricsRegistry registry;
  Family<Counter>* steps =
      Must(registry.AddCounter("ringmaster_trainer_steps_total", "Optimizer steps taken."));
  EXPECT_EQ(registry.ExposeText(),
            "# HELP ringmaster_trainer_steps_total Optimizer steps taken.\n"
            "# TYPE ringmaster_trainer_steps_total counter\n"
            "ringmaster_trainer_steps_total 0\n");
  Counter* counter = Must(steps->WithLabels({}));
  counter->Inc();
  counter->Inc(2.5);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP ringmaster_trainer_steps_total Optimizer steps taken.\n"
            "# TYPE ringmaster_trainer_steps_total counter\n"
            "ringmaster_trainer_steps_total 3.5\n");
}

TEST(MetricsExpositionTest, LabelledGaugeSeriesAreSortedByLabelValues) {
  MetricsRegistry registry;
  Family<Gauge>* scale =
      Must(registry.AddGauge("ringmaster_trainer_loss_scale", "Dynamic loss scale.", {"job", "rank"}));
  Must(scale->WithLabels({"j2", "0"}))->Set(32768);
  Must(scale->WithLabels({"j1", "1"}))->Set(65536);
  Gauge* g = Must(scale->WithLabels({"j1", "0"}));
  g->Set(1);
  g->Inc(0.25);
  g->Dec(2);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP ringmaster_trainer_loss_scale Dynamic loss scale.\n"
            "# TYPE ringmaster_trainer_loss_scale gauge\n"
            "ringmaster_trainer_loss_scale{job=\"j1\",rank=\"0\"} -0.75\n"
            "ringmaster_trainer_loss_scale{job=\"j1\",rank=\"1\"} 65536\n"
            "ringmaster_trainer_loss_scale{job=\"j2\",rank=\"0\"} 32768\n");
}

TEST(MetricsExpositionTest, LabelledHistogramIsCumulativeWithInfSumAndCount) {
  MetricsRegistry registry;
  Family<Histogram>* step = Must(registry.AddHistogram(
      "ringmaster_trainer_step_seconds", "Time per training step.", {"rank"}, {0.1, 1}));
  Histogram* h = Must(step->WithLabels({"0"}));
  for (double v : {0.05, 0.1, 0.5, 1.0, 4.0}) h->Observe(v);  // A bound counts in its own bucket.
  EXPECT_EQ(registry.ExposeText(),
            "# HELP ringmaster_trainer_step_seconds Time per training step.\n"
            "# TYPE ringmaster_trainer_step_seconds histogram\n"
            "ringmaster_trainer_step_seconds_bucket{rank=\"0\",le=\"0.1\"} 2\n"
            "ringmaster_trainer_step_seconds_bucket{rank=\"0\",le=\"1\"} 4\n"
            "ringmaster_trainer_step_seconds_bucket{rank=\"0\",le=\"+Inf\"} 5\n"
            "ringmaster_trainer_step_seconds_sum{rank=\"0\"} 5.65\n"
            "ringmaster_trainer_step_seconds_count{rank=\"0\"} 5\n");
}

TEST(MetricsExpositionTest, UnlabelledHistogramWithDefaultBuckets) {
  MetricsRegistry registry;
  Histogram* h = Must(Must(registry.AddHistogram("rpc_seconds", "RPC latency."))->WithLabels({}));
  h->Observe(0.3);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP rpc_seconds RPC latency.\n"
            "# TYPE rpc_seconds histogram\n"
            "rpc_seconds_bucket{le=\"0.005\"} 0\n"
            "rpc_seconds_bucket{le=\"0.01\"} 0\n"
            "rpc_seconds_bucket{le=\"0.025\"} 0\n"
            "rpc_seconds_bucket{le=\"0.05\"} 0\n"
            "rpc_seconds_bucket{le=\"0.1\"} 0\n"
            "rpc_seconds_bucket{le=\"0.25\"} 0\n"
            "rpc_seconds_bucket{le=\"0.5\"} 1\n"
            "rpc_seconds_bucket{le=\"1\"} 1\n"
            "rpc_seconds_bucket{le=\"2.5\"} 1\n"
            "rpc_seconds_bucket{le=\"5\"} 1\n"
            "rpc_seconds_bucket{le=\"10\"} 1\n"
            "rpc_seconds_bucket{le=\"+Inf\"} 1\n"
            "rpc_seconds_sum 0.3\n"
            "rpc_seconds_count 1\n");
}

TEST(MetricsExpositionTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  Family<Gauge>* g = Must(registry.AddGauge("ringmaster_path_info",
                                            "Paths; C:\\tmp is a \"path\"\nsecond line.", {"path"}));
  Must(g->WithLabels({"C:\\tmp \"x\"\nend"}))->Set(1);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP ringmaster_path_info Paths; C:\\\\tmp is a \"path\"\\nsecond line.\n"
            "# TYPE ringmaster_path_info gauge\n"
            "ringmaster_path_info{path=\"C:\\\\tmp \\\"x\\\"\\nend\"} 1\n");
}

TEST(MetricsExpositionTest, FamiliesSortedByNameAndEmptyFamiliesKeepHelpAndType) {
  MetricsRegistry registry;
  Must(registry.AddGauge("b_bytes", "B.", {"node"}));
  Must(registry.AddGauge("a_bytes", "A."));
  Must(registry.AddGauge("c_special", "Specials.", {"v"}));
  Family<Gauge>* c = Must(registry.AddGauge("c_special", "Specials.", {"v"}));
  Must(c->WithLabels({"nan"}))->Set(std::nan(""));
  Must(c->WithLabels({"neg"}))->Set(-std::numeric_limits<double>::infinity());
  Must(c->WithLabels({"pos"}))->Set(std::numeric_limits<double>::infinity());
  EXPECT_EQ(registry.ExposeText(),
            "# HELP a_bytes A.\n# TYPE a_bytes gauge\na_bytes 0\n"
            "# HELP b_bytes B.\n# TYPE b_bytes gauge\n"
            "# HELP c_special Specials.\n# TYPE c_special gauge\n"
            "c_special{v=\"nan\"} NaN\n"
            "c_special{v=\"neg\"} -Inf\n"
            "c_special{v=\"pos\"} +Inf\n");
}

TEST(CallbackGaugeTest, ValueIsComputedAtScrapeTimeAndRemovedCallbacksAreReleased) {
  MetricsRegistry registry;
  Family<CallbackGauge>* queue = Must(
      registry.AddCallbackGauge("ringmaster_queue_length", "Jobs waiting.", {"priority"}));
  auto depth = std::make_shared<int>(3);
  Must(queue->WithLabels({"high"}))->SetCallback([depth] { return *depth; });
  Must(queue->WithLabels({"low"}));  // No callback yet: not exposed.
  const std::string header =
      "# HELP ringmaster_queue_length Jobs waiting.\n# TYPE ringmaster_queue_length gauge\n";
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 3\n");
  *depth = 7;
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 7\n");

  Must(queue->WithLabels({"low"}))->SetCallback([]() -> double { throw std::runtime_error("x"); });
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 7\n")
      << "a throwing callback leaves its series out of the scrape";

  EXPECT_EQ(depth.use_count(), 2);
  ASSERT_TRUE(queue->Remove({"high"}).ok());
  EXPECT_EQ(depth.use_count(), 1) << "Remove must drop the callback and what it captured";
  EXPECT_EQ(registry.ExposeText(), header);
}

TEST(MetricsValidationTest, BadDefinitionsReturnInvalidArgumentWithTheReason) {
  MetricsRegistry registry;
  auto expect_invalid = [](const absl::Status& s, const std::string& message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), message);
  };
  expect_invalid(registry.AddCounter("ringmaster_steps", "Steps.").status(),
                 "counter \"ringmaster_steps\" must have a name ending in \"_total\"");
  expect_invalid(registry.AddGauge("ringmaster-loss", "Loss.").status(),
                 "invalid metric name \"ringmaster-loss\": must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  expect_invalid(registry.AddGauge("__loss", "Loss.").status(),
                 "invalid metric name \"__loss\": the \"__\" prefix is reserved");
  expect_invalid(registry.AddGauge("loss", "Loss.", {"__job"}).status(),
                 "invalid label name \"__job\" of metric \"loss\": the \"__\" prefix is reserved");
  expect_invalid(registry.AddGauge("loss", "Loss.", {"job-id"}).status(),
                 "invalid label name \"job-id\" of metric \"loss\": must match [a-zA-Z_][a-zA-Z0-9_]*");
  expect_invalid(registry.AddHistogram("step_seconds", "Step time.", {"rank", "le"}).status(),
                 "invalid label name \"le\" of histogram \"step_seconds\": reserved for bucket bounds");
  expect_invalid(registry.AddGauge("loss", "Loss.", {"job", "rank", "job"}).status(),
                 "duplicate label name \"job\" in metric \"loss\"");
  expect_invalid(registry.AddGauge("loss", "").status(), "metric \"loss\" has no help text");
  expect_invalid(registry.AddGauge("loss", "bad \xff").status(),
                 "help text of metric \"loss\" is not valid UTF-8");
  expect_invalid(registry.AddHistogram("h_seconds", "H.", {}, {1, 0.5}).status(),
                 "bucket bounds of histogram \"h_seconds\" must be strictly increasing: 0.5 follows 1");
  expect_invalid(registry.AddHistogram("h_seconds", "H.", {}, {1, 1}).status(),
                 "bucket bounds of histogram \"h_seconds\" must be strictly increasing: 1 follows 1");
  expect_invalid(registry.AddHistogram("h_seconds", "H.", {}, {std::nan("")}).status(),
                 "bucket bound NaN of histogram \"h_seconds\" is not allowed");
  // "le" is fine outside histograms.
  EXPECT_TRUE(registry.AddGauge("ok_bytes", "Ok.", {"le"}).ok());
  // Nothing invalid was registered.
  EXPECT_EQ(registry.ExposeText(), "# HELP ok_bytes Ok.\n# TYPE ok_bytes gauge\n");
}

TEST(MetricsValidationTest, TrailingInfBucketIsImplied) {
  MetricsRegistry registry;
  Family<Histogram>* a = Must(registry.AddHistogram(
      "h_seconds", "H.", {}, {1, 2, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(Must(registry.AddHistogram("h_seconds", "H.", {}, {1, 2})), a);
  EXPECT_EQ(Must(a->WithLabels({}))->Read().upper_bounds, (std::vector<double>{1, 2}));
}

TEST(MetricsRegistrationTest, SameDefinitionReturnsTheExistingFamily) {
  MetricsRegistry registry;
  Family<Counter>* a = Must(registry.AddCounter("x_total", "X.", {"job"}));
  Family<Counter>* b = Must(registry.AddCounter("x_total", "X.", {"job"}));
  EXPECT_EQ(a, b);
  EXPECT_EQ(Must(a->WithLabels({"j"})), Must(b->WithLabels({"j"})));
}

TEST(MetricsRegistrationTest, DifferentDefinitionOfTheSameNameIsAlreadyExists) {
  MetricsRegistry registry;
  Must(registry.AddCounter("x_total", "X.", {"job"}));
  absl::Status s = registry.AddGauge("x_total", "X.", {"job"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(),
            "metric \"x_total\" is already registered as counter(job) \"X.\"; "
            "cannot register it as gauge(job) \"X.\"");
  EXPECT_EQ(registry.AddCounter("x_total", "X.", {"job", "rank"}).status().message(),
            "metric \"x_total\" is already registered as counter(job) \"X.\"; "
            "cannot register it as counter(job, rank) \"X.\"");
  EXPECT_EQ(registry.AddCounter("x_total", "Other.", {"job"}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCallbackGauge("x_total", "X.", {"job"}).status().message(),
            "metric \"x_total\" is already registered as counter(job) \"X.\"; "
            "cannot register it as callback gauge(job) \"X.\"");

  Must(registry.AddHistogram("h_seconds", "H.", {}, {1}));
  EXPECT_EQ(registry.AddHistogram("h_seconds", "H.", {}, {1, 2}).status().message(),
            "metric \"h_seconds\" is already registered as histogram() \"H.\" buckets [1]; "
            "cannot register it as histogram() \"H.\" buckets [1, 2]");
}

TEST(MetricsRegistrationTest, HistogramSeriesNamesCannotCollideWithOtherFamilies) {
  MetricsRegistry registry;
  Must(registry.AddHistogram("step_seconds", "Step time."));
  absl::Status s = registry.AddGauge("step_seconds_count", "Count.").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(),
            "metric \"step_seconds_count\" would expose \"step_seconds_count\", which metric "
            "\"step_seconds\" already exposes");
  Must(registry.AddGauge("load_sum", "Load."));
  EXPECT_EQ(registry.AddHistogram("load", "Load.").status().message(),
            "metric \"load\" would expose \"load_sum\", which metric \"load_sum\" already exposes");
}

TEST(FamilyTest, WithLabelsReturnsAStablePointerAndChecksValues) {
  MetricsRegistry registry;
  Family<Counter>* f = Must(registry.AddCounter("x_total", "X.", {"job", "rank"}));
  Counter* c = Must(f->WithLabels({"j", "0"}));
  for (int i = 0; i < 100; ++i) Must(f->WithLabels({"j", std::to_string(i + 1)}));
  EXPECT_EQ(Must(f->WithLabels({"j", "0"})), c);

  absl::Status s = f->WithLabels({"j"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "metric \"x_total\" has 2 label(s) (job, rank), got 1 value(s)");
  s = f->WithLabels({"j\xc0", "0"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "value of label \"job\" of metric \"x_total\" is not valid UTF-8");
}

TEST(FamilyTest, RemoveStopsExposingTheSeriesButKeepsThePointerValid) {
  MetricsRegistry registry;
  Family<Counter>* f = Must(registry.AddCounter("x_total", "X.", {"job", "rank"}));
  Counter* done = Must(f->WithLabels({"j1", "0"}));
  done->Inc(5);
  Must(f->WithLabels({"j2", "0"}))->Inc(1);
  ASSERT_TRUE(f->Remove({"j1", "0"}).ok());
  done->Inc();  // Still safe to use; no longer exposed.
  const std::string header = "# HELP x_total X.\n# TYPE x_total counter\n";
  EXPECT_EQ(registry.ExposeText(), header + "x_total{job=\"j2\",rank=\"0\"} 1\n");

  absl::Status s = f->Remove({"j1", "0"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "metric \"x_total\" has no series {job=\"j1\",rank=\"0\"}");
  EXPECT_EQ(f->Remove({"j1"}).code(), absl::StatusCode::kInvalidArgument);

  Counter* again = Must(f->WithLabels({"j1", "0"}));
  EXPECT_NE(again, done);
  EXPECT_EQ(again->Value(), 0);
}

TEST(FamilyTest, RemoveMatchingDropsEveryRankOfAJob) {
  MetricsRegistry registry;
  Family<Gauge>* f = Must(registry.AddGauge("loss", "Loss.", {"job", "rank"}));
  for (const char* job : {"j1", "j2"}) {
    for (const char* rank : {"0", "1", "2"}) Must(f->WithLabels({job, rank}));
  }
  EXPECT_EQ(Must(f->RemoveMatching("job", "j1")), 3);
  EXPECT_EQ(f->SeriesCount(), 3u);
  EXPECT_EQ(Must(f->RemoveMatching("job", "j1")), 0);
  absl::StatusOr<int> bad = f->RemoveMatching("node", "n1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "metric \"loss\" has no label \"node\"");
}

TEST(CounterTest, NeverGoesDown) {
  Counter c;
  c.Inc(2);
  c.Inc(-1);
  c.Inc(std::nan(""));
  EXPECT_EQ(c.Value(), 2);
}

TEST(HistogramTest, NanCountsOnlyInTheInfBucket) {
  MetricsRegistry registry;
  Histogram* h = Must(Must(registry.AddHistogram("h_seconds", "H.", {}, {1}))->WithLabels({}));
  h->Observe(std::nan(""));
  Histogram::Snapshot snap = h->Read();
  EXPECT_EQ(snap.cumulative_counts, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(snap.count, 1u);
  EXPECT_TRUE(std::isnan(snap.sum));
}

TEST(BucketsTest, ExponentialBuckets) {
  EXPECT_EQ(Must(ExponentialBuckets(0.001, 10, 4)), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  absl::Status s = ExponentialBuckets(1, 1, 3).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "exponential buckets need start > 0, factor > 1 and count >= 1; got start 1, "
            "factor 1, count 3");
}

TEST(MetricsConcurrencyTest, ThreadsIncrementingOneSeriesGiveTheExactTotal) {
  MetricsRegistry registry;
  Family<Counter>* f = Must(registry.AddCounter("x_total", "X.", {"job", "rank"}));
  Family<Histogram>* hf = Must(registry.AddHistogram("h_seconds", "H.", {"rank"}, {0.5}));
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100000;
  std::atomic<bool> stop_scraping{false};
  // A scraper runs throughout, as Prometheus would.
  std::thread scraper([&] {
    while (!stop_scraping.load()) EXPECT_FALSE(registry.ExposeText().empty());
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread looks the series up itself: concurrent creation must
      // agree on one series.
      Counter* c = *f->WithLabels({"j", "0"});
      Histogram* h = *hf->WithLabels({"0"});
      for (int i = 0; i < kIncrements; ++i) {
        c->Inc();
        h->Observe((i + t) % 2 == 0 ? 0.25 : 1.0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  stop_scraping = true;
  scraper.join();
  EXPECT_EQ(Must(f->WithLabels({"j", "0"}))->Value(), double{kThreads} * kIncrements);
  EXPECT_EQ(f->SeriesCount(), 1u);
  Histogram::Snapshot snap = Must(hf->WithLabels({"0"}))->Read();
  EXPECT_EQ(snap.count, uint64_t{kThreads} * kIncrements);
  EXPECT_EQ(snap.cumulative_counts[0], uint64_t{kThreads} * kIncrements / 2);
  EXPECT_EQ(snap.sum, kThreads * kIncrements / 2 * 1.25);
}

}  // namespace
}  // namespace ringmaster
