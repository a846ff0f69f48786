// Time of one ScheduleQueues pass at POD scale: pending jobs in queues on
// simulated 8-GPU nodes, some of which run jobs already (issue #28: goal
// < 50 ms for 10,000 jobs in 20 queues on 2,048 nodes). Prints the median and
// p95 over --passes passes of the same input; exits 1 when a pass places
// nothing or the input is malformed, so the smoke test notices a broken pass.
// bazel run -c opt //bench:scheduler_bench -- [--nodes 2048 --jobs 10000 --queues 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "coordinator/core/scheduler.h"

namespace rm = ringmaster::coordinator;

namespace {

struct Input {
  std::vector<rm::NodeCapacity> nodes;
  std::vector<rm::RunningJob> running;
  std::vector<rm::QueueState> queues;
  std::vector<rm::JobRequest> pending;
};

// Every 4th node runs an 8-GPU job, every 4th (offset 1) a 4-GPU one, all of
// the first 5 queues (so those borrow); the rest are free. Quotas split the cluster evenly
// between the queues, each may borrow as much again. Jobs: 1-8 GPUs on one
// node, or gangs of 2-16 whole nodes; a tenth carry a rack selector.
Input MakeInput(int n_nodes, int n_jobs, int n_queues, uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Input in;
  const int64_t share = int64_t{n_nodes} * 8 / n_queues;
  for (int q = 0; q < n_queues; ++q) {
    rm::QueueState s;
    s.name = absl::StrCat("team-", q);
    s.nominal_gpus = share;
    s.borrow_gpus = share;
    s.nominal_cpus = s.borrow_cpus = 1 << 20;
    s.weight = 1 + q % 3;
    s.decayed_usage = uniform(0, 1000000);
    s.preempt_within = q % 2 == 0;
    in.queues.push_back(s);
  }
  for (int i = 0; i < n_nodes; ++i) {
    rm::NodeCapacity n;
    n.node_id = absl::StrCat("node-", i);
    n.hostname = absl::StrCat("dgx-", i / 32, "-", i % 32);
    n.labels["rack"] = absl::StrCat("r", i / 32);
    for (int g = 0; g < 8; ++g) n.gpu_uuids.push_back(absl::StrCat(n.node_id, "-g", g));
    n.cpu_slots = n.free_cpu_slots = 128;
    const int held = i % 4 == 0 ? 8 : (i % 4 == 1 ? 4 : 0);
    n.free_gpu_uuids.assign(n.gpu_uuids.begin() + held, n.gpu_uuids.end());
    if (held > 0) {
      rm::RunningJob r{absl::StrCat("run-", i), in.queues[i % std::min(5, n_queues)].name, uniform(0, 2), i, rm::SlotKind::kGpu, {}, false};
      r.nodes.push_back({n.node_id, n.hostname, {n.gpu_uuids.begin(), n.gpu_uuids.begin() + held}, 0});
      in.running.push_back(std::move(r));
    }
    in.nodes.push_back(std::move(n));
  }
  for (int j = 0; j < n_jobs; ++j) {
    rm::JobRequest r;
    r.job_id = absl::StrCat("job-", j);
    r.queue = in.queues[uniform(0, n_queues - 1)].name;
    r.priority = uniform(0, 2);
    r.submit_seq = j;
    if (uniform(0, 3) == 0) {
      r.nodes = uniform(2, 16);
      r.ranks_per_node = 8;
    } else {
      r.ranks_per_node = uniform(1, 8);
    }
    if (uniform(0, 9) == 0) r.node_selector["rack"] = absl::StrCat("r", uniform(0, n_nodes / 32));
    in.pending.push_back(std::move(r));
  }
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time one scheduling pass (ScheduleQueues)"};
  int nodes = 2048, jobs = 10000, queues = 20, passes = 15;
  app.add_option("--nodes", nodes, "simulated 8-GPU nodes")->check(CLI::PositiveNumber);
  app.add_option("--jobs", jobs, "pending jobs")->check(CLI::PositiveNumber);
  app.add_option("--queues", queues, "queues")->check(CLI::PositiveNumber);
  app.add_option("--passes", passes, "passes timed")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const Input in = MakeInput(nodes, jobs, queues, 20261128);
  std::vector<double> ms;
  rm::ScheduleResult last;
  for (int p = 0; p < passes; ++p) {
    const auto start = std::chrono::steady_clock::now();
    last = rm::ScheduleQueues(in.pending, in.running, in.queues, in.nodes);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double p95 = ms[std::min(ms.size() - 1, static_cast<size_t>(ms.size() * 0.95))];
  std::printf("input: %d pending jobs in %d queues, %d nodes x 8 GPUs, %zu running jobs\n", jobs, queues, nodes,
              in.running.size());
  std::printf("pass: placed %zu, waiting %zu, preemptions %zu\n", last.placed.size(), last.waiting.size(),
              last.preempt.size());
  std::printf("pass time over %d passes: median %.2f ms, p95 %.2f ms, max %.2f ms (goal < 50 ms)\n", passes, median,
              p95, ms.back());
  if (last.placed.size() + last.waiting.size() != static_cast<size_t>(jobs) || last.placed.empty()) {
    std::printf("FAIL: every job must be decided once, and some placed\n");
    return 1;
  }
  return 0;
}
