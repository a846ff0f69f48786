#include "coordinator/testing/test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ringmaster::coordinator::testing {

v1::JobSpec MakeSpec(int nodes, int ranks_per_node, v1::ResourceSpec::Device device, int priority,
                     int max_restarts) {
  v1::JobSpec spec;
  spec.set_name("test-job");
  spec.mutable_model()->mutable_mlp();
  spec.mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  spec.mutable_training()->set_steps(10);
  spec.mutable_resources()->set_nodes(nodes);
  spec.mutable_resources()->set_ranks_per_node(ranks_per_node);
  spec.mutable_resources()->set_device(device);
  spec.set_priority(priority);
  spec.mutable_restart()->set_max_restarts(max_restarts);
  return spec;
}

v1::NodeInfo MakeNode(const std::string& hostname, int gpus, int cpu_slots,
                      std::vector<std::pair<std::string, std::string>> labels) {
  v1::NodeInfo node;
  node.set_hostname(hostname);
  node.set_address(hostname + ":29500");
  node.set_cpu_slots(cpu_slots);
  node.set_worker_version("test");
  for (int i = 0; i < gpus; ++i) {
    v1::GpuInfo* gpu = node.add_gpus();
    gpu->set_uuid(absl::StrCat(hostname, "-gpu", i));
    gpu->set_name("NVIDIA H100 80GB HBM3");
    gpu->set_memory_bytes(int64_t{80} << 30);
    gpu->set_index(i);
  }
  for (auto& [k, v] : labels) (*node.mutable_labels())[k] = v;
  return node;
}

std::string NewTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "-", getpid(), "-", counter++);
  mkdir(dir.c_str(), 0755);
  return dir;
}

}  // namespace ringmaster::coordinator::testing
