// Randomized property test of the Scheduler: thousands of random clusters
// and queues (fixed seed, so failures reproduce), checking the invariants
// every schedule must keep.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/scheduler.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

struct World {
  std::vector<NodeCapacity> nodes;
  std::vector<JobRequest> queue;
};

World RandomWorld(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* racks[] = {"a", "b"};
  World w;
  const int n_nodes = uniform(0, 6);
  for (int i = 0; i < n_nodes; ++i) {
    NodeCapacity n;
    n.node_id = absl::StrCat("n", i);
    n.hostname = absl::StrCat("host-", uniform(0, 9), "-", i);
    if (uniform(0, 2) > 0) n.labels["rack"] = racks[uniform(0, 1)];
    const int gpus = uniform(0, 3) == 0 ? 0 : uniform(1, 8);
    for (int g = 0; g < gpus; ++g) {
      n.gpu_uuids.push_back(absl::StrCat(n.node_id, "-g", g));
      if (uniform(0, 2) > 0) n.free_gpu_uuids.push_back(n.gpu_uuids.back());
    }
    n.cpu_slots = uniform(0, 2) == 0 ? 0 : uniform(1, 32);
    n.free_cpu_slots = uniform(0, n.cpu_slots);
    w.nodes.push_back(std::move(n));
  }
  const int n_jobs = uniform(1, 8);
  for (int j = 0; j < n_jobs; ++j) {
    JobRequest r;
    r.job_id = absl::StrCat("j", j);
    r.priority = uniform(0, 2);
    r.submit_seq = uniform(1, 1000) * 10 + j;  // unique
    r.nodes = uniform(1, 3);
    r.ranks_per_node = uniform(1, 8);
    r.kind = uniform(0, 2) == 0 ? SlotKind::kCpu : SlotKind::kGpu;
    r.cpus_per_rank = uniform(1, 4);
    if (uniform(0, 3) == 0) r.node_selector["rack"] = racks[uniform(0, 1)];
    w.queue.push_back(std::move(r));
  }
  return w;
}

bool Before(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.submit_seq < b.submit_seq;
}

bool FitsOnEmptyCluster(const JobRequest& j, const std::vector<NodeCapacity>& nodes) {
  int eligible = 0;
  for (const NodeCapacity& n : nodes) eligible += Eligible(j, n) ? 1 : 0;
  return eligible >= j.nodes;
}

// A placement is a whole gang on free slots: exactly N distinct eligible
// nodes in hostname order (node ranks), R ranks' worth of slots on each, only
// free GPUs and never one twice (`gpus_used`), never more CPU slots than free
// (`cpu_used`: per node, over the pass's placements).
void CheckGang(const JobPlacement& p, const JobRequest& job,
               const std::map<std::string, const NodeCapacity*>& node_by_id, std::set<std::string>& gpus_used,
               std::map<std::string, int>& cpu_used) {
  ASSERT_EQ(static_cast<int>(p.nodes.size()), job.nodes) << p.job_id;
  std::set<std::string> distinct;
  for (const NodeGrant& g : p.nodes) {
    distinct.insert(g.node_id);
    const NodeCapacity& node = *node_by_id.at(g.node_id);
    EXPECT_TRUE(Eligible(job, node)) << p.job_id << " on " << g.node_id;
    if (job.kind == SlotKind::kGpu) {
      ASSERT_EQ(static_cast<int>(g.gpu_uuids.size()), job.ranks_per_node);
      EXPECT_EQ(g.cpu_slots, 0);
      for (const std::string& uuid : g.gpu_uuids) {
        EXPECT_NE(std::find(node.free_gpu_uuids.begin(), node.free_gpu_uuids.end(), uuid),
                  node.free_gpu_uuids.end());
        EXPECT_TRUE(gpus_used.insert(uuid).second) << uuid << " granted twice";
      }
    } else {
      EXPECT_TRUE(g.gpu_uuids.empty());
      EXPECT_EQ(g.cpu_slots, SlotsPerNode(job));
      EXPECT_LE(cpu_used[g.node_id] += g.cpu_slots, node.free_cpu_slots) << g.node_id;
    }
  }
  EXPECT_EQ(static_cast<int>(distinct.size()), job.nodes) << p.job_id << " uses a node twice";
  for (size_t i = 1; i < p.nodes.size(); ++i) EXPECT_LE(p.nodes[i - 1].hostname, p.nodes[i].hostname);
}

