// MetricsRegistry over prometheus-cpp: registration errors as Status,
// callback gauges, and the exposition of what callers register.
#include "common/metrics.h"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename T>
T Must(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status();
  return *std::move(v);
}

TEST(MetricsRegistryTest, ExposesEveryTypeInTheTextFormat) {
  MetricsRegistry registry;
  Must(registry.AddCounter("ringmaster_steps_total", "Steps."))->Add({{"job", "j1"}, {"rank", "0"}}).Increment(3);
  Must(registry.AddGauge("ringmaster_loss", "Loss."))->Add({{"rank", "0"}}).Set(0.5);
  Must(registry.AddHistogram("ringmaster_step_seconds", "Step time."))
      ->Add({{"rank", "0"}}, prometheus::Histogram::BucketBoundaries{0.1, 1})
      .Observe(0.3);
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("# HELP ringmaster_steps_total Steps.\n# TYPE ringmaster_steps_total counter\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_steps_total{job=\"j1\",rank=\"0\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_loss{rank=\"0\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_seconds_bucket{rank=\"0\",le=\"0.1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_seconds_bucket{rank=\"0\",le=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_seconds_bucket{rank=\"0\",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_seconds_sum{rank=\"0\"} 0.3\n"));
}

TEST(MetricsRegistryTest, LabelValuesAreEscaped) {
  MetricsRegistry registry;
  Must(registry.AddGauge("ringmaster_info", "Info."))->Add({{"spec", "C:\\a\"b\".yaml\nx"}}).Set(1);
  EXPECT_THAT(registry.ExposeText(), HasSubstr("ringmaster_info{spec=\"C:\\\\a\\\"b\\\".yaml\\nx\"} 1\n"));
}

TEST(MetricsRegistryTest, BadDefinitionsAreInvalidArgumentNotExceptions) {
  MetricsRegistry registry;
  struct Case {
    absl::Status status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {registry.AddGauge("bad name", "X.").status(), "metric name \"bad name\" is not [a-zA-Z_:][a-zA-Z0-9_:]*"},
      {registry.AddCounter("ringmaster_steps", "X.").status(),
       "counter ringmaster_steps: the name must end in _total"},
      {registry.AddGauge("ringmaster_x", "").status(), "metric ringmaster_x: help must be one non-empty line"},
      {registry.AddGauge("ringmaster_y", "two\nlines").status(),
       "metric ringmaster_y: help must be one non-empty line"},
      {registry.AddGauge("ringmaster_z", "C:\\path").status(),
       "metric ringmaster_z: help must not contain a backslash (prometheus-cpp does not escape it)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(c.status.message(), c.message);
  }
}

TEST(MetricsRegistryTest, ANameIsOneTypeAndRegisteringItAgainReturnsTheFamily) {
  MetricsRegistry registry;
  prometheus::Family<prometheus::Gauge>* first = Must(registry.AddGauge("ringmaster_x", "X."));
  EXPECT_EQ(Must(registry.AddGauge("ringmaster_x", "X.")), first);
  absl::Status clash = registry.AddHistogram("ringmaster_x", "X.").status();
  EXPECT_EQ(clash.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(clash.message(), "metric ringmaster_x is already a gauge");
  EXPECT_EQ(registry.AddCallbackGauges("ringmaster_x", "X.").status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(MetricsRegistryTest, ARemovedSeriesIsNoLongerExposed) {
  MetricsRegistry registry;
  prometheus::Family<prometheus::Gauge>* family = Must(registry.AddGauge("ringmaster_rank_loss", "Loss."));
  prometheus::Gauge& rank0 = family->Add({{"rank", "0"}});
  family->Add({{"rank", "1"}}).Set(2);
  rank0.Set(1);
  family->Remove(&rank0);
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, Not(HasSubstr("rank=\"0\"")));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_loss{rank=\"1\"} 2\n"));
}

TEST(CallbackGaugesTest, ComputedAtScrapeTimeAndReleasedWhenRemoved) {
  MetricsRegistry registry;
  CallbackGauges* queue = Must(registry.AddCallbackGauges("ringmaster_queue_length", "Jobs waiting."));
  auto depth = std::make_shared<int>(3);
  queue->Set({{"priority", "high"}}, [depth] { return *depth; });
  const std::string header = "# HELP ringmaster_queue_length Jobs waiting.\n# TYPE ringmaster_queue_length gauge\n";
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 3\n");
  *depth = 7;
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 7\n");
  queue->Set({{"priority", "low"}}, []() -> double { throw std::runtime_error("x"); });
  EXPECT_EQ(registry.ExposeText(), header + "ringmaster_queue_length{priority=\"high\"} 7\n")
      << "a throwing callback leaves its series out of the scrape";
  EXPECT_EQ(depth.use_count(), 2);
  queue->Set({{"priority", "high"}}, nullptr);
  EXPECT_EQ(depth.use_count(), 1) << "removing a series drops its callback and what it captured";
  EXPECT_EQ(Must(registry.AddCallbackGauges("ringmaster_queue_length", "Jobs waiting.")), queue);
}

TEST(BucketsTest, ExponentialBuckets) {
  EXPECT_EQ(Must(ExponentialBuckets(0.001, 10, 4)), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  absl::Status s = ExponentialBuckets(1, 1, 3).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "exponential buckets need start > 0, factor > 1, count >= 1; got 1, 1, 3");
  EXPECT_EQ(DefaultSecondsBuckets().size(), 11u);
}

TEST(MetricsConcurrencyTest, ThreadsUpdatingOneSeriesWhileScrapedGiveTheExactTotal) {
  MetricsRegistry registry;
  prometheus::Family<prometheus::Counter>* f = Must(registry.AddCounter("x_total", "X."));
  prometheus::Family<prometheus::Histogram>* hf = Must(registry.AddHistogram("h_seconds", "H."));
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100000;
  std::atomic<bool> stop_scraping{false};
  std::atomic<int> scrapes{0};
  std::thread scraper([&] {
    while (!stop_scraping.load()) {
      registry.ExposeText();
      scrapes.fetch_add(1);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread adds the series itself: concurrent adds agree on one.
      prometheus::Counter& c = f->Add({{"job", "j"}});
      prometheus::Histogram& h = hf->Add({{"rank", "0"}}, prometheus::Histogram::BucketBoundaries{0.5});
      for (int i = 0; i < kIncrements; ++i) {
        c.Increment();
        h.Observe((i + t) % 2 == 0 ? 0.25 : 1.0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  stop_scraping = true;
  scraper.join();
  EXPECT_GT(scrapes.load(), 0);
  EXPECT_EQ(f->Add({{"job", "j"}}).Value(), double{kThreads} * kIncrements);
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("h_seconds_count{rank=\"0\"} 800000\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_bucket{rank=\"0\",le=\"0.5\"} 400000\n"));
}

}  // namespace
}  // namespace ringmaster
