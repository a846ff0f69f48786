#include "engine/train/join_world.h"

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

// The keys of a rank started by hand (a file: or tcp: store serves one job);
// the coordinator scopes its keys by job and generation itself.
constexpr char kHandStartPrefix[] = "ringmaster";

// A process group that also owns the rendezvous it was built over.
class OwningGroup final : public dist::ProcessGroup {
 public:
  OwningGroup(std::unique_ptr<dist::Store> store, std::unique_ptr<dist::ProcessGroup> group)
      : ProcessGroup(group->timeout()), store_(std::move(store)), group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const char* backend() const override { return group_->backend(); }
  std::string name() const override { return group_->name(); }
  void SetComputeStream(void* stream) override { group_->SetComputeStream(stream); }

 private:
  // Forwarded whole: the inner group checks, annotates and breaks as well.
  absl::Status DoAllReduce(const Tensor& t, dist::ReduceOp op) override { return group_->AllReduce(t, op); }
  absl::Status DoReduceScatter(const Tensor& in, const Tensor& out, dist::ReduceOp op) override {
    return group_->ReduceScatter(in, out, op);
  }
  absl::Status DoAllGather(const Tensor& in, const Tensor& out) override { return group_->AllGather(in, out); }
  absl::Status DoBroadcast(const Tensor& t, int root) override { return group_->Broadcast(t, root); }
  absl::Status DoSend(const Tensor& t, int dst, int tag) override { return group_->Send(t, dst, tag); }
  absl::Status DoRecv(const Tensor& t, int src, int tag) override { return group_->Recv(t, src, tag); }
  absl::Status DoBarrier() override { return group_->Barrier(); }
  absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> DoNewGroup(const std::vector<int>& ranks, int /*sub_rank*/,
                                                                 const std::string& name) override {
    return group_->NewGroup(ranks, name);
  }
  absl::Status CheckPlacement(const Tensor&, absl::string_view) const override { return absl::OkStatus(); }

  // Declared first, destroyed last: the group may use the store until it goes.
  std::unique_ptr<dist::Store> store_;
  std::unique_ptr<dist::ProcessGroup> group_;
};

// The rendezvous store, and the host Gloo binds when nothing else says.
struct Rendezvous {
  std::unique_ptr<dist::Store> store;
  dist::UniqueIdExchange* ids = nullptr;  // GrpcStore's RPCs; null: over the store's keys
  std::string key_prefix;
  std::string host = "127.0.0.1";
};

absl::StatusOr<Rendezvous> Connect(const v1::RankContext& context, absl::Duration timeout) {
  const std::string& address = context.rendezvous().address();
  Rendezvous r;
  r.key_prefix = kHandStartPrefix;
  if (absl::StartsWith(address, "file:")) {
    ASSIGN_OR_RETURN(r.store, dist::FileStore::Create(address.substr(5)));
  } else if (absl::StartsWith(address, "tcp:")) {
    std::vector<std::string> parts = absl::StrSplit(address.substr(4), absl::MaxSplits(':', 1));
    int port = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("rendezvous: expected tcp:HOST:PORT, got \"", address, "\""));
    }
    dist::TcpStoreOptions options;
    options.host = parts[0];
    options.port = port;
    options.start_server = context.rank().global_rank() == 0;
    options.connect_timeout = timeout;
    ASSIGN_OR_RETURN(r.store, dist::TcpStore::Connect(options));
    r.host = parts[0] == "0.0.0.0" ? "127.0.0.1" : parts[0];
  } else if (absl::StartsWith(address, "grpc:")) {
    dist::GrpcStoreOptions options;
    options.target = address.substr(5);
    options.job_id = context.job_id();
    options.generation = context.generation();
    options.rank = context.rank().global_rank();
    options.secret = context.rendezvous().secret();
    ASSIGN_OR_RETURN(std::unique_ptr<dist::GrpcStore> store, dist::GrpcStore::Connect(options));
    r.ids = store.get();
    r.store = std::move(store);
    r.key_prefix.clear();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: expected file:DIR, tcp:HOST:PORT or grpc:ADDRESS, got \"", address, "\""));
  }
  return r;
}

std::string Scoped(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : absl::StrCat(prefix, "/", key);
}

}  // namespace

absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> JoinWorld(const v1::RankContext& context,
                                                              const JoinOptions& options) {
  ASSIGN_OR_RETURN(Rendezvous r, Connect(context, options.timeout));
  if (options.nccl) {
    // The coordinator's id RPCs where there is a coordinator; else the
    // store's keys (ranks started by hand).
    dist::StoreUniqueIdExchange over_keys(r.store.get(), Scoped(r.key_prefix, "nccl"));
    ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> nccl,
                     CreateNcclWorld(r.ids != nullptr ? *r.ids : over_keys, context, options));
    return std::make_unique<OwningGroup>(std::move(r.store), std::move(nccl));
  }
  dist::GlooOptions gloo;
  gloo.rank = context.rank().global_rank();
  gloo.size = context.world().world_size();
  gloo.timeout = options.timeout;
  gloo.key_prefix = Scoped(r.key_prefix, "gloo");
  gloo.name = "world";
  if (!options.gloo_interface.empty()) {
    gloo.interface = options.gloo_interface;
  } else if (!context.advertise_host().empty()) {
    gloo.hostname = context.advertise_host();
  } else {
    gloo.hostname = r.host;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<dist::GlooProcessGroup> group, dist::GlooProcessGroup::Create(*r.store, gloo));
  return std::make_unique<OwningGroup>(std::move(r.store), std::move(group));
}

}  // namespace ringmaster::engine
