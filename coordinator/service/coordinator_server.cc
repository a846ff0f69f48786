#include "coordinator/service/coordinator_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "common/grpc_security.h"
#include "common/metrics_http.h"
#include "common/status_macros.h"
#include "coordinator/core/accounting.h"
#include "coordinator/core/auth.h"
#include "coordinator/service/auth_processor.h"
#include "coordinator/core/checkpoint_registry.h"
#include "coordinator/service/checkpoint_service.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/straggler_metrics.h"
#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/service/job_service.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/store/disk_space.h"
#include "coordinator/store/log_store.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/service/node_service.h"
#include "coordinator/core/node_sessions.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/service/rendezvous_service.h"
#include "coordinator/service/rpc_metrics_interceptor.h"
#include "coordinator/store/store.h"
#include "coordinator/core/ticker.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {


// "host:port" / "[v6]:port" -> host, port.
absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), port)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not host:port"));
  }
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "0.0.0.0";
  return absl::OkStatus();
}

// Binds a throwaway socket to a numeric host:port to name the reason gRPC
// would fail with ("Address already in use"); OK for what it cannot check.
absl::Status CheckBindable(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port).ok() || port == 0) return absl::OkStatus();
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    return absl::OkStatus();  // a name: gRPC resolves it
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as gRPC does
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  const int error = errno;
  ::close(fd);
  if (rc == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", std::strerror(error)));
}

}  // namespace

namespace {

class MicrosecondClock : public Clock {
 public:
  explicit MicrosecondClock(Clock* base) : base_(base) {}
  absl::Time Now() const override { return absl::FromUnixMicros(absl::ToUnixMicros(base_->Now())); }
  void SleepUntil(absl::Time deadline) override { base_->SleepUntil(deadline); }

 private:
  Clock* const base_;
};

}  // namespace

CoordinatorServer::CoordinatorServer(const CoordinatorConfig& config, Clock* clock)
    : config_(config), microsecond_clock_(std::make_unique<MicrosecondClock>(clock)), clock_(microsecond_clock_.get()) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(const CoordinatorConfig& config,
                                                                            Clock* clock) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(config, clock));
  RETURN_IF_ERROR(server->Build());
  RETURN_IF_ERROR(server->Serve());
  return server;
}

