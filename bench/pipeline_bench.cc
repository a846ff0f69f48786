// Pipeline bubble of the GPipe and 1F1B schedules, measured on threads
// (InProcessGroup) with one block per stage, all blocks of equal cost.
//
//   bazel run -c opt //bench:pipeline_bench -- [--work sleep|spin] [--forward_ms 2]
//
// For P stages and m micro-batches each stage runs m forwards and m backwards;
// with equal costs the schedules leave each stage idle for (P - 1) (f + b) of
// a step of (m + P - 1) (f + b): a bubble of (P - 1) / (m + P - 1) of the step
// (equivalently (P - 1) / m of the ideal, bubble-free time). Measured:
//   bubble = 1 - sum_s busy_s / (P * wall)
// busy_s: stage s's host time in its Forward/Backward actions
// (PipelineStepResult.compute_seconds); wall: the step's time (longest stage,
// starting together after a barrier). Averaged over the timed steps.
//
// Work: "sleep" (default) models each block's compute as a sleep of fixed
// duration, so P > cores threads do not compete for the CPU: a schedule-level
// measurement (schedule, messages, synchronisation), not of kernels. "spin"
// runs a fixed amount of arithmetic (calibrated on one idle core); with more
// stages than cores the threads compete and busy time grows with it — the
// header says so.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/nn/model.h"
#include "engine/parallel/pipeline.h"

namespace ringmaster::engine {
namespace {

enum class Work { kSleep, kSpin };

struct WorkSpec {
  Work work = Work::kSleep;
  double forward_ms = 2.0;
  double backward_ms = 4.0;
  int64_t spin_iterations_per_ms = 0;  // spin: calibrated
};

double Spin(int64_t iterations) {
  double x = 1.0;
  for (int64_t i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

void DoWork(const WorkSpec& spec, double ms) {
  if (spec.work == Work::kSleep) {
    absl::SleepFor(absl::Microseconds(ms * 1000.0));
  } else {
    volatile double sink = Spin(static_cast<int64_t>(ms * spec.spin_iterations_per_ms));
    (void)sink;
  }
}

int64_t CalibrateSpin() {
  const int64_t n = 20'000'000;
  auto start = std::chrono::steady_clock::now();
  volatile double sink = Spin(n);
  (void)sink;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return static_cast<int64_t>(n / ms);
}

// An identity block that costs a fixed time: forward_ms forward, backward_ms backward.
class TimedBlock final : public nn::Block {
 public:
  explicit TimedBlock(const WorkSpec& spec) : spec_(spec) {}
  std::string_view kind() const override { return "TimedBlock"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override {
    DoWork(spec_, spec_.forward_ms);
    if (training) cache_.Put(micro_batch, true);
    return x;
  }
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override {
    absl::StatusOr<bool> cached = cache_.Take(micro_batch, "timed");
    if (!cached.ok()) return cached.status();
    DoWork(spec_, spec_.backward_ms);
    return dy;
  }

 private:
  const WorkSpec& spec_;
  nn::CacheSlots<bool> cache_;
};

struct Measured {
  double wall_s = 0.0;  // summed over timed steps
  double busy_s = 0.0;  // summed over stages and timed steps
  bool ok = true;
};

Measured Run(const WorkSpec& spec, parallel::ScheduleKind schedule, int p, int m, int steps, int warmup) {
  constexpr int64_t kClasses = 4;
  auto world = dist::InProcessWorld::Create(p);
  Batch batch;  // one row per micro-batch; the logits are the input itself
  batch.images = Tensor::Zeros({m, kClasses});
  batch.targets = Tensor::FromInts({m}, std::vector<int32_t>(m, 1));
  std::vector<std::vector<parallel::PipelineStepResult>> results(p);
  std::vector<absl::Status> status(p);
  std::vector<std::thread> threads;
  for (int s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      auto group = world->Group(s);
      CpuBackend backend(CpuBackendConfig{1, DType::kF32});
      nn::Model model(backend, "timed");
      parallel::PipelineConfig config;
      for (int b = 0; b < p; ++b) {
        model.Add(std::make_unique<TimedBlock>(spec));
        config.stages.push_back({b, b + 1});
      }
      config.schedule = schedule;
      config.micro_batches = m;
      auto stage = parallel::PipelineStage::Create(model, *group, config);
      if (!stage.ok()) {
        status[s] = stage.status();
        return;
      }
      for (int k = 0; k < warmup + steps; ++k) {
        status[s] = group->Barrier();  // the stages start each step together
        if (!status[s].ok()) return;
        absl::StatusOr<parallel::PipelineStepResult> r = (*stage)->Step(batch);
        if (!r.ok()) {
          status[s] = r.status();
          return;
        }
        if (k >= warmup) results[s].push_back(*r);
      }
    });
  }
  for (auto& t : threads) t.join();
  Measured out;
  for (int s = 0; s < p; ++s) {
    if (!status[s].ok()) {
      std::fprintf(stderr, "stage %d: %s\n", s, std::string(status[s].message()).c_str());
      out.ok = false;
    }
  }
  if (!out.ok) return out;
  for (int k = 0; k < steps; ++k) {
    double wall = 0.0;
    for (int s = 0; s < p; ++s) {
      wall = std::max(wall, results[s][k].step_seconds);
      out.busy_s += results[s][k].compute_seconds;
    }
    out.wall_s += wall;
  }
  return out;
}

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) out.push_back(std::stoi(std::string(part)));
  return out;
}

}  // namespace
}  // namespace ringmaster::engine

