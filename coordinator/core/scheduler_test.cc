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

// ---- Queues (rules 6-8) ----

QueueState Queue(const std::string& name, int64_t nominal_gpus, int64_t borrow_gpus = 0, double usage = 0,
                 double weight = 1, bool preempt_within = false) {
  QueueState q;
  q.name = name;
  q.nominal_gpus = nominal_gpus;
  q.borrow_gpus = borrow_gpus;
  q.decayed_usage = usage;
  q.weight = weight;
  q.preempt_within = preempt_within;
  return q;
}

JobRequest In(const std::string& queue, JobRequest job) {
  job.queue = queue;
  return job;
}

// A GPU job of `queue` holding GPUs g0.. of each node in `gpus` (node -> count).
RunningJob Holding(const std::string& id, const std::string& queue, int prio, int64_t start,
                   std::map<std::string, int> gpus, bool preempting = false) {
  RunningJob r{id, queue, prio, start, SlotKind::kGpu, {}, preempting};
  for (const auto& [node, count] : gpus) {
    NodeGrant g{node, "host-" + node, {}, 0};
    for (int i = 0; i < count; ++i) g.gpu_uuids.push_back(absl::StrCat(node, "-x", i));
    r.nodes.push_back(std::move(g));
  }
  return r;
}

std::string Preempted(const ScheduleResult& r) {
  std::vector<std::string> ids;
  for (const Preemption& p : r.preempt) ids.push_back(absl::StrCat(p.job_id, ">", p.for_job));
  return absl::StrJoin(ids, " ");
}

TEST(SchedulerQueuesTest, QuotaWithoutBorrowing) {
  const std::vector<JobRequest> jobs = {In("a", Job("a1", 0, 1, 1, 8)), In("a", Job("a2", 0, 2, 1, 8)),
                                        In("a", Job("a3", 0, 3, 1, 8, SlotKind::kCpu))};
  ScheduleResult r = ScheduleQueues(jobs, {}, {Queue("a", 8)}, {Gpu("n1", 8, 8, {}, 8, 8), Gpu("n2", 8, 8)});
  EXPECT_EQ(Render(r, jobs), "a1=n1 a2=- a3=-");
  ASSERT_EQ(r.waiting.size(), 2u);
  EXPECT_EQ(r.waiting[0].message, "queue a is at its quota: 8 of 8 GPUs in use; this job needs 8 more");
  // CPU slots are counted apart: the queue has no CPU quota at all.
  EXPECT_EQ(r.waiting[1].message, "queue a is at its quota: 0 of 0 CPU slots in use; this job needs 8 more");
  EXPECT_TRUE(r.preempt.empty());
}

TEST(SchedulerQueuesTest, BorrowingLimitCountsRunningJobs) {
  const std::vector<JobRequest> jobs = {In("a", Job("a1", 0, 1, 1, 8)), In("a", Job("a2", 0, 2, 1, 8)),
                                        In("a", Job("small", 0, 3, 1, 1))};
  // a already runs 8 GPUs (on n0); nominal 8 + borrowing 8 leaves room for one more 8-GPU job.
  ScheduleResult r = ScheduleQueues(jobs, {Holding("old", "a", 0, 1, {{"n0", 8}})}, {Queue("a", 8, 8)},
                                    {Gpu("n0", 8, 0), Gpu("n1", 8, 8), Gpu("n2", 8, 8)});
  // small would fit the limit but waits behind a2: it would spend the quota a2 waits for.
  EXPECT_EQ(Render(r, jobs), "a1=n1 a2=- small=-");
  ASSERT_EQ(r.waiting.size(), 2u);
  EXPECT_EQ(r.waiting[0].message,
            "queue a is at its borrowing limit: 8 of 8 GPUs beyond its quota of 8 in use; this job needs 8 more");
  EXPECT_EQ(r.waiting[1].message, "waiting behind a2 in queue a, which waits for its queue's quota");
}

TEST(SchedulerQueuesTest, FairShareOrderAmongBorrowers) {
  // Equal usage, b weighs 4x: b's weighted usage 25 < a's 100.
  const std::vector<JobRequest> jobs = {In("a", Job("a1", 0, 1, 1, 8)), In("b", Job("b1", 0, 2, 1, 8))};
  const std::vector<NodeCapacity> one_node = {Gpu("n1", 8, 8)};
  ScheduleResult r = ScheduleQueues(jobs, {}, {Queue("a", 0, 8, 100), Queue("b", 0, 8, 100, 4)}, one_node);
  EXPECT_EQ(Render(r, jobs), "a1=- b1=n1");
  // A tie goes by queue name; priority does not cross queues.
  const std::vector<JobRequest> tied = {In("b", Job("b1", 9, 1, 1, 8)), In("a", Job("a1", 0, 2, 1, 8))};
  r = ScheduleQueues(tied, {}, {Queue("b", 0, 8, 10), Queue("a", 0, 8, 10)}, one_node);
  EXPECT_EQ(Render(r, tied), "b1=- a1=n1");
}

