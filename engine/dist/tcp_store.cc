#include "engine/dist/tcp_store.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/retry.h"
#include "common/status_macros.h"

namespace ringmaster::engine::dist {
namespace {

namespace wire = tcp_store_wire;

// Bounds on socket work that is not waiting for keys: connecting, sending a
// request, and the server's answer beyond the time it may park a request.
constexpr absl::Duration kConnectAttempt = absl::Seconds(5);
constexpr absl::Duration kIoTimeout = absl::Seconds(30);
// Between connection attempts: 10 ms doubling up to 200 ms, no jitter (one
// client per rank, one server), the last attempt at the deadline.
constexpr RetryPolicy kConnectRetry = {absl::Milliseconds(10), absl::Milliseconds(200), 2.0, 0.0};

int64_t TimeoutMs(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return 0;
  return absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
}

std::string Quoted(const std::string& key) { return absl::StrCat("'", absl::CHexEscape(key), "'"); }

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const TcpStoreOptions& options) {
  TcpStoreOptions resolved = options;
  if (resolved.clock == nullptr) resolved.clock = Clock::Real();
  std::unique_ptr<TcpStoreServer> server;
  if (resolved.start_server) {
    ASSIGN_OR_RETURN(server, TcpStoreServer::Start(resolved.host, resolved.port));
    resolved.port = server->port();
  }
  std::unique_ptr<TcpStore> store(new TcpStore(resolved, std::move(server)));

  // The server may not be up yet: retry refused connections until the deadline.
  Clock* clock = resolved.clock;
  Deadline deadline(clock, resolved.connect_timeout);
  Retry retry(clock, kConnectRetry);
  for (;;) {
    absl::StatusOr<int> fd =
        wire::Connect(resolved.host, resolved.port, absl::Now() + kConnectAttempt);
    if (fd.ok()) {
      store->ReturnConnection(*fd);
      return store;
    }
    if (!absl::IsUnavailable(fd.status()) && !absl::IsDeadlineExceeded(fd.status())) {
      return absl::Status(fd.status().code(),
                          absl::StrCat(store->Where(), ": ", fd.status().message()));
    }
    if (deadline.Expired()) {
      return absl::DeadlineExceededError(
          absl::StrCat(store->Where(), ": no server within ",
                       absl::FormatDuration(resolved.connect_timeout), " (last error: ",
                       fd.status().message(), ")"));
    }
    // No deadline in the policy: there is always a next delay.
    clock->SleepUntil(std::min(clock->Now() + *retry.NextDelay(), deadline.at()));
  }
}

TcpStore::~TcpStore() {
  for (int fd : idle_) ::close(fd);
  idle_.clear();
  server_.reset();
}

std::string TcpStore::Where() const {
  return absl::StrCat("tcp store ", options_.host, ":", options_.port);
}

absl::StatusOr<int> TcpStore::TakeConnection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  return wire::Connect(options_.host, options_.port, absl::Now() + kConnectAttempt);
}

void TcpStore::ReturnConnection(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(fd);
}

absl::StatusOr<std::string> TcpStore::Call(const wire::Request& request, absl::Duration wait,
                                           const std::string& what) {
  auto fail = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(Where(), ": ", what, ": ", status.message()));
  };
  absl::StatusOr<int> fd = TakeConnection();
  if (!fd.ok()) return fail(fd.status());
  absl::Status sent = wire::SendAll(*fd, wire::EncodeRequest(request), absl::Now() + kIoTimeout);
  absl::StatusOr<std::string> body =
      sent.ok() ? wire::ReadFrame(*fd, absl::Now() + wait + kIoTimeout) : sent;
  absl::StatusOr<wire::Response> response =
      body.ok() ? wire::DecodeResponse(*body) : body.status();
  if (!response.ok()) {
    ::close(*fd);  // the connection is in an unknown state
    return fail(response.status());
  }
  ReturnConnection(*fd);
  if (response->code != absl::StatusCode::kOk) {
    return absl::Status(response->code, absl::StrCat(Where(), ": ", response->payload));
  }
  return std::move(response->payload);
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  wire::Request request;
  request.op = wire::Op::kSet;
  request.keys = {key};
  request.value = value;
  return Call(request, absl::ZeroDuration(), absl::StrCat("set ", Quoted(key))).status();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key, absl::Duration timeout) {
  wire::Request request;
  request.op = wire::Op::kGet;
  request.keys = {key};
  request.timeout_ms = TimeoutMs(timeout);
  return Call(request, timeout, absl::StrCat("get ", Quoted(key)));
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  wire::Request request;
  request.op = wire::Op::kAdd;
  request.keys = {key};
  request.delta = delta;
  ASSIGN_OR_RETURN(std::string payload, Call(request, absl::ZeroDuration(),
                                             absl::StrCat("add to ", Quoted(key))));
  int64_t value;
  if (!absl::SimpleAtoi(payload, &value)) {
    return absl::InternalError(absl::StrCat(Where(), ": add returned '", payload, "'"));
  }
  return value;
}

absl::Status TcpStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  wire::Request request;
  request.op = wire::Op::kWait;
  request.keys = keys;
  request.timeout_ms = TimeoutMs(timeout);
  return Call(request, timeout, "wait").status();
}

}  // namespace ringmaster::engine::dist