int main(int argc, char** argv) {
  using namespace ringmaster::engine;  // NOLINT: a benchmark's main
  CLI::App app{"Pipeline bubble of GPipe and 1F1B on threads, equal-cost stages"};
  std::string work = "sleep", stages = "2,4", micro = "4,8,16";
  WorkSpec spec;
  int steps = 5, warmup = 1;
  app.add_option("--work", work, "sleep (fixed-duration sleeps model compute) or spin (fixed arithmetic)")
      ->check(CLI::IsMember({"sleep", "spin"}));
  app.add_option("--forward_ms", spec.forward_ms, "Cost of one block's forward")->check(CLI::PositiveNumber);
  app.add_option("--backward_ms", spec.backward_ms, "Cost of one block's backward")->check(CLI::PositiveNumber);
  app.add_option("--stages", stages, "Comma-separated P values");
  app.add_option("--micro_batches", micro, "Comma-separated m values");
  app.add_option("--steps", steps, "Timed steps per configuration")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  spec.work = work == "spin" ? Work::kSpin : Work::kSleep;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (spec.work == Work::kSpin) spec.spin_iterations_per_ms = CalibrateSpin();

  std::printf("# Pipeline bubble, threads + InProcessGroup, one equal-cost block per stage, %d timed steps each\n",
              steps);
  if (spec.work == Work::kSleep) {
    std::printf("# work: SLEEPS of fixed duration model compute (forward %.1f ms, backward %.1f ms per block):\n"
                "#   a schedule-level measurement; the %u cores are not contended\n",
                spec.forward_ms, spec.backward_ms, cores);
  } else {
    std::printf("# work: fixed arithmetic (forward %.1f ms, backward %.1f ms on one idle core); %u cores:\n"
                "#   with P > %u the stages compete for cores and busy time includes that contention\n",
                spec.forward_ms, spec.backward_ms, cores, cores);
  }
  std::printf("# measured = 1 - sum_s busy_s / (P * wall); compared with theory = (P-1)/(m+P-1), the idle\n"
              "#   fraction of the step; (P-1)/m (bubble over ideal compute time) is printed for reference\n");
  std::printf("# wall_ms: measured step time; theory_ms = (m+P-1)(f+b); ideal_ms = m(f+b), no bubble\n");
  std::printf("%-8s %3s %4s %10s %10s %10s %9s %9s %9s\n", "schedule", "P", "m", "wall_ms", "theory_ms", "ideal_ms",
              "measured", "theory", "(P-1)/m");
  int rc = 0;
  for (parallel::ScheduleKind kind : {parallel::ScheduleKind::kGpipe, parallel::ScheduleKind::kOneFOneB}) {
    for (int p : ParseList(stages)) {
      for (int m : ParseList(micro)) {
        Measured r = Run(spec, kind, p, m, steps, warmup);
        if (!r.ok) {
          rc = 1;
          continue;
        }
        const double wall_ms = 1000.0 * r.wall_s / steps;
        const double ideal_ms = m * (spec.forward_ms + spec.backward_ms);
        const double measured = 1.0 - r.busy_s / (p * r.wall_s);
        std::printf("%-8s %3d %4d %10.2f %10.2f %10.2f %9.4f %9.4f %9.4f\n", parallel::ScheduleKindName(kind), p,
                    m, wall_ms, (m + p - 1) * (spec.forward_ms + spec.backward_ms), ideal_ms, measured,
                    static_cast<double>(p - 1) / (m + p - 1), static_cast<double>(p - 1) / m);
      }
    }
  }
  return rc;
}