void CheckInvariants(const World& w, const ScheduleResult& r, int iteration) {
  SCOPED_TRACE(absl::StrCat("iteration ", iteration));
  std::map<std::string, const NodeCapacity*> node_by_id;
  for (const NodeCapacity& n : w.nodes) node_by_id[n.node_id] = &n;
  std::map<std::string, const JobRequest*> job_by_id;
  for (const JobRequest& j : w.queue) job_by_id[j.job_id] = &j;

  // Every job is decided exactly once.
  ASSERT_EQ(r.placed.size() + r.waiting.size(), w.queue.size());
  std::set<std::string> placed_ids;
  for (const JobPlacement& p : r.placed) placed_ids.insert(p.job_id);

  std::set<std::string> gpus_used;
  std::map<std::string, int> cpu_used;
  for (const JobPlacement& p : r.placed) CheckGang(p, *job_by_id.at(p.job_id), node_by_id, gpus_used, cpu_used);

  std::vector<JobRequest> ordered = w.queue;
  std::sort(ordered.begin(), ordered.end(), Before);
  std::map<std::string, const JobPlacement*> placement_of;
  for (const JobPlacement& p : r.placed) placement_of[p.job_id] = &p;

  // Priority / FIFO: a placed job never uses a (node, kind) that a feasible,
  // waiting job ahead of it could use; and it is marked backfilled exactly
  // when such a job exists.
  for (size_t i = 0; i < ordered.size(); ++i) {
    const JobRequest& job = ordered[i];
    auto it = placement_of.find(job.job_id);
    if (it == placement_of.end()) continue;
    bool behind_blocked = false;
    for (size_t k = 0; k < i; ++k) {
      const JobRequest& ahead = ordered[k];
      if (placed_ids.count(ahead.job_id) != 0 || !FitsOnEmptyCluster(ahead, w.nodes)) continue;
      behind_blocked = true;
      if (ahead.kind != job.kind) continue;
      for (const NodeGrant& g : it->second->nodes) {
        EXPECT_FALSE(Eligible(ahead, *node_by_id.at(g.node_id)))
            << job.job_id << " took " << g.node_id << " from " << ahead.job_id << " ahead of it";
      }
    }
    EXPECT_EQ(it->second->backfilled, behind_blocked) << job.job_id;
  }

  // The head: the first job in order is placed whenever it fits now.
  if (!ordered.empty()) {
    const JobRequest& first = ordered[0];
    int fits = 0;
    for (const NodeCapacity& n : w.nodes) fits += (Eligible(first, n) && FreeSlots(n, first.kind) >= SlotsPerNode(first)) ? 1 : 0;
    EXPECT_EQ(placed_ids.count(first.job_id) != 0, fits >= first.nodes) << first.job_id;
  }

  // Backfill never delays the head: let H be the first feasible job left
  // waiting. Suppose every job running before this round ended now: with
  // only the backfilled jobs' grants taken, H must be placeable.
  const JobRequest* head = nullptr;
  for (const JobRequest& j : ordered) {
    if (placed_ids.count(j.job_id) == 0 && FitsOnEmptyCluster(j, w.nodes)) {
      head = &j;
      break;
    }
  }
  if (head != nullptr) {
    std::vector<NodeCapacity> after = w.nodes;
    for (NodeCapacity& n : after) {
      n.free_gpu_uuids = n.gpu_uuids;
      n.free_cpu_slots = n.cpu_slots;
    }
    for (const JobPlacement& p : r.placed) {
      if (!p.backfilled) continue;
      for (const NodeGrant& g : p.nodes) {
        for (NodeCapacity& n : after) {
          if (n.node_id != g.node_id) continue;
          for (const std::string& uuid : g.gpu_uuids) {
            n.free_gpu_uuids.erase(std::find(n.free_gpu_uuids.begin(), n.free_gpu_uuids.end(), uuid));
          }
          n.free_cpu_slots -= g.cpu_slots;
        }
      }
    }
    ScheduleResult alone = Schedule({*head}, after);
    EXPECT_EQ(alone.placed.size(), 1u) << "backfilled jobs would delay head " << head->job_id;
  }
}

