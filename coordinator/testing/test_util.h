#ifndef RINGMASTER_COORDINATOR_TEST_UTIL_H_
#define RINGMASTER_COORDINATOR_TEST_UTIL_H_

// Helpers shared by the coordinator's tests: specs, nodes, temporary
// database paths. Test-only.

#include <string>
#include <utility>
#include <vector>

#include "proto/job_spec.pb.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator::testing {

// A valid spec (synthetic data, a small MLP, 10 steps) with the given
// resources; defaults NOT applied.
v1::JobSpec MakeSpec(int nodes, int ranks_per_node,
                     v1::ResourceSpec::Device device = v1::ResourceSpec::CUDA, int priority = 0,
                     int max_restarts = 3);

// A node offering `gpus` GPUs ("<hostname>-gpu<i>" uuids) and `cpu_slots`.
v1::NodeInfo MakeNode(const std::string& hostname, int gpus, int cpu_slots = 0,
                      std::vector<std::pair<std::string, std::string>> labels = {});

// A fresh directory under the test's temporary directory; unique per call.
std::string NewTempDir(const std::string& name);

}  // namespace ringmaster::coordinator::testing

#endif  // RINGMASTER_COORDINATOR_TEST_UTIL_H_
