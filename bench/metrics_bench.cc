// Cost of metric updates on the hot path (prometheus-cpp series, through
// common/metrics.h): ns per operation on a labelled series, with 1..N threads,
// for one shared series (contended) and one series per thread; plus the lookup
// the hot path avoids, a small scrape, and a scrape of 4,096 ranks' series.
//
//   bazel run //bench:metrics_bench [-- ITERATIONS_PER_THREAD]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(thread_index, iterations) on `threads` threads started together;
// returns wall ns per operation per thread (what one caller pays).
double NsPerOp(int threads, long iterations, const std::function<void(int, long)>& body) {
  std::vector<std::thread> pool;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point start;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t, iterations);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : pool) t.join();
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  return ns / iterations;
}

int Main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 5'000'000;
  using prometheus::Counter;
  using prometheus::Gauge;
  using prometheus::Histogram;
  MetricsRegistry registry;
  prometheus::Family<Counter>* counters = *registry.AddCounter("bench_events_total", "Events.");
  prometheus::Family<Gauge>* gauges = *registry.AddGauge("bench_value", "Value.");
  prometheus::Family<Histogram>* histograms = *registry.AddHistogram("bench_step_seconds", "Step time.");
  Counter* shared_counter = &counters->Add({{"job", "j1"}, {"rank", "0"}});
  Histogram* shared_histogram = &histograms->Add({{"job", "j1"}, {"rank", "0"}}, DefaultSecondsBuckets());
  std::vector<Counter*> own_counters;
  std::vector<Gauge*> own_gauges;
  std::vector<Histogram*> own_histograms;
  const int max_threads = std::max(4u, std::thread::hardware_concurrency());
  for (int t = 0; t < max_threads; ++t) {
    const prometheus::Labels labels = {{"job", "j2"}, {"rank", std::to_string(t)}};
    own_counters.push_back(&counters->Add(labels));
    own_gauges.push_back(&gauges->Add(labels));
    own_histograms.push_back(&histograms->Add(labels, DefaultSecondsBuckets()));
  }

  std::printf("metrics_bench: %ld iterations per thread, %u hardware threads\n", iterations,
              std::thread::hardware_concurrency());
  std::printf("%-44s %8s %12s\n", "operation", "threads", "ns/op");
  std::vector<int> thread_counts = {1, 2, max_threads};
  auto row_n = [&](const char* name, long n, const std::function<void(int, long)>& body) {
    for (int threads : thread_counts) {
      std::printf("%-44s %8d %12.2f\n", name, threads, NsPerOp(threads, n, body));
    }
  };
  auto row = [&](const char* name, const std::function<void(int, long)>& body) {
    row_n(name, iterations, body);
  };
  row("Counter::Increment, one shared series", [&](int, long n) {
    for (long i = 0; i < n; ++i) shared_counter->Increment();
  });
  row("Counter::Increment, a series per thread", [&](int t, long n) {
    Counter* c = own_counters[t];
    for (long i = 0; i < n; ++i) c->Increment();
  });
  row("Gauge::Set, a series per thread", [&](int t, long n) {
    Gauge* g = own_gauges[t];
    for (long i = 0; i < n; ++i) g->Set(static_cast<double>(i));
  });
  row("Histogram::Observe (11 buckets), shared", [&](int, long n) {
    for (long i = 0; i < n; ++i) shared_histogram->Observe(0.001 * (i & 1023));
  });
  row("Histogram::Observe (11 buckets), per thread", [&](int t, long n) {
    Histogram* h = own_histograms[t];
    for (long i = 0; i < n; ++i) h->Observe(0.001 * (i & 1023));
  });
  const prometheus::Labels labels = {{"job", "j1"}, {"rank", "0"}};
  row_n("Family::Add + Increment (what the hot path avoids)", iterations / 10, [&](int, long n) {
    for (long i = 0; i < n; ++i) counters->Add(labels).Increment();
  });

  // A scrape of a trainer-sized registry: the series above.
  const int scrapes = 200;
  size_t bytes = 0;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < scrapes; ++i) bytes = registry.ExposeText().size();
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  std::printf("ExposeText: %.1f us per scrape, %zu bytes\n", us / scrapes, bytes);

  // A scrape of 4,096 ranks' series: the worker's 18 per-rank families (15
  // gauges, 2 histograms, a counter), labels job, rank, node.
  MetricsRegistry big;
  std::vector<prometheus::Family<Gauge>*> rank_gauges;
  for (int f = 0; f < 15; ++f) {
    rank_gauges.push_back(*big.AddGauge("bench_rank_gauge_" + std::to_string(f), "A per-rank gauge."));
  }
  prometheus::Family<Histogram>* rank_histograms[2] = {*big.AddHistogram("bench_rank_step_seconds", "Step time."),
                                                       *big.AddHistogram("bench_rank_checkpoint_seconds",
                                                                         "Checkpoint time.")};
  prometheus::Family<Counter>* rank_counter = *big.AddCounter("bench_rank_checkpoints_total", "Checkpoints.");
  for (int r = 0; r < 4096; ++r) {
    const prometheus::Labels v = {{"job", "j-1"}, {"rank", std::to_string(r)}, {"node", "node-" + std::to_string(r / 8)}};
    for (prometheus::Family<Gauge>* g : rank_gauges) g->Add(v).Set(r);
    for (prometheus::Family<Histogram>* h : rank_histograms) h->Add(v, DefaultSecondsBuckets()).Observe(0.01 * r);
    rank_counter->Add(v).Increment();
  }
  const int big_scrapes = 10;
  const Clock::time_point big_start = Clock::now();
  for (int i = 0; i < big_scrapes; ++i) bytes = big.ExposeText().size();
  const double big_ms = std::chrono::duration<double, std::milli>(Clock::now() - big_start).count();
  std::printf("ExposeText of 4,096 ranks x 18 series: %.1f ms per scrape, %zu bytes\n", big_ms / big_scrapes, bytes);
  return 0;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Main(argc, argv); }