TEST(SchedulerPropertyTest, RandomClustersKeepEveryInvariant) {
  std::mt19937 rng(20261121);
  int placed = 0, backfilled = 0, waiting = 0;
  for (int iteration = 0; iteration < 5000; ++iteration) {
    World w = RandomWorld(rng);
    ScheduleResult r = Schedule(w.queue, w.nodes);
    CheckInvariants(w, r, iteration);
    if (::testing::Test::HasFailure()) return;
    // Pure and deterministic: the queue's input order does not matter.
    std::vector<JobRequest> shuffled = w.queue;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    ScheduleResult again = Schedule(shuffled, w.nodes);
    ASSERT_EQ(again.placed.size(), r.placed.size());
    for (size_t i = 0; i < r.placed.size(); ++i) {
      EXPECT_EQ(again.placed[i].job_id, r.placed[i].job_id);
      ASSERT_EQ(again.placed[i].nodes.size(), r.placed[i].nodes.size());
      for (size_t k = 0; k < r.placed[i].nodes.size(); ++k) {
        EXPECT_EQ(again.placed[i].nodes[k].node_id, r.placed[i].nodes[k].node_id);
        EXPECT_EQ(again.placed[i].nodes[k].gpu_uuids, r.placed[i].nodes[k].gpu_uuids);
      }
    }
    placed += static_cast<int>(r.placed.size());
    waiting += static_cast<int>(r.waiting.size());
    for (const JobPlacement& p : r.placed) backfilled += p.backfilled ? 1 : 0;
  }
  // The generator must exercise every path, or the properties prove little.
  EXPECT_GT(placed, 1000);
  EXPECT_GT(waiting, 1000);
  EXPECT_GT(backfilled, 100);
  std::printf("placed %d (backfilled %d), waiting %d\n", placed, backfilled, waiting);
}

// ---- Queues: passes simulated until nothing changes ----

struct QueueWorld {
  std::vector<NodeCapacity> nodes;  // totals; free slots derive from `running`
  std::vector<QueueState> queues;
  std::vector<RunningJob> running;
  std::vector<JobRequest> pending;
};

int64_t NominalOf(const QueueState& q, SlotKind k) { return k == SlotKind::kGpu ? q.nominal_gpus : q.nominal_cpus; }
int64_t LimitOf(const QueueState& q, SlotKind k) {
  return NominalOf(q, k) + (k == SlotKind::kGpu ? q.borrow_gpus : q.borrow_cpus);
}
int64_t Held(const RunningJob& r) {
  int64_t n = 0;
  for (const NodeGrant& g : r.nodes) n += r.kind == SlotKind::kGpu ? static_cast<int64_t>(g.gpu_uuids.size()) : g.cpu_slots;
  return n;
}

// The nodes with what `running` (leaving jobs too) does not hold.
std::vector<NodeCapacity> FreeCapacity(const QueueWorld& w, const std::vector<RunningJob>& running) {
  std::vector<NodeCapacity> out = w.nodes;
  for (NodeCapacity& n : out) {
    std::set<std::string> held;
    int32_t cpu = 0;
    for (const RunningJob& r : running) {
      for (const NodeGrant& g : r.nodes) {
        if (g.node_id != n.node_id) continue;
        held.insert(g.gpu_uuids.begin(), g.gpu_uuids.end());
        cpu += g.cpu_slots;
      }
    }
    n.free_gpu_uuids.clear();
    for (const std::string& u : n.gpu_uuids) {
      if (held.count(u) == 0) n.free_gpu_uuids.push_back(u);
    }
    n.free_cpu_slots = n.cpu_slots - cpu;
  }
  return out;
}

