#ifndef RINGMASTER_COMMON_METRICS_HTTP_H_
#define RINGMASTER_COMMON_METRICS_HTTP_H_

// The HTTP endpoint Prometheus scrapes: GET /metrics renders a MetricsRegistry
// (prometheus-cpp's families and text serializer) in text format 0.0.4
// (Content-Type kPrometheusTextContentType), GET /healthz answers 200 "ok"
// (and options.health_note's lines, if any).
// cpp-httplib parses the requests and writes the answers (its exceptions stop
// here). Not prometheus-cpp-pull's Exposer: it serves collectables only (no
// /healthz for the probes), and it brings a second embedded web server
// (CivetWeb) beside the cpp-httplib the coordinator already uses.
//
//   MetricsHttpServer server(&registry);
//   RETURN_IF_ERROR(server.Start("127.0.0.1", 9400));  // port 0: any free port
//   ... server.port() ...
//   server.Stop();  // or let the destructor do it
//
// Abuse (a slowloris: many connections that trickle their request a byte at a
// time) cannot stop it answering. cpp-httplib's own accept loop would give
// each connection a thread until it delivers its request, and its read timeout
// is per read, so 8 trickling clients held every thread. Instead, one thread
// of ours accepts and reads every connection's request without blocking
// (poll), and:
//   - a connection has options.deadline from its accept to deliver its whole
//     request and be answered, however slowly it trickles: past it, it is
//     closed (with 408 if its request was not complete);
//   - at most options.max_pending connections may be still sending their
//     request; a new one beyond that closes the oldest of them; a request
//     longer than options.max_request_bytes gets 431, one that is not GET or
//     HEAD 405 (no body is ever read), and is closed;
//   - only a complete request reaches a thread, of one of two lanes: GET
//     /healthz has its own thread, everything else (/metrics) kHandlerThreads.
//     Each lane queues at most options.max_queued requests; beyond that the
//     request gets 503 at once. A scraper that is slow to read its answer
//     holds a /metrics thread until the deadline, never the /healthz one.
// Each connection carries one request (Connection: close); Prometheus and
// the kubelet reconnect per scrape or probe, which costs nothing at their
// intervals.
//
// Thread-safe: Start, Stop, port, address and stats may be called from any
// thread. While started it runs one accepting thread and 1 + kHandlerThreads
// request threads; Stop (and the destructor) ends and joins them all. The
// registry must outlive the server's Stop.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace ringmaster {

struct MetricsHttpOptions {
  // From accept to the last byte of the answer, whatever the client sends.
  // A scrape or a probe is one small request: it needs milliseconds.
  absl::Duration deadline = absl::Seconds(3);
  // Connections still sending their request, at most.
  int max_pending = 128;
  // The request line, headers and any body, at most.
  size_t max_request_bytes = 8192;
  // Complete requests waiting for a thread, per lane.
  int max_queued = 32;
  // Lines /healthz adds after "ok" (still 200: a degradation the daemon
  // lives with, such as the coordinator's disk under its reserve); "" for
  // none. Called on the /healthz thread: keep it cheap and non-blocking.
  std::function<std::string()> health_note;
};

// What the server did to connections since it was constructed (monotonic).
struct MetricsHttpStats {
  uint64_t accepted = 0;
  uint64_t answered = 0;       // taken by a handler thread (any status)
  uint64_t timed_out = 0;      // request incomplete at the deadline: 408
  uint64_t evicted = 0;        // closed for a newer one beyond max_pending
  uint64_t rejected = 0;       // longer than max_request_bytes (431), not GET or HEAD (405)
  uint64_t refused_busy = 0;   // its lane's queue full: 503
};

class MetricsHttpServer {
 public:
  // Threads that answer /metrics (and anything but /healthz); scrapes are
  // rare and cheap.
  static constexpr int kHandlerThreads = 2;

  explicit MetricsHttpServer(const MetricsRegistry* registry, MetricsHttpOptions options = {});
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port and serves until Stop; returns once connections are
  // accepted. Port 0 picks a free port, reported by port(). The port is not
  // shared: another listener on it (even with SO_REUSEPORT) makes this fail.
  // INVALID_ARGUMENT for a port outside 0..65535 or options out of range
  // (a deadline that is not positive, a bound under 1); FAILED_PRECONDITION if
  // already started; UNAVAILABLE, naming host:port, if it cannot bind (port in
  // use, host not an address of this machine); INTERNAL if the server cannot
  // start its threads.
  absl::Status Start(const std::string& host = "127.0.0.1", int port = 0);

  // Stops accepting, closes connections still sending their request or
  // waiting for a thread, lets the requests being answered finish (within
  // their deadline) and joins every thread the server started. Idempotent;
  // Start may be called again afterwards.
  void Stop();

  // The bound port while started, else 0.
  int port() const;
  // "127.0.0.1:9400" ("[::1]:9400" for IPv6) while started, else "".
  std::string address() const;
  MetricsHttpStats stats() const;

 private:
  struct Counters {
    std::atomic<uint64_t> accepted{0}, answered{0}, timed_out{0}, evicted{0}, rejected{0}, refused_busy{0};
  };
  class Serving;  // the listener, its threads and connections (metrics_http.cc)

  const MetricsRegistry* const registry_;
  const MetricsHttpOptions options_;
  Counters counters_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Serving> serving_ ABSL_GUARDED_BY(mu_);
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_HTTP_H_
