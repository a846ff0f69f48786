#include "coordinator/core/dispatcher.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/core/rank_layout.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// Program jobs' MASTER_PORT: torchrun's default and the 499 ports above it.
constexpr int32_t kMasterPortFirst = 29500;
constexpr int32_t kMasterPorts = 500;

// The host part of a NodeInfo.address ("host", "host:port", "[v6]:port").
std::string HostOf(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(1, address.find(']') - 1);
  const size_t colon = address.find(':');
  return colon != std::string::npos && address.find(':', colon + 1) == std::string::npos ? address.substr(0, colon)
                                                                                          : address;
}

}  // namespace

int32_t ChooseMasterPort(const std::string& job_id, int64_t generation, const std::set<int32_t>& taken) {
  // Spread over the range by job and generation, so that a port some other
  // process on the node holds is not chosen again by the next generation.
  const size_t start = std::hash<std::string>{}(absl::StrCat(job_id, "/", generation)) % kMasterPorts;
  for (int32_t i = 0; i < kMasterPorts; ++i) {
    const int32_t port = kMasterPortFirst + static_cast<int32_t>((start + i) % kMasterPorts);
    if (taken.count(port) == 0) return port;
  }
  return 0;
}

int32_t ElasticNodes(const JobLifecycle::Waiting& job, const std::vector<NodeCapacity>& capacity) {
  const v1::ResourceSpec& res = job.resources;
  const int32_t wanted = res.nodes();
  if (job.min_nodes <= 0 || job.min_nodes >= wanted) return wanted;
  const bool cuda = res.device() != v1::ResourceSpec::CPU;
  const int32_t per_node = cuda ? res.ranks_per_node() : res.ranks_per_node() * res.cpus_per_rank();
  int32_t could_hold = 0;  // schedulable nodes that could hold the job's ranks when free
  for (const NodeCapacity& n : capacity) {
    if (job.request.excluded_nodes.count(n.node_id) > 0) continue;
    bool selected = true;
    for (const auto& [key, value] : res.node_selector()) {
      auto it = n.labels.find(key);
      selected &= it != n.labels.end() && it->second == value;
    }
    const int32_t total = cuda ? static_cast<int32_t>(n.gpu_uuids.size()) : n.cpu_slots;
    if (selected && total >= per_node) ++could_hold;
  }
  return std::max(job.min_nodes, std::min(wanted, could_hold));
}

Dispatcher::Dispatcher(const Clock* clock, NodeRegistry* nodes, JobLifecycle* jobs, QueueBook* queues,
                       std::function<void(absl::Duration)> on_pass)
    : clock_(clock), nodes_(nodes), jobs_(jobs), queues_(queues), on_pass_(std::move(on_pass)) {}

void Dispatcher::ScheduleNow() {
  std::lock_guard<std::mutex> lock(pass_mu_);
  // Before reading every node (a pass runs after every registration: during a
  // burst of thousands, reading them each time held the registry's lock that
  // registrations and heartbeats wait for, and nodes lost their first lease).
  if (!jobs_->HasWaitingJobs()) return;
  const absl::Time pass_start = clock_->Now();
  const std::vector<NodeCapacity> capacity = nodes_->SchedulableCapacity();
  std::vector<JobLifecycle::Waiting> waiting = jobs_->WaitingJobs(capacity);
  if (waiting.empty()) return;
  std::vector<JobRequest> queue;
  std::map<std::string, const JobLifecycle::Waiting*> by_id;
  for (JobLifecycle::Waiting& w : waiting) {
    w.request.nodes = ElasticNodes(w, capacity);
    queue.push_back(w.request);
    by_id[w.request.job_id] = &w;
  }
  const std::vector<RunningJob> running = jobs_->RunningJobs(nodes_->HeldGenerations());
  ScheduleResult result = ScheduleQueues(std::move(queue), running, queues_->States(), capacity);
  for (const JobPlacement& placed : result.placed) {
    if (absl::Status s = Place(*by_id.at(placed.job_id), placed); !s.ok()) {
      spdlog::error("job {}: placement not applied: {}", placed.job_id, s.ToString());
    }
  }
  for (const Preemption& p : result.preempt) {
    spdlog::info("job {}: preempted for {}: {}", p.job_id, p.for_job, p.reason);
    if (absl::Status s = jobs_->Preempt(p.job_id, p.reason); !s.ok()) {
      spdlog::error("job {}: preemption not applied (next pass): {}", p.job_id, s.ToString());
    }
  }
  for (const WaitingJob& w : result.waiting) {
    jobs_->SetWaitingMessage(w.job_id, w.message, w.feasible ? "" : w.message);
  }
  if (on_pass_) on_pass_(clock_->Now() - pass_start);
}