JobRequest RandomJob(std::mt19937& rng, const std::string& id, int n_queues, int64_t seq) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  JobRequest r;
  r.job_id = id;
  r.priority = uniform(0, 2);
  r.submit_seq = seq;
  r.nodes = uniform(1, 3);
  r.ranks_per_node = uniform(0, 1) == 0 ? 8 : uniform(1, 4);
  r.kind = uniform(0, 3) == 0 ? SlotKind::kCpu : SlotKind::kGpu;
  r.cpus_per_rank = uniform(1, 4);
  if (uniform(0, 4) == 0) r.node_selector["rack"] = uniform(0, 1) == 0 ? "a" : "b";
  r.queue = absl::StrCat("q", uniform(0, n_queues - 1));
  return r;
}

QueueWorld RandomQueueWorld(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto pick = [&](std::vector<int64_t> v) { return v[uniform(0, static_cast<int>(v.size()) - 1)]; };
  QueueWorld w;
  for (int i = 0, n = uniform(1, 8); i < n; ++i) {
    NodeCapacity node;
    node.node_id = absl::StrCat("n", i);
    node.hostname = absl::StrCat("host-", uniform(0, 9), "-", i);
    if (uniform(0, 2) > 0) node.labels["rack"] = uniform(0, 1) == 0 ? "a" : "b";
    for (int g = 0, gpus = uniform(0, 3) == 0 ? 4 : 8; g < gpus; ++g) {
      node.gpu_uuids.push_back(absl::StrCat(node.node_id, "-g", g));
    }
    node.cpu_slots = uniform(0, 2) == 0 ? 0 : uniform(8, 32);
    w.nodes.push_back(std::move(node));
  }
  const int n_queues = uniform(1, 4);
  for (int i = 0; i < n_queues; ++i) {
    QueueState q;
    q.name = absl::StrCat("q", i);
    q.nominal_gpus = pick({0, 0, 4, 8, 16});  // 0: a pure borrower
    q.borrow_gpus = pick({0, 8, 16, 64});
    q.nominal_cpus = pick({0, 8, 32});
    q.borrow_cpus = pick({0, 16, 64});
    q.weight = static_cast<double>(pick({1, 2, 4}));
    q.decayed_usage = uniform(0, 3) * 100.0;
    q.preempt_within = uniform(0, 2) == 0;
    w.queues.push_back(std::move(q));
  }
  // What runs now: what a pass from an empty cluster would have placed.
  std::vector<JobRequest> earlier;
  for (int j = 0, n = uniform(0, 14); j < n; ++j) earlier.push_back(RandomJob(rng, absl::StrCat("r", j), n_queues, j));
  ScheduleResult fill = ScheduleQueues(earlier, {}, w.queues, FreeCapacity(w, {}));
  for (const JobPlacement& p : fill.placed) {
    const JobRequest& job = *std::find_if(earlier.begin(), earlier.end(), [&](const JobRequest& j) { return j.job_id == p.job_id; });
    w.running.push_back({p.job_id, job.queue, job.priority, job.submit_seq, job.kind, p.nodes, uniform(0, 9) == 0});
  }
  for (int j = 0, n = uniform(1, 10); j < n; ++j) w.pending.push_back(RandomJob(rng, absl::StrCat("j", j), n_queues, 100 + j));
  return w;
}

std::map<std::pair<std::string, SlotKind>, int64_t> Usage(const std::vector<RunningJob>& running) {
  std::map<std::pair<std::string, SlotKind>, int64_t> used;
  for (const RunningJob& r : running) {
    if (!r.preempting) used[{r.queue, r.kind}] += Held(r);
  }
  return used;
}

bool QueueBefore(const QueueState& a, const QueueState& b) {
  const double sa = a.decayed_usage / a.weight, sb = b.decayed_usage / b.weight;
  return sa != sb ? sa < sb : a.name < b.name;
}

