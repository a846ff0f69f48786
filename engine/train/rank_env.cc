#include "engine/train/rank_env.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/dist/file_store.h"
#include "engine/dist/gloo_process_group.h"
#include "engine/dist/grpc_store.h"
#include "engine/dist/tcp_store.h"

namespace ringmaster::engine {
namespace {

absl::StatusOr<int> EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  int n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": expected an integer, got \"", value, "\""));
  }
  return n;
}

absl::StatusOr<int64_t> EnvInt64(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": expected an integer, got \"", value, "\""));
  }
  return n;
}

// "grpc:ADDRESS": the RendezvousService at ADDRESS (the worker's socket,
// unix:/path/agent.sock, or host:port), scoped by RINGMASTER_JOB_ID (required)
// and RINGMASTER_GENERATION (default 0), with the generation's
// RINGMASTER_RENDEZVOUS_SECRET (set by the worker).
absl::StatusOr<std::unique_ptr<dist::Store>> ConnectGrpcStore(const RankEnv& env) {
  dist::GrpcStoreOptions options;
  options.target = env.rendezvous.substr(5);
  const char* job = std::getenv("RINGMASTER_JOB_ID");
  if (job == nullptr || *job == '\0') {
    return absl::InvalidArgumentError("RINGMASTER_JOB_ID: required with a grpc: rendezvous");
  }
  options.job_id = job;
  ASSIGN_OR_RETURN(options.generation, EnvInt64("RINGMASTER_GENERATION", 0));
  options.rank = env.rank;
  if (const char* secret = std::getenv("RINGMASTER_RENDEZVOUS_SECRET"); secret != nullptr) options.secret = secret;
  ASSIGN_OR_RETURN(std::unique_ptr<dist::GrpcStore> store, dist::GrpcStore::Connect(options));
  return std::unique_ptr<dist::Store>(std::move(store));
}

// A process group that also owns the store it was built over.
class OwningGroup final : public dist::ProcessGroup {
 public:
  OwningGroup(std::unique_ptr<dist::Store> store, std::unique_ptr<dist::ProcessGroup> group)
      : ProcessGroup(group->timeout()), store_(std::move(store)), group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const char* backend() const override { return group_->backend(); }
  std::string name() const override { return group_->name(); }
  void SetComputeStream(void* stream) override { group_->SetComputeStream(stream); }
  absl::Status AllReduce(const Tensor& t, dist::ReduceOp op) override { return group_->AllReduce(t, op); }
  absl::Status ReduceScatter(const Tensor& in, const Tensor& out, dist::ReduceOp op) override {
    return group_->ReduceScatter(in, out, op);
  }
  absl::Status AllGather(const Tensor& in, const Tensor& out) override { return group_->AllGather(in, out); }
  absl::Status Broadcast(const Tensor& t, int root) override { return group_->Broadcast(t, root); }
  absl::Status Send(const Tensor& t, int dst, int tag) override { return group_->Send(t, dst, tag); }
  absl::Status Recv(const Tensor& t, int src, int tag) override { return group_->Recv(t, src, tag); }
  absl::Status Barrier() override { return group_->Barrier(); }
  absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> NewGroup(const std::vector<int>& ranks,
                                                               const std::string& name) override {
    return group_->NewGroup(ranks, name);
  }

 private:
  // Declared first, destroyed last: the group may use the store until it goes.
  std::unique_ptr<dist::Store> store_;
  std::unique_ptr<dist::ProcessGroup> group_;
};

}  // namespace

absl::StatusOr<RankEnv> ResolveRankEnv(int rank, int world_size, int local_rank, const std::string& rendezvous) {
  RankEnv env;
  ASSIGN_OR_RETURN(env.rank, rank >= 0 ? absl::StatusOr<int>(rank) : EnvInt("RINGMASTER_RANK", 0));
  ASSIGN_OR_RETURN(env.world_size,
                   world_size > 0 ? absl::StatusOr<int>(world_size) : EnvInt("RINGMASTER_WORLD_SIZE", 1));
  ASSIGN_OR_RETURN(env.local_rank,
                   local_rank >= 0 ? absl::StatusOr<int>(local_rank) : EnvInt("RINGMASTER_LOCAL_RANK", env.rank));
  env.rendezvous = rendezvous;
  if (env.rendezvous.empty() && std::getenv("RINGMASTER_RENDEZVOUS") != nullptr) {
    env.rendezvous = std::getenv("RINGMASTER_RENDEZVOUS");
  }
  if (const char* prefix = std::getenv("RINGMASTER_RENDEZVOUS_PREFIX"); prefix != nullptr && *prefix != '\0') {
    env.key_prefix = prefix;
  }
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size: must be >= 1, got ", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: must be in [0, ", env.world_size, "), got ", env.rank));
  }
  if (env.world_size > 1 && env.rendezvous.empty()) {
    return absl::InvalidArgumentError(
        "rendezvous: required with more than one rank (--rendezvous file:DIR, tcp:HOST:PORT or "
        "grpc:ADDRESS, or RINGMASTER_RENDEZVOUS)");
  }
  return env;
}

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> JoinWorld(const RankEnv& env, absl::Duration timeout,
                                                              const WorldTransport& transport) {
  std::unique_ptr<dist::Store> store;
  std::string host = "127.0.0.1";
  if (absl::StartsWith(env.rendezvous, "file:")) {
    ASSIGN_OR_RETURN(store, dist::FileStore::Create(env.rendezvous.substr(5)));
  } else if (absl::StartsWith(env.rendezvous, "tcp:")) {
    std::vector<std::string> parts = absl::StrSplit(env.rendezvous.substr(4), absl::MaxSplits(':', 1));
    int port = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous: expected tcp:HOST:PORT, got \"", env.rendezvous, "\""));
    }
    dist::TcpStoreOptions options;
    options.host = parts[0];
    options.port = port;
    options.start_server = env.rank == 0;
    options.connect_timeout = timeout;
    ASSIGN_OR_RETURN(store, dist::TcpStore::Connect(options));
    host = parts[0] == "0.0.0.0" ? "127.0.0.1" : parts[0];
  } else if (absl::StartsWith(env.rendezvous, "grpc:")) {
    ASSIGN_OR_RETURN(store, ConnectGrpcStore(env));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: expected file:DIR, tcp:HOST:PORT or grpc:ADDRESS, got \"", env.rendezvous, "\""));
  }
  if (transport.nccl) {
    ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> nccl,
                     CreateNcclWorld(*store, env, transport.device, timeout));
    return std::make_unique<OwningGroup>(std::move(store), std::move(nccl));
  }
  dist::GlooOptions options;
  options.rank = env.rank;
  options.size = env.world_size;
  options.timeout = timeout;
  options.key_prefix = env.key_prefix + "/gloo";
  options.name = "world";
  if (const char* iface = std::getenv("RINGMASTER_GLOO_INTERFACE"); iface != nullptr && *iface != '\0') {
    options.interface = iface;
  } else if (const char* own = std::getenv("RINGMASTER_HOST"); own != nullptr && *own != '\0') {
    options.hostname = own;
  } else {
    options.hostname = host;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<dist::GlooProcessGroup> group, dist::GlooProcessGroup::Create(*store, options));
  return std::make_unique<OwningGroup>(std::move(store), std::move(group));
}

}  // namespace ringmaster::engine
