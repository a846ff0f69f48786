#include "common/env_policy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster {
namespace {

// Each entry is safe for the same reasons: its value is a number, a keyword
// or an interface/device name; it changes how the job's own processes use
// the GPUs, NICs and links the worker already gave them (or how much they
// log to their own stderr, which the worker ships with the job's logs); it
// loads no code, reads no file and writes no path. Left out on purpose:
// anything matching CodeOrPathReason (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN,
// NCCL_PROFILER_PLUGIN, NCCL_ENV_PLUGIN, NCCL_IBVERBS_LIB, NCCL_TOPO_FILE,
// NCCL_GRAPH_FILE, NCCL_CONF_FILE, NCCL_DEBUG_FILE, CUDA_INJECTION64_PATH,
// CUDA_CACHE_PATH, CUDA_LOG_FILE, CUDA_COREDUMP_FILE, CUDA_COREDUMP_PIPE,
// CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY), fabric QoS and partitions
// the operator assigns (NCCL_IB_SL, NCCL_IB_TC, NCCL_IB_PKEY: a job could
// raise its own priority or pick another tenant's partition), the bootstrap
// and RAS addresses (NCCL_COMM_ID, NCCL_RAS_ADDR), core dumps on exception
// (CUDA_ENABLE_COREDUMP_ON_EXCEPTION: gigabytes each) and
// CUDA_DEVICE_WAITS_ON_EXCEPTION (a rank that hangs holding its GPUs).
const std::vector<KnownEnvVariable>& Table() {
  static const std::vector<KnownEnvVariable>* const table = new std::vector<KnownEnvVariable>{
      // NCCL: debugging output (to the rank's own stderr, i.e. its log).
      {"NCCL_DEBUG", "log level (VERSION, WARN, INFO, TRACE) of the rank's own stderr"},
      {"NCCL_DEBUG_SUBSYS", "which subsystems log (INIT, NET, ...), to the rank's own stderr"},
      // NCCL: which of the node's interfaces and HCAs, and how.
      {"NCCL_SOCKET_IFNAME", "which IP interfaces the job's sockets use (names, not paths)"},
      {"NCCL_SOCKET_FAMILY", "AF_INET or AF_INET6 for the job's sockets"},
      {"NCCL_SOCKET_NTHREADS", "helper threads per socket connection"},
      {"NCCL_NSOCKS_PERTHREAD", "sockets per helper thread"},
      {"NCCL_IB_HCA", "which of the node's InfiniBand/RoCE HCAs and ports (names)"},
      {"NCCL_IB_GID_INDEX", "RoCE GID index of the port"},
      {"NCCL_IB_ROCE_VERSION_NUM", "RoCE version"},
      {"NCCL_IB_ADDR_FAMILY", "RoCE address family"},
      {"NCCL_IB_ADDR_RANGE", "RoCE address range (a subnet, not a path)"},
      {"NCCL_IB_DISABLE", "do not use InfiniBand/RoCE"},
      {"NCCL_IB_TIMEOUT", "InfiniBand verbs timeout"},
      {"NCCL_IB_RETRY_CNT", "InfiniBand verbs retry count"},
      {"NCCL_IB_QPS_PER_CONNECTION", "queue pairs per connection"},
      {"NCCL_IB_SPLIT_DATA_ON_QPS", "how data is spread over the queue pairs"},
      {"NCCL_IB_ADAPTIVE_ROUTING", "use adaptive routing"},
      {"NCCL_IB_PCI_RELAXED_ORDERING", "PCI relaxed ordering for the job's registrations"},
      {"NCCL_IB_USE_INLINE", "inline small messages"},
      {"NCCL_NET", "which network transport (IB, Socket) among those loaded"},
      {"NCCL_NET_GDR_LEVEL", "when to use GPUDirect RDMA"},
      {"NCCL_NET_GDR_READ", "GPUDirect RDMA for sends"},
      {"NCCL_NET_SHARED_BUFFERS", "share network buffers between peers"},
      {"NCCL_NET_SHARED_COMMS", "share network connections between peers"},
      {"NCCL_CROSS_NIC", "whether rings and trees may cross NICs"},
      // NCCL: transports between the job's own GPUs.
      {"NCCL_P2P_DISABLE", "do not use peer-to-peer (NVLink, PCI) between the job's GPUs"},
      {"NCCL_P2P_LEVEL", "the furthest GPUs apart that use peer-to-peer"},
      {"NCCL_P2P_DIRECT_DISABLE", "no direct peer access within a process"},
      {"NCCL_SHM_DISABLE", "do not use shared-memory transport"},
      {"NCCL_NVLS_ENABLE", "NVLink SHARP"},
      {"NCCL_COLLNET_ENABLE", "in-network (SHARP) collectives"},
      {"NCCL_PXN_DISABLE", "no PCI x NVLink relays"},
      {"NCCL_P2P_PXN_LEVEL", "when to relay through another GPU's NIC"},
      {"NCCL_CUMEM_ENABLE", "allocate buffers with cuMem"},
      // NCCL: algorithms, protocols, resources.
      {"NCCL_ALGO", "which collective algorithms (Ring, Tree, ...)"},
      {"NCCL_PROTO", "which protocols (Simple, LL, LL128)"},
      {"NCCL_MIN_NCHANNELS", "fewest channels (thread blocks) per collective"},
      {"NCCL_MAX_NCHANNELS", "most channels per collective"},
      {"NCCL_MIN_CTAS", "fewest CTAs per collective"},
      {"NCCL_MAX_CTAS", "most CTAs per collective"},
      {"NCCL_NTHREADS", "CUDA threads per block"},
      {"NCCL_BUFFSIZE", "buffer size per peer, bytes"},
      {"NCCL_CGA_CLUSTER_SIZE", "CUDA thread-block cluster size"},
      {"NCCL_LAUNCH_MODE", "PARALLEL or GROUP kernel launches"},
      {"NCCL_IGNORE_CPU_AFFINITY", "ignore the job's CPU affinity when choosing NICs"},
      // CUDA.
      {"CUDA_DEVICE_MAX_CONNECTIONS", "hardware work queues per device (Megatron sets 1)"},
      {"CUDA_DEVICE_MAX_COPY_CONNECTIONS", "hardware copy queues per device"},
      {"CUDA_LAUNCH_BLOCKING", "synchronous kernel launches (debugging)"},
      {"CUDA_MODULE_LOADING", "LAZY or EAGER loading of the program's own kernels"},
      {"CUDA_MODULE_DATA_LOADING", "LAZY or EAGER loading of the program's own module data"},
      {"CUDA_CACHE_DISABLE", "do not use the JIT cache (in the run account's home)"},
      {"CUDA_CACHE_MAXSIZE", "size of that JIT cache, bytes"},
      {"CUDA_FORCE_PTX_JIT", "JIT-compile the program's own PTX"},
      {"CUDA_DISABLE_PTX_JIT", "never JIT-compile PTX"},
      {"CUDA_SCALE_LAUNCH_QUEUES", "size of the launch queues"},
      {"CUDA_GRAPHS_USE_NODE_PRIORITY", "honour CUDA graph node priorities"},
      {"CUDA_MANAGED_FORCE_DEVICE_ALLOC", "managed memory in device memory"},
  };
  return *table;
}

bool ValidName(absl::string_view name) {
  return !name.empty() && !absl::ascii_isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

const std::vector<KnownEnvVariable>& DefaultAllowedEnv() { return Table(); }

std::string CodeOrPathReason(absl::string_view name) {
  if (absl::StartsWith(name, "LD_")) return "configures the dynamic loader: it loads code (matches LD_*)";
  if (absl::StartsWith(name, "PYTHON")) {
    return "configures the Python interpreter (module paths, startup files): it loads code (matches PYTHON*)";
  }
  if (absl::StrContains(name, "_INJECTION")) return "loads code (matches *_INJECTION*)";
  for (const char* suffix : {"_PLUGIN", "_LIB"}) {
    if (absl::EndsWith(name, suffix)) return absl::StrCat("loads code (matches *", suffix, ")");
  }
  for (const char* suffix : {"_FILE", "_PATH", "_DIR", "_DIRECTORY", "_PIPE"}) {
    if (absl::EndsWith(name, suffix)) return absl::StrCat("names a file or directory (matches *", suffix, ")");
  }
  return "";
}

bool IsTorchrunEnv(absl::string_view name) {
  for (const char* owned : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                            "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"}) {
    if (name == owned) return true;
  }
  return absl::StartsWith(name, "TORCHELASTIC_");
}

bool IsWorkerOwnedEnv(absl::string_view name) {
  for (const char* owned : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TMPDIR", "HOME", "USER", "LOGNAME"}) {
    if (name == owned) return true;
  }
  return absl::StartsWith(name, "RINGMASTER_") || IsTorchrunEnv(name);
}

absl::StatusOr<EnvPolicy> EnvPolicy::Create(const std::vector<std::string>& entries, std::string daemon) {
  EnvPolicy policy;
  policy.daemon_ = std::move(daemon);
  for (const std::string& entry : entries) {
    if (entry.empty()) continue;
    policy.entries_.push_back(entry);
    if (entry == kDefaultAllowedEnvEntry) {
      policy.use_default_ = true;
    } else if (entry.back() == '*' && (entry.size() == 1 || ValidName(entry.substr(0, entry.size() - 1)))) {
      policy.prefixes_.push_back(entry.substr(0, entry.size() - 1));
    } else if (ValidName(entry)) {
      policy.names_.push_back(entry);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--allowed-env: \"", entry, "\" is neither ", kDefaultAllowedEnvEntry,
                       ", a variable name ([A-Za-z_][A-Za-z0-9_]*) nor a prefix of one followed by *"));
    }
  }
  return policy;
}