// One pass's invariants: every job decided once; gangs whole on free slots;
// placements within the borrowing limits; victims chosen as rule 8 allows;
// backfill within a queue never takes what its head could use.
void CheckPass(const QueueWorld& w, const std::vector<NodeCapacity>& free, const ScheduleResult& r) {
  ASSERT_EQ(r.placed.size() + r.waiting.size(), w.pending.size());
  std::map<std::string, const JobRequest*> job_by_id;
  for (const JobRequest& j : w.pending) job_by_id[j.job_id] = &j;
  std::map<std::string, const NodeCapacity*> node_by_id;
  for (const NodeCapacity& n : free) node_by_id[n.node_id] = &n;
  auto used = Usage(w.running);
  std::set<std::string> gpus_used;
  std::map<std::string, int> cpu_used;
  for (const JobPlacement& p : r.placed) {
    const JobRequest& job = *job_by_id.at(p.job_id);
    CheckGang(p, job, node_by_id, gpus_used, cpu_used);
    used[{job.queue, job.kind}] += int64_t{job.nodes} * SlotsPerNode(job);
  }
  // Victims: running, not leaving, once each; other queues' victims never
  // take their queue below its nominal quota; own-queue victims rank lower.
  std::map<std::pair<std::string, SlotKind>, int64_t> after = used;  // with this pass's placements
  std::set<std::string> victims;
  for (const Preemption& p : r.preempt) {
    auto v = std::find_if(w.running.begin(), w.running.end(), [&](const RunningJob& x) { return x.job_id == p.job_id; });
    ASSERT_NE(v, w.running.end()) << p.job_id;
    EXPECT_FALSE(v->preempting) << p.job_id << " preempted twice";
    EXPECT_TRUE(victims.insert(p.job_id).second);
    const JobRequest& for_job = *job_by_id.at(p.for_job);
    EXPECT_EQ(v->kind, for_job.kind);
    after[{v->queue, v->kind}] -= Held(*v);
    if (v->queue == for_job.queue) EXPECT_LT(v->priority, for_job.priority) << p.job_id;
  }
  // Rule 6: usage counts this pass's placements, and its victims as gone.
  for (const QueueState& q : w.queues) {
    for (SlotKind k : {SlotKind::kGpu, SlotKind::kCpu}) {
      const bool placed_any = std::any_of(r.placed.begin(), r.placed.end(), [&](const JobPlacement& p) {
        return job_by_id.at(p.job_id)->queue == q.name && job_by_id.at(p.job_id)->kind == k;
      });
      if (placed_any) EXPECT_LE((after[{q.name, k}]), LimitOf(q, k)) << "queue " << q.name << " over its limit";
    }
  }
  // Each reclaim victim was picked while its queue borrowed: so the queue
  // ends above its nominal quota less one victim's worth at most.
  std::map<std::pair<std::string, SlotKind>, int64_t> largest_victim;
  for (const Preemption& p : r.preempt) {
    auto v = std::find_if(w.running.begin(), w.running.end(), [&](const RunningJob& x) { return x.job_id == p.job_id; });
    if (v->queue == job_by_id.at(p.for_job)->queue) continue;
    int64_t& largest = largest_victim[{v->queue, v->kind}];
    largest = std::max(largest, Held(*v));
  }
  for (const auto& [queue_kind, largest] : largest_victim) {
    const QueueState& q = *std::find_if(w.queues.begin(), w.queues.end(), [&](const QueueState& x) { return x.name == queue_kind.first; });
    EXPECT_GT(after[queue_kind] + largest, NominalOf(q, queue_kind.second)) << "reclaim took from " << q.name
                                                                            << ", which did not borrow";
  }
  // Per queue, rule 4: let H be the queue's first feasible waiting job. With
  // every node empty but for the grants of its queue's later jobs, H fits.
  std::set<std::string> waiting;
  for (const WaitingJob& x : r.waiting) waiting.insert(x.job_id);
  for (const QueueState& q : w.queues) {
    std::vector<JobRequest> mine;
    for (const JobRequest& j : w.pending) {
      if (j.queue == q.name) mine.push_back(j);
    }
    std::sort(mine.begin(), mine.end(), Before);
    auto head = std::find_if(mine.begin(), mine.end(), [&](const JobRequest& j) {
      return waiting.count(j.job_id) != 0 && FitsOnEmptyCluster(j, w.nodes);
    });
    if (head == mine.end()) continue;
    std::vector<RunningJob> later;
    for (auto it = head + 1; it != mine.end(); ++it) {
      for (const JobPlacement& p : r.placed) {
        if (p.job_id == it->job_id) later.push_back({p.job_id, q.name, 0, 0, it->kind, p.nodes, false});
      }
    }
    JobRequest alone = *head;
    alone.queue.clear();
    EXPECT_EQ(Schedule({alone}, FreeCapacity(w, later)).placed.size(), 1u)
        << "queue " << q.name << ": backfill delays its head " << head->job_id;
  }
}