absl::Status CoordinatorServer::Build() {
  std::error_code ec;
  std::filesystem::create_directories(config_.state_dir, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("cannot create the state directory ", config_.state_dir, ": ", ec.message()));
  const std::string db = config_.state_dir + "/coordinator.db";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({db});
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("cannot open the database ", db, ": ", store.status().message()));
  }
  store_ = *std::move(store);
  RETURN_IF_ERROR(BuildSecurity());
  nodes_ = std::make_unique<NodeRegistry>(
      clock_, store_.get(), NodeRegistryOptions{config_.heartbeat_interval, 3, config_.node_recovery_grace});
  RETURN_IF_ERROR(nodes_->Recover());
  checkpoints_ = std::make_unique<CheckpointRegistry>(clock_, store_.get());
  RETURN_IF_ERROR(checkpoints_->Recover());
  RendezvousOptions rendezvous_options;
  rendezvous_options.max_waiters = config_.max_rendezvous_waits;
  rendezvous_ = std::make_unique<Rendezvous>(clock_, rendezvous_options);
  rendezvous_->SetSecrets(secrets_.get());
  registry_ = std::make_unique<MetricsRegistry>();
  ASSIGN_OR_RETURN(metrics_, CoordinatorMetrics::Create(registry_.get(), nodes_.get(), clock_));
  ASSIGN_OR_RETURN(straggler_metrics_, StragglerMetrics::Create(registry_.get()));
  const DiskSpace* disk = config_.disk_space;
  if (disk == nullptr) {
    statvfs_disk_ = std::make_unique<StatvfsDiskSpace>(config_.state_dir);
    disk = statvfs_disk_.get();
  }
  disk_reserve_ = std::make_unique<DiskReserve>(disk, config_.disk_reserve);
  metrics_->SetDiskReserve(disk_reserve_.get());

  JobControllerOptions options;
  options.rendezvous_timeout = config_.rendezvous_timeout;
  options.stop_grace_period = config_.stop_grace_period;
  options.drain_checkpoint_timeout = config_.drain_checkpoint_timeout;
  options.quarantine = config_.quarantine;
  options.stragglers = config_.stragglers;
  options.checkpoint_interval = config_.checkpoint_interval;
  options.preemption_grace = config_.preemption_grace;
  if (!config_.queues_file.empty()) {
    absl::StatusOr<QueueConfig> queues = QueueConfig::Load(config_.queues_file);
    if (!queues.ok()) {
      return absl::Status(queues.status().code(), absl::StrCat("cannot use the queues file: ", queues.status().message()));
    }
    options.queues = *std::move(queues);
  }
  options.checkpoint_root =
      config_.checkpoint_root.empty() ? config_.state_dir + "/checkpoints" : config_.checkpoint_root;
  options.allowed_checkpoint_roots = config_.checkpoint_allowed_roots;
  options.allowed_env = config_.allowed_env;
  options.on_schedule_pass = [metrics = metrics_.get()](absl::Duration d) { metrics->ObserveSchedulingPass(d); };
  controller_ = std::make_unique<JobController>(clock_, store_.get(), nodes_.get(), checkpoints_.get(),
                                                rendezvous_.get(), options);
  rendezvous_->SetListener(&controller_->lifecycle());
  accounting_ = std::make_unique<Accounting>(clock_, store_.get());

  LogStoreOptions log_options;
  log_options.root = config_.state_dir + "/logs";
  log_options.quota_per_job = config_.log_quota_per_job;
  log_options.reserve = disk_reserve_.get();
  log_options.listener = metrics_.get();
  absl::StatusOr<std::unique_ptr<LogStore>> logs = LogStore::Open(log_options);
  if (!logs.ok()) return logs.status();
  logs_ = *std::move(logs);
  watchers_ = std::make_unique<JobWatchers>();
  sessions_ = std::make_unique<NodeSessions>(controller_.get(), nodes_.get());
  controller_->AddListener(metrics_.get());
  controller_->AddListener(straggler_metrics_.get());
  controller_->AddListener(watchers_.get());
  controller_->AddListener(sessions_.get());
  if (absl::Status s = controller_->Recover(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot recover the jobs of ", db, ": ", s.message()));
  }
  std::vector<v1::Job> jobs;
  ListJobsQuery query;
  query.page_size = 1000;
  do {
    ASSIGN_OR_RETURN(ListJobsPage page, controller_->views().ListJobs(query));
    for (const v1::JobSummary& summary : page.jobs) {  // what the metrics' seed reads of a job
      v1::Job& job = jobs.emplace_back();
      job.set_id(summary.id());
      job.set_state(summary.state());
      *job.mutable_submit_time() = summary.submit_time();
      job.set_unschedulable(summary.unschedulable());
    }
    query.page_token = page.next_page_token;
  } while (!query.page_token.empty());
  metrics_->Seed(jobs);
  metrics_->SetSessionCount([sessions = sessions_.get()] { return sessions->open_sessions(); });
  spdlog::info("recovered {} job(s) and {} node(s) from {}", jobs.size(), nodes_->ListNodes().size(), db);

  work_ = std::make_unique<Executor>(ExecutorOptions{"rm-streams", config_.worker_threads, false});
  if (config_.tick_interval > absl::ZeroDuration()) {
    // A poke (a submission, a registration, a rank exit) asks for a
    // scheduling pass only; the rest of Tick runs once per interval.
    ticker_ = std::make_unique<Ticker>(config_.tick_interval, [this] { Tick(); },
                                       [controller = controller_.get()] { controller->ScheduleNow(); });
  }
  return absl::OkStatus();
}