absl::Status EnvPolicy::Check(absl::string_view name) const {
  if (IsWorkerOwnedEnv(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.", name, ": set by the worker for each rank; a job cannot override it"));
  }
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) return absl::OkStatus();
  if (const std::string why = CodeOrPathReason(name); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.", name, ": ", why, "; no pattern admits such a variable, only the operator naming it exactly "
        "(ringmaster-", daemon_, " --allowed-env ", name, ") after deciding that every job may do that"));
  }
  if (use_default_) {
    for (const KnownEnvVariable& known : Table()) {
      if (name == known.name) return absl::OkStatus();
    }
  }
  for (const std::string& prefix : prefixes_) {
    if (absl::StartsWith(name, prefix)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("env.", name, ": not a variable this ", daemon_,
                                                 " lets jobs set (allowed: ", Describe(),
                                                 "); ask the operator to allow it (ringmaster-", daemon_,
                                                 " --allowed-env)"));
}

std::string EnvPolicy::Describe() const {
  if (entries_.empty()) return "none";
  std::vector<std::string> shown;
  for (const std::string& entry : entries_) {
    shown.push_back(entry == kDefaultAllowedEnvEntry ? "the built-in NCCL/CUDA tuning variables (docs/security.md)"
                                                     : entry);
  }
  return absl::StrJoin(shown, ", ");
}

}  // namespace ringmaster