// The world in a few lines, for a failure message.
std::string Describe(const QueueWorld& w) {
  std::string out;
  for (const NodeCapacity& n : w.nodes) {
    absl::StrAppend(&out, "\n node ", n.node_id, " ", n.hostname, " gpus=", n.gpu_uuids.size(), " cpus=", n.cpu_slots,
                    n.labels.empty() ? "" : " rack=" + n.labels.begin()->second);
  }
  for (const QueueState& q : w.queues) {
    absl::StrAppend(&out, "\n queue ", q.name, " gpu ", q.nominal_gpus, "+", q.borrow_gpus, " cpu ", q.nominal_cpus, "+",
                    q.borrow_cpus, " share ", q.decayed_usage / q.weight, q.preempt_within ? " within" : "");
  }
  for (const RunningJob& r : w.running) {
    absl::StrAppend(&out, "\n running ", r.job_id, " ", r.queue, " prio ", r.priority, " seq ", r.start_seq,
                    r.kind == SlotKind::kGpu ? " gpu" : " cpu", r.preempting ? " leaving" : "", " on");
    for (const NodeGrant& g : r.nodes) absl::StrAppend(&out, " ", g.node_id, ":", g.gpu_uuids.size() + g.cpu_slots);
  }
  for (const JobRequest& j : w.pending) {
    absl::StrAppend(&out, "\n pending ", j.job_id, " ", j.queue, " prio ", j.priority, " ", j.nodes, "x",
                    SlotsPerNode(j), j.kind == SlotKind::kGpu ? " gpu" : " cpu",
                    j.node_selector.empty() ? "" : " rack=" + j.node_selector.begin()->second);
  }
  return out;
}

