#ifndef RINGMASTER_COMMON_METRICS_HTTP_H_
#define RINGMASTER_COMMON_METRICS_HTTP_H_

// The HTTP endpoint Prometheus scrapes: GET /metrics renders a MetricsRegistry
// (prometheus-cpp's families and text serializer) in text format 0.0.4
// (Content-Type kPrometheusTextContentType), GET /healthz answers 200 "ok".
// Built on cpp-httplib, whose exceptions stop here. Not prometheus-cpp-pull's
// Exposer: it serves collectables only (no /healthz for the probes), and it
// brings a second embedded web server (CivetWeb) beside the cpp-httplib the
// coordinator already uses.
//
//   MetricsHttpServer server(&registry);
//   RETURN_IF_ERROR(server.Start("127.0.0.1", 9400));  // port 0: any free port
//   ... server.port() ...
//   server.Stop();  // or let the destructor do it
//
// Thread-safe: Start, Stop, port and address may be called from any thread.
// While started it runs one listening thread and kHandlerThreads request
// threads; Stop (and the destructor) ends and joins them all. The registry
// must outlive the server's Stop.

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ringmaster {

class MetricsHttpServer {
 public:
  // Threads that answer requests; scrapes are rare and cheap.
  static constexpr int kHandlerThreads = 2;

  explicit MetricsHttpServer(const MetricsRegistry* registry);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port and serves until Stop; returns once connections are
  // accepted. Port 0 picks a free port, reported by port(). The port is not
  // shared: another listener on it (even with SO_REUSEPORT) makes this fail.
  // INVALID_ARGUMENT for a port outside 0..65535; FAILED_PRECONDITION if
  // already started; UNAVAILABLE, naming host:port, if it cannot bind (port in
  // use, host not an address of this machine); INTERNAL if the server cannot
  // start its threads.
  absl::Status Start(const std::string& host = "127.0.0.1", int port = 0);

  // Stops accepting, finishes requests in flight and joins every thread the
  // server started. Idempotent; Start may be called again afterwards.
  void Stop();

  // The bound port while started, else 0.
  int port() const;
  // "127.0.0.1:9400" ("[::1]:9400" for IPv6) while started, else "".
  std::string address() const;

 private:
  const MetricsRegistry* const registry_;
  mutable absl::Mutex mu_;
  std::unique_ptr<httplib::Server> server_ ABSL_GUARDED_BY(mu_);
  std::thread listener_ ABSL_GUARDED_BY(mu_);
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_HTTP_H_
