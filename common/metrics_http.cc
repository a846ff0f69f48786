#include "common/metrics_http.h"

#include <sys/socket.h>

#include <atomic>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "httplib.h"

namespace ringmaster {
namespace {

// Bounds how long Stop waits for a connected client that sends nothing or
// stalls mid-request: each connection carries one request (Prometheus
// reconnects per scrape, which costs nothing at scrape intervals), and a silent
// one is dropped after these timeouts.
constexpr time_t kIdleTimeoutSeconds = 1;
constexpr time_t kIoTimeoutSeconds = 2;

std::string HostPort(const std::string& host, int port) {
  return host.find(':') == std::string::npos ? absl::StrCat(host, ":", port)
                                             : absl::StrCat("[", host, "]:", port);
}

// cpp-httplib's default sets SO_REUSEPORT, which lets a second process bind the
// same port and take half the scrapes. SO_REUSEADDR alone still allows a quick
// restart while old connections sit in TIME_WAIT.
void ExclusiveSocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

void InstallHandlers(const MetricsRegistry* registry, httplib::Server* server) {
  server->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_content(registry->ExposeText(), kPrometheusTextContentType);
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(absl::StrCat("cannot render metrics: ", e.what(), "\n"), "text/plain");
    }
  });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(const MetricsRegistry* registry) : registry_(registry) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metrics endpoint port %d is outside 0..65535", port));
  }
  absl::MutexLock lock(&mu_);
  if (server_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics endpoint is already serving on ", address_));
  }
  try {
    auto server = std::make_unique<httplib::Server>();
    server->new_task_queue = [] { return new httplib::ThreadPool(kHandlerThreads); };
    server->set_socket_options(ExclusiveSocketOptions);
    server->set_keep_alive_max_count(1);
    server->set_keep_alive_timeout(kIdleTimeoutSeconds);
    server->set_read_timeout(kIoTimeoutSeconds);
    server->set_write_timeout(kIoTimeoutSeconds);
    InstallHandlers(registry_, server.get());

    const int bound = port == 0 ? server->bind_to_any_port(host)
                                : (server->bind_to_port(host, port) ? port : -1);
    if (bound <= 0) {
      return absl::UnavailableError(
          absl::StrCat("metrics endpoint cannot listen on ", HostPort(host, port),
                       " (port in use, or host is not an address of this machine)"));
    }

    std::string address = HostPort(host, bound);
    // listen_after_bind marks the server running on entry; a stop() before
    // that would be lost, so wait for it (or for listening to end at once).
    auto finished = std::make_shared<std::atomic<bool>>(false);
    httplib::Server* raw = server.get();
    std::thread listener([raw, finished] {
      try {
        raw->listen_after_bind();
      } catch (...) {
        // Nothing escapes the thread; Start reports a server that never ran.
      }
      finished->store(true);
    });
    while (!raw->is_running() && !finished->load()) std::this_thread::yield();
    if (!raw->is_running()) {
      listener.join();
      return absl::InternalError(
          absl::StrCat("metrics endpoint on ", address, " stopped as it started"));
    }
    server_ = std::move(server);
    listener_ = std::move(listener);
    port_ = bound;
    address_ = std::move(address);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("metrics endpoint on ", HostPort(host, port), " failed to start: ", e.what()));
  }
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  absl::MutexLock lock(&mu_);
  if (server_ == nullptr) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();  // Joins the handler threads too.
  server_.reset();
  port_ = 0;
  address_.clear();
}

int MetricsHttpServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

std::string MetricsHttpServer::address() const {
  absl::MutexLock lock(&mu_);
  return address_;
}

}  // namespace ringmaster