std::map<std::string, Dispatcher::QueueLoad> Dispatcher::QueueLoads() const {
  std::map<std::string, QueueLoad> loads;
  for (const RunningJob& r : jobs_->RunningJobs(nodes_->HeldGenerations())) {
    QueueLoad& load = loads[r.queue];
    if (!r.preempting) ++load.running_jobs;
    for (const NodeGrant& g : r.nodes) {
      load.used.gpus += static_cast<int64_t>(g.gpu_uuids.size());
      load.used.cpu_slots += g.cpu_slots;
    }
  }
  for (const std::string& queue : jobs_->WaitingQueues()) ++loads[queue].waiting_jobs;
  return loads;
}

void Dispatcher::AccountUsage() {
  std::map<std::string, QueueResources> held;
  for (const auto& [queue, load] : QueueLoads()) held[queue] = load.used;
  queues_->Advance(held);
}

absl::Status Dispatcher::Place(const JobLifecycle::Waiting& job, const JobPlacement& granted) {
  const v1::ResourceSpec& res = job.resources;
  const std::string& job_id = job.request.job_id;
  const int64_t gen = job.generation + 1;
  const bool cuda = res.device() != v1::ResourceSpec::CPU;
  // Elastic: the data-parallel size follows the node count (the global batch
  // stays; the trainer splits it over the ranks there are).
  const int32_t data = static_cast<int32_t>(granted.nodes.size()) * res.ranks_per_node() / job.pipeline;
  ASSIGN_OR_RETURN(v1::Placement placement,
                   BuildPlacement(gen, res.ranks_per_node(), data, job.pipeline, granted.nodes, cuda));
  if (job.program) RETURN_IF_ERROR(ChooseMaster(job_id, &placement));
  for (const NodeGrant& grant : granted.nodes) {
    std::vector<RankSlot> slots;
    for (const v1::RankAssignment& r : placement.ranks()) {
      if (r.node_id() != grant.node_id) continue;
      slots.push_back({job_id, gen, r.global_rank(), r.gpu_uuid(), cuda ? 0 : res.cpus_per_rank(),
                       r.global_rank() == 0 ? placement.master_port() : 0});
    }
    if (absl::Status s = nodes_->Reserve(grant.node_id, slots); !s.ok()) {
      nodes_->ReleaseGeneration(job_id, gen);
      return s;
    }
  }
  std::vector<std::string> hosts;
  for (const NodeGrant& g : granted.nodes) hosts.push_back(g.hostname);
  const std::string where = absl::StrCat(absl::StrJoin(hosts, ", "), " (", granted.nodes.size(), " x ",
                                         res.ranks_per_node(), " ranks)", granted.backfilled ? ", backfilled" : "");
  if (absl::Status s = jobs_->BeginGeneration(job_id, job.generation, placement, where); !s.ok()) {
    nodes_->ReleaseGeneration(job_id, gen);
    if (absl::IsFailedPrecondition(s)) return absl::OkStatus();  // cancelled meanwhile: nothing to begin
    return s;
  }
  return absl::OkStatus();
}

absl::Status Dispatcher::ChooseMaster(const std::string& job_id, v1::Placement* placement) {
  const std::string& node_id = placement->ranks(0).node_id();
  ASSIGN_OR_RETURN(const v1::NodeInfo node, nodes_->GetNode(node_id));
  std::set<int32_t> taken;
  for (const RankSlot& slot : nodes_->SlotsOn(node_id)) {
    if (slot.master_port != 0) taken.insert(slot.master_port);
  }
  const int32_t port = ChooseMasterPort(job_id, placement->generation(), taken);
  if (port == 0) {
    return absl::ResourceExhaustedError(absl::StrCat("node ", node.hostname(), ": every MASTER_PORT in [",
                                                     kMasterPortFirst, ", ", kMasterPortFirst + kMasterPorts,
                                                     ") is held by another program job's rank 0"));
  }
  placement->set_master_addr(HostOf(node.address().empty() ? node.hostname() : node.address()));
  placement->set_master_port(port);
  return absl::OkStatus();
}

}  // namespace ringmaster::coordinator
