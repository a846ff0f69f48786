#include "worker/program_launch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {

absl::StatusOr<std::string> ResolveProgram(const std::string& name, const std::string& path_list) {
  if (name.find('/') != std::string::npos) return name;
  for (absl::string_view dir : absl::StrSplit(path_list, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0) return candidate;
  }
  return absl::InvalidArgumentError(absl::StrCat("program.command[0]: \"", name, "\" is not an executable in PATH (",
                                                 path_list, ") on this node"));
}

std::map<std::string, std::string> TorchrunEnv(const v1::StartRanks& order, const v1::RankAssignment& rank,
                                               const std::string& context_path) {
  const v1::Placement& placement = order.placement();
  const std::string world = absl::StrCat(placement.world_size());
  return {
      {"RANK", absl::StrCat(rank.global_rank())},
      {"WORLD_SIZE", world},
      {"LOCAL_RANK", absl::StrCat(rank.local_rank())},
      {"LOCAL_WORLD_SIZE", absl::StrCat(placement.ranks_per_node())},
      {"GROUP_RANK", absl::StrCat(rank.node_rank())},
      {"GROUP_WORLD_SIZE", absl::StrCat(placement.nodes())},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", absl::StrCat(rank.global_rank())},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", placement.master_addr()},
      {"MASTER_PORT", absl::StrCat(placement.master_port())},
      // The generations before this one: every restart, counted against
      // max_restarts or not (a drain, a preemption).
      {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(order.generation() - 1)},
      {"TORCHELASTIC_MAX_RESTARTS", absl::StrCat(order.spec().restart().max_restarts())},
      {"TORCHELASTIC_RUN_ID", order.job_id()},
      {"RINGMASTER_RANK_CONTEXT", context_path},
  };
}

std::string PythonPathWithSdk(const std::string& sdk_dir, const std::string& job_value) {
  if (sdk_dir.empty()) return job_value;
  return job_value.empty() ? sdk_dir : absl::StrCat(sdk_dir, ":", job_value);
}

absl::Status CheckMasterPortFree(int port) {
  // [::] also covers 0.0.0.0 (dual stack); IPv4 alone where IPv6 is off.
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in6 address6{};
  address6.sin6_family = AF_INET6;
  address6.sin6_addr = in6addr_any;
  address6.sin6_port = htons(static_cast<uint16_t>(port));
  sockaddr_in address4{};
  address4.sin_family = AF_INET;
  address4.sin_addr.s_addr = htonl(INADDR_ANY);
  address4.sin_port = htons(static_cast<uint16_t>(port));
  const int rc = v6 ? bind(fd, reinterpret_cast<const sockaddr*>(&address6), sizeof(address6))
                    : bind(fd, reinterpret_cast<const sockaddr*>(&address4), sizeof(address4));
  const int error = errno;
  close(fd);
  if (rc == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("MASTER_PORT ", port, " is held by another process on this node (",
                                                    strerror(error), "); the next generation gets another port"));
}

}  // namespace ringmaster::worker