TEST(SchedulerQueuesTest, GuaranteedJobsGoBeforeBorrowers) {
  // b has the lower usage, but its job would borrow; a's is within a's quota.
  const std::vector<JobRequest> jobs = {In("b", Job("b1", 0, 1, 1, 8)), In("a", Job("a1", 0, 2, 1, 8))};
  ScheduleResult r =
      ScheduleQueues(jobs, {}, {Queue("a", 8, 0, 1000), Queue("b", 0, 8, 0)}, {Gpu("n1", 8, 8)});
  EXPECT_EQ(Render(r, jobs), "b1=- a1=n1");
}

TEST(SchedulerQueuesTest, ReclaimTakesLowestPriorityThenYoungest) {
  const std::vector<QueueState> queues = {Queue("a", 0, 16), Queue("b", 8)};
  const std::vector<JobRequest> jobs = {In("b", Job("b1", 0, 1, 1, 4))};
  std::vector<RunningJob> running = {Holding("a-old", "a", 0, 1, {{"n1", 4}}),
                                     Holding("a-young", "a", 0, 2, {{"n1", 4}}),
                                     Holding("a-high", "a", 5, 3, {{"n2", 8}})};
  const std::vector<NodeCapacity> full = {Gpu("n1", 8, 0), Gpu("n2", 8, 0)};
  ScheduleResult r = ScheduleQueues(jobs, running, queues, full);
  EXPECT_EQ(Preempted(r), "a-young>b1");
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_EQ(r.preempt[0].reason, "queue b reclaims its quota for b1 (queue a borrows 16 GPUs)");
  ASSERT_EQ(r.waiting.size(), 1u);
  EXPECT_EQ(r.waiting[0].message, "waiting for preempted job a-young to leave (b reclaims its quota)");
  // Next pass, a-young is leaving: nothing more is preempted, b1 still waits for it.
  running[1].preempting = true;
  r = ScheduleQueues(jobs, running, queues, full);
  EXPECT_TRUE(r.preempt.empty());
  ASSERT_EQ(r.waiting.size(), 1u);
  EXPECT_EQ(r.waiting[0].message, "waiting for preempted job a-young to leave (b reclaims its quota)");
  // It left: b1 starts on its slots.
  running.erase(running.begin() + 1);
  r = ScheduleQueues(jobs, running, queues, {Gpu("n1", 8, 4), Gpu("n2", 8, 0)});
  EXPECT_EQ(Render(r, jobs), "b1=n1");
}

TEST(SchedulerQueuesTest, ReclaimTakesOnlyFromQueuesThatBorrow) {
  const std::vector<JobRequest> jobs = {In("b", Job("b1", 0, 1, 1, 8))};
  const std::vector<NodeCapacity> full = {Gpu("n1", 8, 0), Gpu("n2", 8, 0)};
  // a holds exactly its quota: nothing of it may go.
  ScheduleResult r = ScheduleQueues(jobs, {Holding("a1", "a", 0, 1, {{"n1", 8}}), Holding("c1", "c", 0, 2, {{"n2", 8}})},
                                    {Queue("a", 8, 8), Queue("b", 8), Queue("c", 8)}, full);
  EXPECT_EQ(Preempted(r), "");
  ASSERT_EQ(r.waiting.size(), 1u);
  EXPECT_EQ(r.waiting[0].message, "waiting for 1 node with 8 free GPUs each; 0 such nodes now");
  // a holds 16 against 8: the first victim (a whole gang) may take it down to
  // its quota or below, and then a no longer borrows.
  const std::vector<JobRequest> two = {In("b", Job("b1", 0, 1, 1, 8)), In("b", Job("b2", 0, 2, 1, 8))};
  r = ScheduleQueues(two, {Holding("a1", "a", 0, 1, {{"n1", 8}}), Holding("a2", "a", 0, 2, {{"n2", 4}}),
                           Holding("a3", "a", 0, 3, {{"n2", 4}})},
                     {Queue("a", 8, 8), Queue("b", 16)}, full);
  // n2 needs both 4-GPU jobs: a3 (a: 16 -> 12), a2 (12 -> 8). n1's a1 may not follow.
  EXPECT_EQ(Preempted(r), "a3>b1 a2>b1");
}

