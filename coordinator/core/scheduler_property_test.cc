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
  for (const JobPlacement& p : r.placed) {
    const JobRequest& job = *job_by_id.at(p.job_id);
    // Gang: exactly N distinct nodes, R ranks' worth of slots on each.
    ASSERT_EQ(static_cast<int>(p.nodes.size()), job.nodes) << p.job_id;
    std::set<std::string> distinct;
    for (const NodeGrant& g : p.nodes) {
      distinct.insert(g.node_id);
      const NodeCapacity& node = *node_by_id.at(g.node_id);
      EXPECT_TRUE(Eligible(job, node)) << p.job_id << " on " << g.node_id;
      if (job.kind == SlotKind::kGpu) {
        EXPECT_EQ(static_cast<int>(g.gpu_uuids.size()), job.ranks_per_node);
        EXPECT_EQ(g.cpu_slots, 0);
        for (const std::string& uuid : g.gpu_uuids) {
          // Only free GPUs, never one twice.
          EXPECT_NE(std::find(node.free_gpu_uuids.begin(), node.free_gpu_uuids.end(), uuid),
                    node.free_gpu_uuids.end());
          EXPECT_TRUE(gpus_used.insert(uuid).second) << uuid << " granted twice";
        }
      } else {
        EXPECT_TRUE(g.gpu_uuids.empty());
        EXPECT_EQ(g.cpu_slots, job.ranks_per_node * job.cpus_per_rank);
        cpu_used[g.node_id] += g.cpu_slots;
      }
    }
    EXPECT_EQ(static_cast<int>(distinct.size()), job.nodes) << p.job_id << " uses a node twice";
    // Node ranks in hostname order.
    for (size_t i = 1; i < p.nodes.size(); ++i) EXPECT_LE(p.nodes[i - 1].hostname, p.nodes[i].hostname);
  }
  // Never more slots than free.
  for (const auto& [node_id, used] : cpu_used) EXPECT_LE(used, node_by_id.at(node_id)->free_cpu_slots);

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

}  // namespace
}  // namespace ringmaster::coordinator