absl::Status CoordinatorServer::Serve() {
  auto poke = [this] { Poke(); };
  job_service_ =
      std::make_unique<JobService>(controller_.get(), nodes_.get(), watchers_.get(), logs_.get(), accounting_.get(),
                                   work_.get(), poke, config_.visibility,
                                   StreamLogsOptions{256, 256 << 10, config_.log_follow_linger});
  SessionOptions session_options;
  session_options.stop_grace_period = config_.stop_grace_period;
  node_service_ = std::make_unique<NodeService>(
      controller_.get(), nodes_.get(), sessions_.get(), logs_.get(), work_.get(), poke,
      [metrics = metrics_.get()](const AppendResult& r) {
        metrics->CountLogLines(r.appended, r.duplicates, r.invalid);
      },
      session_options);
  rendezvous_service_ = std::make_unique<RendezvousService>(rendezvous_.get(), nodes_.get(), controller_.get());
  checkpoint_service_ = std::make_unique<CheckpointService>(controller_.get(), nodes_.get(), work_.get());

  RETURN_IF_ERROR(CheckBindable(config_.listen));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Another server on the port must be an error, not a second listener.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  std::shared_ptr<grpc::ServerCredentials> credentials = MakeServerCredentials(tls_.get(), config_.listen);
  credentials->SetAuthMetadataProcessor(std::make_shared<AuthProcessor>(authenticator_.get()));
  builder.AddListeningPort(config_.listen, credentials, &port_);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(node_service_.get());
  builder.RegisterService(rendezvous_service_.get());
  builder.RegisterService(checkpoint_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RpcMetricsInterceptorFactory>(metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config_.listen, ": the port is in use or the address is not local"));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);

  if (!config_.metrics_listen.empty()) {
    std::string host;
    int port = 0;
    if (absl::Status s = SplitHostPort(config_.metrics_listen, &host, &port); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metrics address: ", s.message()));
    }
    MetricsHttpOptions http_options;
    http_options.health_note = [this] { return HealthNote(); };
    metrics_http_ = std::make_unique<MetricsHttpServer>(registry_.get(), http_options);
    if (absl::Status s = metrics_http_->Start(host, port); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot serve /metrics: ", s.message()));
    }
  }
  RETURN_IF_ERROR(ServeHealth());
  CheckDisk();  // the disk's health service on both servers, and a warning if it starts low
  if (ticker_ != nullptr) ticker_->Start();
  spdlog::info("security: {}; {}", tls_ ? "TLS, workers' client certificates verified per call" : "no TLS (loopback only)",
               authenticator_->authenticates_users() ? "users need a bearer token" : "users not authenticated");
  if (!authenticator_->authenticates_users()) {
    spdlog::warn("no --token-file: any local process may submit and cancel jobs");
  }
  spdlog::info("coordinator serving on {} (port {}){}{}", config_.listen, port_,
               metrics_http_ ? absl::StrCat(", /metrics on ", metrics_http_->address()) : std::string(),
               health_server_ ? absl::StrCat(", gRPC health on ", config_.health_listen, " (port ", health_port_, ")")
                              : std::string());
  return absl::OkStatus();
}

namespace {

// Leaves out the reflection service, which InitProtoReflectionServerBuilderPlugin
// adds to every server built after it.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(p.get()) !=
                                           nullptr;
                                  }),
                   plugins->end());
  }
};

}  // namespace

