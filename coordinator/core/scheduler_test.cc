#include "coordinator/core/scheduler.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

// A GPU node "<id>" with `total` GPUs "<id>-g<i>" of which the first `free`
// indices are free (or exactly `free_idx` when given), and CPU slots.
NodeCapacity Gpu(const std::string& id, int total, int free, std::map<std::string, std::string> labels = {},
                 int cpu = 0, int free_cpu = 0) {
  NodeCapacity n;
  n.node_id = id;
  n.hostname = "host-" + id;
  n.labels = std::move(labels);
  for (int i = 0; i < total; ++i) n.gpu_uuids.push_back(absl::StrCat(id, "-g", i));
  for (int i = 0; i < free; ++i) n.free_gpu_uuids.push_back(absl::StrCat(id, "-g", i));
  n.cpu_slots = cpu;
  n.free_cpu_slots = free_cpu;
  return n;
}

NodeCapacity Cpu(const std::string& id, int total, int free, std::map<std::string, std::string> labels = {}) {
  return Gpu(id, 0, 0, std::move(labels), total, free);
}

JobRequest Job(const std::string& id, int prio, int seq, int nodes, int rpn, SlotKind kind = SlotKind::kGpu,
               int cpus_per_rank = 1, std::map<std::string, std::string> selector = {}) {
  return {id, prio, seq, nodes, rpn, kind, cpus_per_rank, std::move(selector)};
}

// "j1=a,b j2=-" : placed jobs with their node ids in node_rank order; "-"
// for a waiting job. Backfilled placements are marked with '*'.
std::string Render(const ScheduleResult& r, const std::vector<JobRequest>& queue) {
  std::map<std::string, std::string> by_job;
  for (const JobPlacement& p : r.placed) {
    std::vector<std::string> ids;
    for (const NodeGrant& g : p.nodes) ids.push_back(g.node_id);
    by_job[p.job_id] = absl::StrCat(p.backfilled ? "*" : "", absl::StrJoin(ids, ","));
  }
  for (const WaitingJob& w : r.waiting) by_job[w.job_id] = "-";
  std::vector<std::string> parts;
  for (const JobRequest& j : queue) parts.push_back(absl::StrCat(j.job_id, "=", by_job[j.job_id]));
  return absl::StrJoin(parts, " ");
}

struct Case {
  std::string name;
  std::vector<NodeCapacity> nodes;
  std::vector<JobRequest> queue;
  std::string want;
};

TEST(SchedulerTest, Table) {
  const std::map<std::string, std::string> rack_a = {{"rack", "a"}}, rack_b = {{"rack", "b"}};
  const std::vector<Case> cases = {
      {"single job fits", {Gpu("n1", 8, 8)}, {Job("j1", 0, 1, 1, 4)}, "j1=n1"},
      {"gang larger than the cluster waits", {Gpu("n1", 4, 4), Gpu("n2", 4, 4)}, {Job("j1", 0, 1, 3, 2)},
       "j1=-"},
      {"gang needs R free slots on each node", {Gpu("n1", 8, 8), Gpu("n2", 8, 1)}, {Job("j1", 0, 1, 2, 2)},
       "j1=-"},
      {"higher priority first", {Gpu("n1", 8, 8)}, {Job("j1", 0, 1, 1, 8), Job("j2", 5, 2, 1, 8)},
       "j1=- j2=n1"},
      {"FIFO within a priority", {Gpu("n1", 8, 8)}, {Job("j2", 0, 2, 1, 8), Job("j1", 0, 1, 1, 8)},
       "j2=- j1=n1"},
      {"3 jobs on capacity for 2: priority, then FIFO",
       {Gpu("n1", 8, 8), Gpu("n2", 8, 8)},
       {Job("j1", 0, 1, 1, 8), Job("j2", 0, 2, 1, 8), Job("j3", 1, 3, 1, 8)},
       "j1=n2 j2=- j3=n1"},
      {"3 jobs on capacity for 2: a 2-node gang first, never partial",
       {Gpu("n1", 8, 8), Gpu("n2", 8, 8)},
       {Job("j1", 0, 1, 2, 8), Job("j2", 0, 2, 1, 8), Job("j3", 0, 3, 1, 8)},
       "j1=n1,n2 j2=- j3=-"},
      {"3 jobs on capacity for 2: a blocked 2-node head holds both smaller jobs back",
       {Gpu("n1", 8, 0), Gpu("n2", 8, 8)},
       {Job("j1", 0, 1, 2, 8), Job("j2", 0, 2, 1, 4), Job("j3", 0, 3, 1, 4)},
       "j1=- j2=- j3=-"},
      {"backfill onto a node the head's selector excludes",
       {Gpu("n1", 8, 0, rack_a), Gpu("n2", 8, 8, rack_a), Gpu("n3", 8, 8, rack_b)},
       {Job("head", 0, 1, 2, 8, SlotKind::kGpu, 1, rack_a), Job("small", 0, 2, 1, 4)},
       "head=- small=*n3"},
      {"backfill onto a node too small for the head",
       {Gpu("n1", 8, 0), Gpu("n2", 4, 4)},
       {Job("head", 0, 1, 1, 8), Job("small", 0, 2, 1, 2)},
       "head=- small=*n2"},
      {"backfill across slot kinds: CPU job beside a blocked GPU head",
       {Gpu("n1", 8, 4, {}, 32, 32)},
       {Job("head", 0, 1, 1, 8), Job("cpu", 0, 2, 1, 4, SlotKind::kCpu, 2)},
       "head=- cpu=*n1"},
      {"an infeasible head holds nothing back",
       {Gpu("n1", 8, 8)},
       {Job("huge", 9, 1, 2, 8), Job("small", 0, 2, 1, 8)},
       "huge=- small=n1"},
      {"every blocked job ahead keeps its nodes, not only the head",
       {Gpu("n1", 8, 0, rack_a), Gpu("n2", 8, 8, rack_a), Gpu("n3", 8, 0, rack_b), Gpu("n4", 8, 8, rack_b)},
       {Job("a", 9, 1, 2, 8, SlotKind::kGpu, 1, rack_a), Job("b", 5, 2, 2, 8, SlotKind::kGpu, 1, rack_b),
        Job("c", 0, 3, 1, 1)},
       "a=- b=- c=-"},
      {"best fit keeps the big hole", {Gpu("n1", 8, 8), Gpu("n2", 8, 2)}, {Job("j1", 0, 1, 1, 2)}, "j1=n2"},
      {"jobs share a node until it is full",
       {Gpu("n1", 8, 8)},
       {Job("j1", 0, 1, 1, 4), Job("j2", 0, 2, 1, 4), Job("j3", 0, 3, 1, 4)},
       "j1=n1 j2=n1 j3=-"},
      {"CPU slots: ranks_per_node x cpus_per_rank",
       {Cpu("n1", 16, 10)},
       {Job("j1", 0, 1, 1, 3, SlotKind::kCpu, 3), Job("j2", 0, 2, 1, 1, SlotKind::kCpu, 2)},
       "j1=n1 j2=-"},
      {"a CPU job never takes GPUs", {Gpu("n1", 8, 8)}, {Job("cpu", 0, 1, 1, 1, SlotKind::kCpu, 1)}, "cpu=-"},
      {"a GPU job never takes CPU slots", {Cpu("n1", 64, 64)}, {Job("gpu", 0, 1, 1, 1)}, "gpu=-"},
      {"selector matches every label", {Gpu("n1", 8, 8, {{"rack", "a"}, {"ib", "yes"}}), Gpu("n2", 8, 8, rack_a)},
       {Job("j1", 0, 1, 2, 1, SlotKind::kGpu, 1, {{"rack", "a"}, {"ib", "yes"}})},
       "j1=-"},
      {"gang across nodes in hostname order",
       {Gpu("n3", 8, 8), Gpu("n1", 8, 8), Gpu("n2", 8, 8)},
       {Job("j1", 0, 1, 3, 8)},
       "j1=n1,n2,n3"},
  };
  for (const Case& c : cases) {
    ScheduleResult r = Schedule(c.queue, c.nodes);
    EXPECT_EQ(Render(r, c.queue), c.want) << c.name;
  }
}

