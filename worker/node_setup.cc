#include "worker/node_setup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "engine/gpu/gpu_info.h"
#include "spdlog/spdlog.h"
#include "worker/paths.h"
#include "worker/run_as.h"

namespace ringmaster::worker {

void RaiseMemlockForRanks() {
  rlimit limit;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_MEMLOCK, &limit);
  if (limit.rlim_max != RLIM_INFINITY) {
    spdlog::warn("RLIMIT_MEMLOCK is {} bytes: ranks (other accounts, no CAP_IPC_LOCK) cannot pin more for RDMA; "
                 "NCCL over InfiniBand/RoCE needs it unlimited (LimitMEMLOCK=infinity, --ulimit memlock=-1)",
                 static_cast<uint64_t>(limit.rlim_max));
  }
}

void WarnIfNotExecutableByOthers(const std::string& trainer) {
  std::filesystem::path path(trainer);
  for (std::filesystem::path p = path; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return;
    const mode_t need = p == path ? (S_IROTH | S_IXOTH) : S_IXOTH;
    if ((st.st_mode & need) != need) {
      spdlog::warn("{} is not {} by other accounts: ranks running as one may fail to start (the trainer, its "
                   "libraries and the directories above them must be readable and executable by the run accounts)",
                   p.string(), p == path ? "readable and executable" : "searchable");
      return;
    }
  }
}

absl::Status RestrictStateDir(const std::string& state_dir, bool other_accounts) {
  const mode_t mode = other_accounts ? 0711 : 0700;
  if (chmod(state_dir.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of --state-dir ", state_dir, " (chmod ",
                                                      other_accounts ? "711" : "700", "): ", std::strerror(errno)));
  }
  const std::string ranks = RanksDir(state_dir);
  if (mkdir(ranks.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", ranks, ": ", std::strerror(errno)));
  }
  if (chmod(ranks.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of ", ranks, ": ", std::strerror(errno)));
  }
  if (!other_accounts) return absl::OkStatus();
  std::error_code ec;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string path = entry.path().string();
    if (path == ranks || path == AgentSocketPath(state_dir) || entry.is_symlink(ec)) continue;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) continue;
    if (chmod(path.c_str(), st.st_mode & 07700) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make ", path, " the worker's alone (chmod go-rwx): ", std::strerror(errno)));
    }
  }
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot list --state-dir ", state_dir, ": ", ec.message()));
  return absl::OkStatus();
}

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string SelfExe() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  *port = -1;
  std::string rest = address;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
    *host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (rest.empty()) return absl::OkStatus();
    if (rest.front() != ':') return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
    rest = rest.substr(1);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || rest.find(':') != colon) {  // no port, or a bare IPv6 address
      *host = rest;
      return absl::OkStatus();
    }
    *host = rest.substr(0, colon);
    rest = rest.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(rest, port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in ", address));
  }
  return absl::OkStatus();
}

absl::Status LockStateDir(const std::string& state_dir) {
  const std::string path = state_dir + "/worker.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot open ", path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("another worker uses ", state_dir, " (", path, " is locked)"));
  }
  return absl::OkStatus();  // the descriptor stays open on purpose
}

absl::StatusOr<v1::NodeInfo> DescribeNode(const std::string& hostname, const std::string& address, int cpu_slots,
                                          const std::vector<std::string>& labels) {
  v1::NodeInfo node;
  node.set_hostname(hostname);
  node.set_address(address);
  node.set_worker_version(kVersion);
  absl::StatusOr<engine::gpu::GpuDiscovery> discovery = engine::gpu::DiscoverGpus();
  if (!discovery.ok()) return discovery.status();
  for (const engine::gpu::GpuInfo& gpu : discovery->gpus) {
    spdlog::info("GPU {}", engine::gpu::DescribeGpu(gpu));
    v1::GpuInfo* out = node.add_gpus();
    out->set_uuid(gpu.uuid);
    out->set_name(gpu.name);
    out->set_memory_bytes(static_cast<int64_t>(gpu.total_memory_bytes));
    out->set_index(gpu.index);
    out->set_pci_bus_id(gpu.pci_bus_id);
    out->set_compute_capability_major(gpu.compute_capability_major);
    out->set_compute_capability_minor(gpu.compute_capability_minor);
  }
  if (discovery->gpus.empty()) {
    if (cpu_slots == 0) cpu_slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    spdlog::info("no GPUs ({}): offering {} CPU slot(s)", discovery->reason, cpu_slots);
  }
  node.set_cpu_slots(cpu_slots);
  for (const std::string& label : labels) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--label ", label, ": expected KEY=VALUE"));
    }
    (*node.mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
  }
  return node;
}

}  // namespace ringmaster::worker