// Its own server: the main one's port needs TLS beyond loopback, and every
// service there would be reachable without it on a second, plaintext port.
// Here there is nothing but the health service. gRPC reads and answers each
// connection without a thread of its own, so stalled connections cannot
// starve it.
absl::Status CoordinatorServer::ServeHealth() {
  if (config_.health_listen.empty()) return absl::OkStatus();
  if (absl::Status s = CheckBindable(config_.health_listen); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot serve gRPC health: ", s.message()));
  }
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<WithoutReflection>());
  // Every other method: UNIMPLEMENTED. Also what lets this server start:
  // gRPC adds its health service only once started, and refuses to build a
  // server with no service of its own.
  health_fallback_ = std::make_unique<grpc::CallbackGenericService>();
  builder.RegisterCallbackGenericService(health_fallback_.get());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(config_.health_listen, grpc::InsecureServerCredentials(), &health_port_);
  health_server_ = builder.BuildAndStart();
  if (health_server_ == nullptr || health_port_ == 0) {
    health_server_.reset();
    health_port_ = 0;
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC health on ", config_.health_listen,
                                               ": the port is in use or the address is not local"));
  }
  health_server_->GetHealthCheckService()->SetServingStatus(true);
  return absl::OkStatus();
}

absl::Status CoordinatorServer::BuildSecurity() {
  const std::string guide = "see docs/security.md";
  if (!config_.tls.any() && !IsLocalListenAddress(config_.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", config_.listen,
        " is not a loopback address: serving other hosts needs TLS (--tls-ca, --tls-cert, --tls-key), a "
        "--token-file and a --join-token-file; ", guide));
  }
  AuthPolicy policy;
  if (config_.tls.any()) {
    if (config_.token_file.empty() || config_.join_token_file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("with TLS, --token-file and --join-token-file are required; ", guide));
    }
    ASSIGN_OR_RETURN(TlsMaterial tls, LoadTlsMaterial(config_.tls, /*require_identity=*/true));
    tls_ = std::make_unique<TlsMaterial>(std::move(tls));
    policy.client_ca_pem = tls_->ca_pem;
  }
  if (!config_.token_file.empty()) {
    RETURN_IF_ERROR(CheckPrivateFile(config_.token_file, "--token-file"));
    std::ifstream in(config_.token_file);
    std::stringstream text;
    text << in.rdbuf();
    ASSIGN_OR_RETURN(policy.users, TokenTable::Parse(text.str(), config_.token_file));
  }
  if (!config_.join_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string join_token, ReadSecretFile(config_.join_token_file, "--join-token-file"));
    policy.join_token_sha256 = Sha256Hex(join_token);
  }
  authenticator_ = std::make_unique<Authenticator>(std::move(policy), clock_);
  ASSIGN_OR_RETURN(secrets_, RendezvousSecrets::LoadOrCreate(config_.state_dir + "/rendezvous.key"));
  return absl::OkStatus();
}

void CoordinatorServer::Poke() {
  if (ticker_ != nullptr) ticker_->Poke();
}

void CoordinatorServer::CheckDisk() {
  const DiskReserve::State state = disk_reserve_->Check();
  std::lock_guard<std::mutex> lock(disk_mu_);
  if (state.measure.ok() != disk_measured_) {
    disk_measured_ = state.measure.ok();
    if (!disk_measured_) spdlog::warn("disk reserve not enforced: {}", std::string(state.measure.message()));
  }
  // The coordinator as a whole ("") stays SERVING: refusing logs is the
  // degradation it is designed for, and a probe failing on it would take
  // away what still works (commits, scheduling). docs/deploy.md.
  std::vector<grpc::Server*> servers;
  for (grpc::Server* server : {server_.get(), health_server_.get()}) {
    if (server != nullptr) servers.push_back(server);
  }
  if (state.low != disk_low_ || servers.size() != disk_health_servers_) {
    for (grpc::Server* server : servers) {
      server->GetHealthCheckService()->SetServingStatus(kDiskHealthService, !state.low);
    }
    disk_health_servers_ = servers.size();
  }
  if (state.low == disk_low_) return;
  disk_low_ = state.low;
  if (state.low) {
    spdlog::warn("{}", disk_reserve_->LowMessage(state));
  } else {
    spdlog::info("the coordinator's disk has {} free on {} again, at or above its reserve of {}: log lines are "
                 "accepted",
                 FormatByteSize(state.usage.free_bytes), disk_reserve_->disk().path(),
                 FormatByteSize(state.reserve_bytes));
  }
}

