#include "coordinator/core/scheduler.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::coordinator {
namespace {

// The scheduler's working copy of one node.
struct WorkNode {
  const NodeCapacity* node;
  std::vector<std::string> free_gpus;  // by index
  int32_t free_cpu;
};

std::string SlotWords(const JobRequest& job) {
  if (job.kind == SlotKind::kGpu) {
    return absl::StrCat(job.ranks_per_node, job.ranks_per_node == 1 ? " free GPU" : " free GPUs");
  }
  return absl::StrCat(SlotsPerNode(job), " free CPU slots");
}

std::string SelectorWords(const JobRequest& job) {
  if (job.node_selector.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [k, v] : job.node_selector) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(" labelled ", absl::StrJoin(parts, ","));
}

std::string NodesWords(int n) { return absl::StrCat(n, n == 1 ? " node" : " nodes"); }

bool Before(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit_seq != b.submit_seq) return a.submit_seq < b.submit_seq;
  return a.job_id < b.job_id;
}

int32_t WorkFree(const WorkNode& w, SlotKind kind) {
  return kind == SlotKind::kGpu ? static_cast<int32_t>(w.free_gpus.size()) : w.free_cpu;
}

}  // namespace

int32_t SlotsPerNode(const JobRequest& job) {
  return job.kind == SlotKind::kGpu ? job.ranks_per_node : job.ranks_per_node * job.cpus_per_rank;
}

int32_t FreeSlots(const NodeCapacity& node, SlotKind kind) {
  return kind == SlotKind::kGpu ? static_cast<int32_t>(node.free_gpu_uuids.size()) : node.free_cpu_slots;
}

bool Eligible(const JobRequest& job, const NodeCapacity& node) {
  if (job.excluded_nodes.count(node.node_id) > 0) return false;
  for (const auto& [key, value] : job.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  const int32_t total =
      job.kind == SlotKind::kGpu ? static_cast<int32_t>(node.gpu_uuids.size()) : node.cpu_slots;
  return total >= SlotsPerNode(job);
}

std::optional<std::string> Unschedulable(const JobRequest& job, const std::vector<NodeCapacity>& nodes) {
  const auto eligible = std::count_if(nodes.begin(), nodes.end(), [&](const NodeCapacity& n) { return Eligible(job, n); });
  if (eligible >= job.nodes) return std::nullopt;
  std::string why = absl::StrCat("needs ", NodesWords(job.nodes), " with ", SlotWords(job), " each",
                                 SelectorWords(job), "; only ", eligible, " schedulable node", eligible == 1 ? "" : "s",
                                 " could ever hold that");
  // The likely cause on a CPU-only cluster: resources.device defaults to cuda.
  const bool gpu_anywhere = std::any_of(nodes.begin(), nodes.end(), [](const NodeCapacity& n) { return !n.gpu_uuids.empty(); });
  const bool cpu_anywhere = std::any_of(nodes.begin(), nodes.end(), [](const NodeCapacity& n) { return n.cpu_slots > 0; });
  if (job.kind == SlotKind::kGpu && !gpu_anywhere && cpu_anywhere) {
    absl::StrAppend(&why, " (no node has a GPU: set resources.device: cpu to use CPU slots)");
  }
  return why;
}

ScheduleResult Schedule(std::vector<JobRequest> queue, const std::vector<NodeCapacity>& nodes) {
  std::sort(queue.begin(), queue.end(), Before);
  std::vector<WorkNode> work;
  work.reserve(nodes.size());
  for (const NodeCapacity& n : nodes) work.push_back({&n, n.free_gpu_uuids, n.free_cpu_slots});

  // (node index, kind) pairs some blocked job ahead could use (rule 4).
  std::set<std::pair<size_t, SlotKind>> reserved;
  std::string first_blocked;  // for messages
  ScheduleResult result;

  for (const JobRequest& job : queue) {
    const int32_t need = SlotsPerNode(job);
    if (job.nodes < 1 || job.ranks_per_node < 1 || need < 1) {
      result.waiting.push_back({job.job_id, "invalid request: nodes and ranks_per_node must be >= 1", false});
      continue;
    }
    if (std::optional<std::string> why = Unschedulable(job, nodes); why.has_value()) {
      result.waiting.push_back({job.job_id, *std::move(why), false});
      continue;
    }
    std::vector<size_t> eligible;
    for (size_t i = 0; i < work.size(); ++i) {
      if (Eligible(job, *work[i].node)) eligible.push_back(i);
    }
    std::vector<size_t> fits_now;   // fits, ignoring reservations
    std::vector<size_t> candidates;  // fits and not reserved
    for (size_t i : eligible) {
      if (WorkFree(work[i], job.kind) < need) continue;
      fits_now.push_back(i);
      if (reserved.count({i, job.kind}) == 0) candidates.push_back(i);
    }
    if (static_cast<int32_t>(candidates.size()) < job.nodes) {
      std::string message;
      if (static_cast<int32_t>(fits_now.size()) >= job.nodes) {
        message = absl::StrCat("waiting behind ", first_blocked, ", which may use the free nodes");
      } else {
        message = absl::StrCat("waiting for ", NodesWords(job.nodes), " with ", SlotWords(job), " each",
                               SelectorWords(job), "; ", fits_now.size(), " such node",
                               fits_now.size() == 1 ? "" : "s", " now");
      }
      result.waiting.push_back({job.job_id, std::move(message), true});
      if (first_blocked.empty()) first_blocked = job.job_id;
      for (size_t i : eligible) reserved.insert({i, job.kind});
      continue;
    }
    // Best fit, then hostname, then node id.
    std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      const int32_t fa = WorkFree(work[a], job.kind), fb = WorkFree(work[b], job.kind);
      if (fa != fb) return fa < fb;
      if (work[a].node->hostname != work[b].node->hostname) return work[a].node->hostname < work[b].node->hostname;
      return work[a].node->node_id < work[b].node->node_id;
    });
    candidates.resize(job.nodes);
    std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      if (work[a].node->hostname != work[b].node->hostname) return work[a].node->hostname < work[b].node->hostname;
      return work[a].node->node_id < work[b].node->node_id;
    });
    JobPlacement placement{job.job_id, {}, !first_blocked.empty()};
    for (size_t i : candidates) {
      WorkNode& w = work[i];
      NodeGrant grant{w.node->node_id, w.node->hostname, {}, 0};
      if (job.kind == SlotKind::kGpu) {
        grant.gpu_uuids.assign(w.free_gpus.begin(), w.free_gpus.begin() + need);
        w.free_gpus.erase(w.free_gpus.begin(), w.free_gpus.begin() + need);
      } else {
        grant.cpu_slots = need;
        w.free_cpu -= need;
      }
      placement.nodes.push_back(std::move(grant));
    }
    result.placed.push_back(std::move(placement));
  }
  return result;
}

}  // namespace ringmaster::coordinator