// At a fixed point, no queue waits below its quota for what reclaim would
// give it. Precisely: let H be queue q's first feasible waiting job, of kind
// K, within q's nominal quota. If H could start on the cluster with every job
// of every queue whose nominal quota of K is 0 removed (those are always
// reclaimable, whatever their size), H must have started — unless a queue
// before q in fair-share order also waits within its quota for K (it goes
// first, and a blocked job keeps its nodes: rule 4). Queues with a nominal
// quota above 0 are not counted as reclaimable here: a gang may need more of
// them than lies above their quota (fragmentation), and rule 8 never takes a
// queue below it.
int CheckReclaimed(const QueueWorld& w) {
  auto used = Usage(w.running);
  int checked = 0;
  std::map<std::pair<std::string, SlotKind>, bool> guaranteed_waiter;  // queue, kind
  std::vector<std::pair<const QueueState*, JobRequest>> heads;
  for (const QueueState& q : w.queues) {
    std::vector<JobRequest> mine;
    for (const JobRequest& j : w.pending) {
      if (j.queue == q.name && FitsOnEmptyCluster(j, w.nodes)) mine.push_back(j);
    }
    std::sort(mine.begin(), mine.end(), Before);
    for (const JobRequest& j : mine) {
      if (used[{q.name, j.kind}] + int64_t{j.nodes} * SlotsPerNode(j) <= NominalOf(q, j.kind)) {
        guaranteed_waiter[{q.name, j.kind}] = true;
      }
    }
    if (!mine.empty()) heads.push_back({&q, mine[0]});
  }
  for (const auto& [q, head] : heads) {
    if (used[{q->name, head.kind}] + int64_t{head.nodes} * SlotsPerNode(head) > NominalOf(*q, head.kind)) continue;
    bool queue_ahead = false;
    for (const QueueState& other : w.queues) {
      queue_ahead |= QueueBefore(other, *q) && guaranteed_waiter[{other.name, head.kind}];
    }
    if (queue_ahead) continue;
    std::vector<RunningJob> kept;
    for (const RunningJob& r : w.running) {
      const QueueState& rq = *std::find_if(w.queues.begin(), w.queues.end(), [&](const QueueState& x) { return x.name == r.queue; });
      if (r.kind != head.kind || NominalOf(rq, r.kind) > 0 || r.queue == q->name) kept.push_back(r);
    }
    JobRequest alone = head;
    alone.queue.clear();
    ++checked;
    EXPECT_EQ(Schedule({alone}, FreeCapacity(w, kept)).placed.size(), 0u)
        << "queue " << q->name << " is kept below its quota: " << head.job_id << " waits, yet reclaim would place it"
        << Describe(w);
  }
  return checked;
}

TEST(SchedulerPropertyTest, QueuesKeepQuotasLimitsGangsAndBackfill) {
  constexpr int kWorlds = 20000;
  std::mt19937 rng(20261128);
  int placed = 0, preempted = 0, reclaim_checks = 0, passes = 0;
  for (int world = 0; world < kWorlds; ++world) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    QueueWorld w = RandomQueueWorld(rng);
    int64_t seq = 1000;
    const size_t bound = w.pending.size() + w.running.size() + 2;
    bool settled = false;
    for (size_t pass = 0; pass < bound && !settled; ++pass, ++passes) {
      const std::vector<NodeCapacity> free = FreeCapacity(w, w.running);
      ScheduleResult r = ScheduleQueues(w.pending, w.running, w.queues, free);
      CheckPass(w, free, r);
      if (::testing::Test::HasFailure()) return;
      // Apply: leaving jobs leave (preempted ones at once), placed ones run.
      std::set<std::string> gone;
      for (const Preemption& p : r.preempt) gone.insert(p.job_id);
      const bool leaving = std::any_of(w.running.begin(), w.running.end(), [](const RunningJob& x) { return x.preempting; });
      settled = r.placed.empty() && r.preempt.empty() && !leaving;
      w.running.erase(std::remove_if(w.running.begin(), w.running.end(),
                                     [&](const RunningJob& x) { return x.preempting || gone.count(x.job_id) != 0; }),
                      w.running.end());
      for (const JobPlacement& p : r.placed) {
        auto it = std::find_if(w.pending.begin(), w.pending.end(), [&](const JobRequest& j) { return j.job_id == p.job_id; });
        w.running.push_back({it->job_id, it->queue, it->priority, seq++, it->kind, p.nodes, false});
        w.pending.erase(it);
      }
      placed += static_cast<int>(r.placed.size());
      preempted += static_cast<int>(r.preempt.size());
    }
    ASSERT_TRUE(settled) << "no fixed point within " << bound << " passes";
    reclaim_checks += CheckReclaimed(w);
    if (::testing::Test::HasFailure()) return;
  }
  // The generator must reach every rule, or the properties prove little.
  EXPECT_GT(placed, 20000);
  EXPECT_GT(preempted, 1000);
  EXPECT_GT(reclaim_checks, 800);
  std::printf("%d worlds, %d passes: placed %d, preempted %d, reclaim checks %d\n", kWorlds, passes, placed, preempted,
              reclaim_checks);
}

}  // namespace
}  // namespace ringmaster::coordinator