std::string CoordinatorServer::HealthNote() {
  std::lock_guard<std::mutex> lock(disk_mu_);
  return disk_low_ ? "disk_low: the coordinator's disk is under its reserve (--disk-reserve): new log lines are "
                     "refused; commits and scheduling go on"
                   : std::string();
}

absl::Status CoordinatorServer::ReloadQueues() {
  if (config_.queues_file.empty()) {
    return absl::FailedPreconditionError("no queues file to read again: the coordinator runs without --queues");
  }
  ASSIGN_OR_RETURN(QueueConfig queues, QueueConfig::Load(config_.queues_file));
  const size_t count = queues.queues().size();
  controller_->ReplaceQueues(std::move(queues));
  spdlog::info("queues file {} read again: {} queue(s) in force", config_.queues_file, count);
  if (ticker_ != nullptr) ticker_->Poke();  // new quotas may place waiting jobs
  return absl::OkStatus();
}

// The queue usage counters read the store (one query over every placement)
// at most this often.
constexpr absl::Duration kUsageRefreshInterval = absl::Seconds(15);

void CoordinatorServer::RefreshUsageMetrics(absl::Time now) {
  if (now < next_usage_refresh_) return;
  absl::StatusOr<std::vector<UsageTotal>> totals = accounting_->QueueTotals();
  if (!totals.ok()) {
    spdlog::warn("queue usage metrics: {}", totals.status().ToString());
    next_usage_refresh_ = now + kUsageRefreshInterval;
    return;
  }
  // Until the first placement (nothing to sum: a cheap query) every tick
  // looks, so that the counters appear with the first placed job.
  if (!totals->empty()) next_usage_refresh_ = now + kUsageRefreshInterval;
  metrics_->SetQueueUsage(*totals);
}

void CoordinatorServer::Tick() {
  controller_->Tick();
  sessions_->CloseInvalid();
  CheckDisk();
  const absl::Time now = clock_->Now();
  RefreshUsageMetrics(now);
  if (now < next_retention_) return;
  next_retention_ = now + config_.retention_interval;
  absl::StatusOr<std::vector<std::string>> expired =
      controller_->lifecycle().ExpireFinished(now, config_.job_retention);
  if (!expired.ok()) {
    spdlog::warn("job retention: {}", expired.status().ToString());
    return;
  }
  for (const std::string& job_id : *expired) {
    if (absl::Status s = logs_->DeleteJob(job_id); !s.ok()) spdlog::warn("job retention: {}", s.ToString());
  }
  if (!expired->empty()) spdlog::info("job retention: removed {} finished job(s) and their logs", expired->size());
}

int CoordinatorServer::metrics_port() const { return metrics_http_ != nullptr ? metrics_http_->port() : 0; }

void CoordinatorServer::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (ticker_ != nullptr) ticker_->Stop();
  const absl::Status stopping = absl::UnavailableError("the coordinator is shutting down");
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);
  if (health_server_ != nullptr) health_server_->GetHealthCheckService()->SetServingStatus(false);
  // Everything that would keep a call open ends now, so that the server's
  // shutdown does not wait for its deadline.
  if (rendezvous_ != nullptr) rendezvous_->Shutdown();
  if (sessions_ != nullptr) sessions_->CloseAll(stopping);
  if (watchers_ != nullptr) watchers_->CloseAll(stopping);
  if (node_service_ != nullptr) node_service_->CloseStreams(stopping);
  spdlog::debug("shutdown: streams closed");
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + config_.shutdown_timeout));
  spdlog::debug("shutdown: server stopped");
  // Tasks left (reactors finishing) run, then the threads end.
  if (work_ != nullptr) work_->Shutdown();
  if (metrics_http_ != nullptr) metrics_http_->Stop();
  if (health_server_ != nullptr) health_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  if (server_ != nullptr) spdlog::info("coordinator stopped");
}

}  // namespace ringmaster::coordinator
