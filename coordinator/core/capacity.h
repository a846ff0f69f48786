#ifndef RINGMASTER_COORDINATOR_CAPACITY_H_
#define RINGMASTER_COORDINATOR_CAPACITY_H_

// Plain value types shared by the NodeRegistry (which produces them) and the
// Scheduler (which consumes them). No behaviour; thread-compatible.
//
// Slots: a CUDA rank takes one GPU of its node; a CPU rank takes
// cpus_per_rank of its node's CPU slots. The two kinds are separate: a CUDA
// job never takes CPU slots and a CPU job never takes GPUs.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ringmaster::coordinator {

enum class SlotKind { kGpu, kCpu };

// What one node offers the scheduler.
struct NodeCapacity {
  std::string node_id;
  std::string hostname;
  std::map<std::string, std::string> labels;
  // Every GPU of the node, by CUDA index.
  std::vector<std::string> gpu_uuids;
  // GPUs no rank holds, by CUDA index.
  std::vector<std::string> free_gpu_uuids;
  int32_t cpu_slots = 0;       // CPU slots the node offers
  int32_t free_cpu_slots = 0;  // of those, not held by a rank
};

// What the scheduler grants one job on one node.
struct NodeGrant {
  std::string node_id;
  std::string hostname;
  // CUDA: the GPUs, one per local rank, in local-rank order. CPU: empty.
  std::vector<std::string> gpu_uuids;
  // CPU: slots reserved (ranks_per_node x cpus_per_rank). CUDA: 0.
  int32_t cpu_slots = 0;
};

// The slots one generation of a job holds, node by node (node id order).
struct HeldGeneration {
  std::string job_id;
  int64_t generation = 0;
  std::vector<NodeGrant> nodes;  // hostname empty
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CAPACITY_H_
