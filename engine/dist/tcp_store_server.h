#ifndef RINGMASTER_ENGINE_DIST_TCP_STORE_SERVER_H_
#define RINGMASTER_ENGINE_DIST_TCP_STORE_SERVER_H_

// TcpStoreServer: the key-value server behind TcpStore, run by rank 0 (or by
// whoever hosts the rendezvous). One thread runs a poll(2) loop over the
// listening socket, every client connection and a wake-up pipe; it owns the
// map and parks get/wait requests until their keys are set or their deadline
// (computed from the request's timeout on the real clock) passes, then answers
// DEADLINE_EXCEEDED naming the missing keys. Add is atomic because only this
// thread touches the map. Stop() (or the destructor) wakes the loop, closes
// every connection — clients then see UNAVAILABLE — and joins the thread.
//
// Public methods are thread-safe.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace ringmaster::engine::dist {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: an ephemeral port, see port()) and starts
  // serving. host "0.0.0.0" listens on every interface.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port);
  ~TcpStoreServer();

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  // Requests parked waiting for keys right now (lets a test wait for a client
  // to be blocked before acting).
  int parked() const { return parked_.load(); }
  // Closes every connection and the listening socket, joins the thread.
  // Idempotent.
  void Stop();

 private:
  class Loop;
  TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write);

  const int port_;
  const int wake_write_;
  std::atomic<int> parked_{0};
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_TCP_STORE_SERVER_H_
