// NodeRegistry: the slots ranks hold on nodes (see the header): the capacity
// the scheduler may place on, reservations and their release.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/core/node_registry.h"

namespace ringmaster::coordinator {
namespace {

bool SameSlot(const RankSlot& a, const std::string& job_id, int64_t generation, int32_t rank) {
  return a.job_id == job_id && a.generation == generation && a.global_rank == rank;
}

}  // namespace

std::vector<NodeCapacity> NodeRegistry::SchedulableCapacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeCapacity> out;
  for (const auto& [id, node] : nodes_) {
    if (node.info.state() != v1::NODE_STATE_READY) continue;
    NodeCapacity c;
    c.node_id = id;
    c.hostname = node.info.hostname();
    c.labels.insert(node.info.labels().begin(), node.info.labels().end());
    std::set<std::string> held;
    int32_t cpu_held = 0;
    for (const RankSlot& s : node.slots) {
      if (!s.gpu_uuid.empty()) held.insert(s.gpu_uuid);
      cpu_held += s.cpu_slots;
    }
    std::vector<v1::GpuInfo> gpus(node.info.gpus().begin(), node.info.gpus().end());
    std::stable_sort(gpus.begin(), gpus.end(),
                     [](const v1::GpuInfo& a, const v1::GpuInfo& b) { return a.index() < b.index(); });
    for (const v1::GpuInfo& g : gpus) {
      c.gpu_uuids.push_back(g.uuid());
      if (held.count(g.uuid()) == 0) c.free_gpu_uuids.push_back(g.uuid());
    }
    c.cpu_slots = node.info.cpu_slots();
    c.free_cpu_slots = std::max(0, node.info.cpu_slots() - cpu_held);
    out.push_back(std::move(c));
  }
  return out;
}

absl::Status NodeRegistry::Reserve(const std::string& node_id, const std::vector<RankSlot>& slots) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  return ReserveLocked(it->second, node_id, slots);
}

absl::Status NodeRegistry::ReserveLocked(Node& node, const std::string& node_id, const std::vector<RankSlot>& slots) {
  std::set<std::string> node_gpus;
  for (const v1::GpuInfo& g : node.info.gpus()) node_gpus.insert(g.uuid());
  std::map<std::string, const RankSlot*> gpu_holder;
  int32_t cpu_held = 0, cpu_added = 0;
  for (const RankSlot& s : node.slots) {
    if (!s.gpu_uuid.empty()) gpu_holder[s.gpu_uuid] = &s;
    cpu_held += s.cpu_slots;
  }
  std::vector<RankSlot> added;
  for (const RankSlot& s : slots) {
    bool already = false;
    for (const RankSlot& held : node.slots) already |= SameSlot(held, s.job_id, s.generation, s.global_rank);
    if (already) continue;
    if (!s.gpu_uuid.empty()) {
      if (node_gpus.count(s.gpu_uuid) == 0) {
        return absl::FailedPreconditionError(absl::StrCat("node ", node_id, " has no GPU ", s.gpu_uuid));
      }
      auto holder = gpu_holder.find(s.gpu_uuid);
      if (holder != gpu_holder.end()) {
        return absl::FailedPreconditionError(absl::StrCat("GPU ", s.gpu_uuid, " of node ", node_id,
                                                          " is held by rank ", holder->second->global_rank,
                                                          " of job ", holder->second->job_id));
      }
      gpu_holder[s.gpu_uuid] = &s;
    }
    cpu_added += s.cpu_slots;
    added.push_back(s);
  }
  if (cpu_added > 0 && cpu_held + cpu_added > node.info.cpu_slots()) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node_id, " has ", node.info.cpu_slots(),
                                                      " CPU slots; ", cpu_held, " are held and ", cpu_added,
                                                      " more were asked for"));
  }
  node.slots.insert(node.slots.end(), added.begin(), added.end());
  return absl::OkStatus();
}

void NodeRegistry::Release(const std::string& node_id, const std::string& job_id, int64_t generation,
                           int32_t global_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  std::vector<RankSlot>& slots = it->second.slots;
  slots.erase(std::remove_if(slots.begin(), slots.end(),
                             [&](const RankSlot& s) { return SameSlot(s, job_id, generation, global_rank); }),
              slots.end());
}

void NodeRegistry::ReleaseGeneration(const std::string& job_id, int64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, node] : nodes_) {
    node.slots.erase(std::remove_if(node.slots.begin(), node.slots.end(),
                                    [&](const RankSlot& s) { return s.job_id == job_id && s.generation == generation; }),
                     node.slots.end());
  }
}

std::vector<RankSlot> NodeRegistry::ReleaseAllOn(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return {};
  return std::exchange(it->second.slots, {});
}

bool NodeRegistry::ReleaseAllIfLost(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.info.state() != v1::NODE_STATE_LOST) return false;
  it->second.slots.clear();
  return true;
}

std::vector<HeldGeneration> NodeRegistry::HeldGenerations() const {
  std::map<std::pair<std::string, int64_t>, std::map<std::string, NodeGrant>> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [node_id, node] : nodes_) {
      for (const RankSlot& slot : node.slots) {
        NodeGrant& grant = held[{slot.job_id, slot.generation}][node_id];
        grant.node_id = node_id;
        if (!slot.gpu_uuid.empty()) grant.gpu_uuids.push_back(slot.gpu_uuid);
        grant.cpu_slots += slot.cpu_slots;
      }
    }
  }
  std::vector<HeldGeneration> out;
  for (auto& [key, grants] : held) {
    HeldGeneration h{key.first, key.second, {}};
    for (auto& [node_id, grant] : grants) h.nodes.push_back(std::move(grant));
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<RankSlot> NodeRegistry::SlotsOn(const std::string& node_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? std::vector<RankSlot>{} : it->second.slots;
}

}  // namespace ringmaster::coordinator