TEST(SchedulerQueuesTest, NoPreemptionWhenEvenEveryBorrowerCouldNotPlaceTheGang) {
  // b1 needs both nodes; n2 is held by c within its quota.
  const std::vector<JobRequest> jobs = {In("b", Job("b1", 0, 1, 2, 8))};
  const std::vector<RunningJob> running = {Holding("a1", "a", 0, 1, {{"n1", 8}}),
                                           Holding("c1", "c", 0, 2, {{"n2", 8}})};
  ScheduleResult r = ScheduleQueues(jobs, running, {Queue("a", 0, 8), Queue("b", 16), Queue("c", 8)},
                                    {Gpu("n1", 8, 0), Gpu("n2", 8, 0)});
  EXPECT_EQ(Preempted(r), "");
  EXPECT_EQ(Render(r, jobs), "b1=-");
}

TEST(SchedulerQueuesTest, ReclaimUsesAsFewVictimsAsTheGangNeeds) {
  // Free GPUs on n3 already hold one rank set; one victim (the youngest) frees the second node.
  const std::vector<JobRequest> jobs = {In("b", Job("b1", 0, 1, 2, 8))};
  const std::vector<RunningJob> running = {Holding("a1", "a", 0, 1, {{"n1", 8}}),
                                           Holding("a2", "a", 0, 2, {{"n2", 8}})};
  ScheduleResult r = ScheduleQueues(jobs, running, {Queue("a", 0, 16), Queue("b", 16)},
                                    {Gpu("n1", 8, 0), Gpu("n2", 8, 0), Gpu("n3", 8, 8)});
  EXPECT_EQ(Preempted(r), "a2>b1");
}

TEST(SchedulerQueuesTest, PreemptWithinAQueueOnlyWhenItsPolicyAllows) {
  const std::vector<JobRequest> jobs = {In("a", Job("urgent", 5, 9, 1, 8))};
  const std::vector<RunningJob> running = {Holding("low", "a", 0, 1, {{"n1", 8}}),
                                           Holding("same", "a", 5, 2, {{"n2", 8}})};
  const std::vector<NodeCapacity> full = {Gpu("n1", 8, 0), Gpu("n2", 8, 0)};
  ScheduleResult r = ScheduleQueues(jobs, running, {Queue("a", 16, 0, 0, 1, /*preempt_within=*/true)}, full);
  EXPECT_EQ(Preempted(r), "low>urgent");  // never "same": equal priority does not preempt
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_EQ(r.preempt[0].reason, "urgent (priority 5) preempts it (priority 0) within queue a");
  r = ScheduleQueues(jobs, running, {Queue("a", 16)}, full);
  EXPECT_EQ(Preempted(r), "");
}

TEST(SchedulerQueuesTest, ARestartDoesNotWaitForItsOwnLeavingGeneration) {
  // j1's previous generation still holds n1 while its ranks die: not a preemption.
  std::vector<RunningJob> running = {Holding("j1", "", 0, 1, {{"n1", 8}}, /*preempting=*/true)};
  ScheduleResult r = Schedule({Job("j1", 0, 1, 1, 8)}, {Gpu("n1", 8, 0)});
  ScheduleResult q = ScheduleQueues({Job("j1", 0, 1, 1, 8)}, running, {Queue("", 1 << 20)}, {Gpu("n1", 8, 0)});
  ASSERT_EQ(q.waiting.size(), 1u);
  EXPECT_EQ(q.waiting[0].message, "waiting for 1 node with 8 free GPUs each; 0 such nodes now");
  EXPECT_EQ(q.waiting[0].message, r.waiting[0].message);
  // Another job's leaving slots are what it waits for, by name.
  running[0].job_id = "other";
  q = ScheduleQueues({Job("j1", 0, 1, 1, 8)}, running, {Queue("", 1 << 20)}, {Gpu("n1", 8, 0)});
  ASSERT_EQ(q.waiting.size(), 1u);
  EXPECT_EQ(q.waiting[0].message, "waiting for preempted job other to leave ( reclaims its quota)");
}

TEST(SchedulerQueuesTest, UnknownQueueWaits) {
  ScheduleResult r = ScheduleQueues({In("nope", Job("j1", 0, 1, 1, 1))}, {}, {Queue("a", 8)}, {Gpu("n1", 8, 8)});
  ASSERT_EQ(r.waiting.size(), 1u);
  EXPECT_EQ(r.waiting[0].message, "queue nope does not exist");
  EXPECT_FALSE(r.waiting[0].feasible);
}

}  // namespace
}  // namespace ringmaster::coordinator
