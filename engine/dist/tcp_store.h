#ifndef RINGMASTER_ENGINE_DIST_TCP_STORE_H_
#define RINGMASTER_ENGINE_DIST_TCP_STORE_H_

// TcpStore: a dist::Store client of a TcpStoreServer (tcp_store_server.h),
// usually run by rank 0 — which can ask its TcpStore to start and own it:
//
//   TcpStoreOptions options;
//   options.host = host;                    // rank 0's address
//   options.port = port;                    // fixed, or 0 on rank 0 and published
//   options.start_server = (rank == 0);
//   ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> store, TcpStore::Connect(options));
//
// Get and Wait block on the server until the keys are set or the timeout
// passes (DEADLINE_EXCEEDED naming the keys); Add is atomic on the server.
// Losing the connection (server gone, reset) is UNAVAILABLE; the call is not
// retried (Add is not idempotent) and the next call opens a new connection.
// Counters are decimal text, as in FileStore.
//
// Thread-safe: each concurrent call uses its own connection from a small pool,
// so a Get parked on the server does not hold up a Set from another thread.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "engine/dist/store.h"
#include "engine/dist/tcp_store_server.h"
#include "engine/dist/tcp_store_wire.h"

namespace ringmaster::engine::dist {

struct TcpStoreOptions {
  // The server's address; with start_server, the address it listens on.
  std::string host = "127.0.0.1";
  // The server's port; with start_server, 0 picks an ephemeral one (port()).
  int port = 0;
  // Start (and own) the server in this process.
  bool start_server = false;
  // How long Connect keeps retrying while the server is not up yet.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Paces connection retries. Not owned; Clock::Real() by default.
  Clock* clock = nullptr;
};

class TcpStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<TcpStore>> Connect(const TcpStoreOptions& options);
  // Closes the connections, then stops the owned server, if any.
  ~TcpStore() override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  const std::string& host() const { return options_.host; }
  int port() const { return options_.port; }
  // The owned server (start_server), else nullptr.
  TcpStoreServer* server() const { return server_.get(); }

 private:
  TcpStore(TcpStoreOptions options, std::unique_ptr<TcpStoreServer> server)
      : options_(std::move(options)), server_(std::move(server)) {}

  // Sends `request` on a pooled connection and returns the payload of an OK
  // response; `wait` is how long the server may legitimately park it.
  absl::StatusOr<std::string> Call(const tcp_store_wire::Request& request, absl::Duration wait,
                                   const std::string& what);
  absl::StatusOr<int> TakeConnection();
  void ReturnConnection(int fd);
  std::string Where() const;

  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  std::vector<int> idle_;  // guarded by mu_
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_TCP_STORE_H_