TEST(SchedulerTest, CudaRanksGetTheLowestFreeGpus) {
  NodeCapacity n = Gpu("n1", 8, 0);
  n.free_gpu_uuids = {"n1-g2", "n1-g5", "n1-g7"};
  ScheduleResult r = Schedule({Job("j1", 0, 1, 1, 2)}, {n});
  ASSERT_EQ(r.placed.size(), 1u);
  EXPECT_EQ(r.placed[0].nodes[0].gpu_uuids, (std::vector<std::string>{"n1-g2", "n1-g5"}));
  EXPECT_EQ(r.placed[0].nodes[0].cpu_slots, 0);
}

TEST(SchedulerTest, CpuGrantCarriesSlotsNotGpus) {
  ScheduleResult r = Schedule({Job("j1", 0, 1, 1, 4, SlotKind::kCpu, 2)}, {Gpu("n1", 8, 8, {}, 16, 16)});
  ASSERT_EQ(r.placed.size(), 1u);
  EXPECT_TRUE(r.placed[0].nodes[0].gpu_uuids.empty());
  EXPECT_EQ(r.placed[0].nodes[0].cpu_slots, 8);
}

TEST(SchedulerTest, WaitingMessagesSayWhy) {
  ScheduleResult r = Schedule({Job("big", 0, 1, 4, 8), Job("j1", 0, 2, 2, 8), Job("j2", 0, 3, 1, 2)},
                              {Gpu("n1", 8, 8), Gpu("n2", 8, 0)});
  ASSERT_EQ(r.waiting.size(), 3u);
  EXPECT_EQ(r.waiting[0].message, "needs 4 nodes with 8 free GPUs each; only 2 schedulable nodes could ever hold that");
  EXPECT_FALSE(r.waiting[0].feasible);
  EXPECT_EQ(r.waiting[1].message, "waiting for 2 nodes with 8 free GPUs each; 1 such node now");
  EXPECT_TRUE(r.waiting[1].feasible);
  EXPECT_EQ(r.waiting[2].message, "waiting behind j1, which may use the free nodes");
}

TEST(SchedulerTest, EmptyInputs) {
  EXPECT_TRUE(Schedule({}, {Gpu("n1", 8, 8)}).placed.empty());
  ScheduleResult r = Schedule({Job("j1", 0, 1, 1, 1)}, {});
  ASSERT_EQ(r.waiting.size(), 1u);
  EXPECT_FALSE(r.waiting[0].feasible);
}

}  // namespace
}  // namespace ringmaster::coordinator
