#include "engine/dist/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/dist/tcp_store_wire.h"

namespace ringmaster::engine::dist {

namespace wire = tcp_store_wire;

// The server thread's state. Touched only by that thread.
class TcpStoreServer::Loop {
 public:
  Loop(int listen_fd, int wake_read, std::atomic<int>* parked)
      : listen_fd_(listen_fd), wake_read_(wake_read), parked_(parked) {}
  ~Loop() {
    for (auto& conn : conns_) ::close(conn->fd);
    ::close(listen_fd_);
    ::close(wake_read_);
    parked_->store(0);
  }

  // Serves until the wake-up pipe becomes readable.
  void Run();

 private:
  struct Parked {
    wire::Request request;
    absl::Time deadline;
  };
  struct Conn {
    int fd;
    std::string in, out;
    std::optional<Parked> parked;
    bool dead = false;
  };

  void Accept();
  void Read(Conn& conn);
  void Flush(Conn& conn);
  // Handles every whole request in conn.in while the connection is not parked.
  void Process(Conn& conn);
  void Handle(Conn& conn, wire::Request request);
  // Answers parked requests whose keys are all set now.
  void WakeParked();
  // Answers parked requests whose deadline has passed.
  void ExpireParked(absl::Time now);
  void Respond(Conn& conn, absl::StatusCode code, std::string payload);
  void Unpark(Conn& conn);
  bool AllSet(const std::vector<std::string>& keys) const;
  std::string Missing(const std::vector<std::string>& keys) const;

  const int listen_fd_;
  const int wake_read_;
  std::atomic<int>* parked_;
  std::map<std::string, std::string> data_;
  std::vector<std::unique_ptr<Conn>> conns_;
};

void TcpStoreServer::Loop::Run() {
  std::vector<struct pollfd> fds;
  for (;;) {
    absl::Time now = absl::Now();
    ExpireParked(now);
    absl::Time next_deadline = absl::InfiniteFuture();
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& conn : conns_) {
      short events = POLLIN;
      if (!conn->out.empty()) events |= POLLOUT;
      fds.push_back({conn->fd, events, 0});
      if (conn->parked) next_deadline = std::min(next_deadline, conn->parked->deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      absl::Duration left = std::max(next_deadline - now, absl::ZeroDuration());
      timeout_ms = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
    }
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // unrecoverable; clients see their connections close
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) Accept();
    // conns_ may have grown in Accept; only the first fds.size() - 2 were polled.
    for (size_t i = 2; i < fds.size(); ++i) {
      Conn& conn = *conns_[i - 2];
      if (fds[i].revents & POLLOUT) Flush(conn);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) Read(conn);
      if (!conn.dead) Process(conn);
    }
    for (auto& conn : conns_) {
      if (conn->dead) {
        Unpark(*conn);
        ::close(conn->fd);
      }
    }
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->dead; }),
                 conns_.end());
  }
}

void TcpStoreServer::Loop::Accept() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN, or a connection that died before we took it
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conns_.push_back(std::move(conn));
  }
}

void TcpStoreServer::Loop::Read(Conn& conn) {
  char chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(conn.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      conn.in.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    conn.dead = true;  // EOF or error: the client is gone
    return;
  }
}

void TcpStoreServer::Loop::Flush(Conn& conn) {
  while (!conn.out.empty()) {
    ssize_t n = ::send(conn.fd, conn.out.data(), conn.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      conn.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    conn.dead = true;
    return;
  }
}

void TcpStoreServer::Loop::Process(Conn& conn) {
  std::string body;
  while (!conn.parked && !conn.dead) {
    auto taken = wire::TakeFrame(&conn.in, &body);
    if (!taken.ok()) {
      conn.dead = true;  // a client that speaks something else
      return;
    }
    if (!*taken) break;
    auto request = wire::DecodeRequest(body);
    if (!request.ok()) {
      Respond(conn, request.status().code(), std::string(request.status().message()));
      continue;
    }
    Handle(conn, *std::move(request));
  }
  Flush(conn);
}

void TcpStoreServer::Loop::Handle(Conn& conn, wire::Request request) {
  const bool single = request.keys.size() == 1;
  switch (request.op) {
    case wire::Op::kSet:
      if (!single) break;
      data_[request.keys[0]] = std::move(request.value);
      Respond(conn, absl::StatusCode::kOk, "");
      WakeParked();
      return;
    case wire::Op::kAdd: {
      if (!single) break;
      const std::string& key = request.keys[0];
      int64_t value = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
        Respond(conn, absl::StatusCode::kInvalidArgument,
                absl::StrCat("add to key '", absl::CHexEscape(key),
                             "', which holds a value that is not an integer"));
        return;
      }
      if (__builtin_add_overflow(value, request.delta, &value)) {
        Respond(conn, absl::StatusCode::kOutOfRange,
                absl::StrCat("add ", request.delta, " to key '", absl::CHexEscape(key),
                             "' overflows int64"));
        return;
      }
      data_[key] = absl::StrCat(value);
      Respond(conn, absl::StatusCode::kOk, absl::StrCat(value));
      WakeParked();
      return;
    }
    case wire::Op::kGet:
      if (!single) break;
      [[fallthrough]];
    case wire::Op::kWait: {
      if (AllSet(request.keys)) {
        Respond(conn, absl::StatusCode::kOk,
                request.op == wire::Op::kGet ? data_[request.keys[0]] : "");
        return;
      }
      absl::Time deadline = absl::Now() + absl::Milliseconds(request.timeout_ms);
      conn.parked = Parked{std::move(request), deadline};
      parked_->fetch_add(1);
      return;
    }
  }
  Respond(conn, absl::StatusCode::kInvalidArgument, "request has the wrong number of keys");
}

void TcpStoreServer::Loop::WakeParked() {
  for (auto& conn : conns_) {
    if (!conn->parked || !AllSet(conn->parked->request.keys)) continue;
    const wire::Request& request = conn->parked->request;
    std::string payload = request.op == wire::Op::kGet ? data_[request.keys[0]] : "";
    Unpark(*conn);
    Respond(*conn, absl::StatusCode::kOk, std::move(payload));
    Process(*conn);  // requests that queued up behind the parked one
  }
}

void TcpStoreServer::Loop::ExpireParked(absl::Time now) {
  for (auto& conn : conns_) {
    if (!conn->parked || conn->parked->deadline > now) continue;
    const wire::Request& request = conn->parked->request;
    std::string message = absl::StrCat(Missing(request.keys), " not set within ",
                                       absl::FormatDuration(absl::Milliseconds(request.timeout_ms)));
    Unpark(*conn);
    Respond(*conn, absl::StatusCode::kDeadlineExceeded, std::move(message));
    Process(*conn);
  }
}

void TcpStoreServer::Loop::Respond(Conn& conn, absl::StatusCode code, std::string payload) {
  conn.out += wire::EncodeResponse({code, std::move(payload)});
  Flush(conn);
}

void TcpStoreServer::Loop::Unpark(Conn& conn) {
  if (!conn.parked) return;
  conn.parked.reset();
  parked_->fetch_sub(1);
}

bool TcpStoreServer::Loop::AllSet(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data_.count(k); });
}

std::string TcpStoreServer::Loop::Missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!data_.count(key)) missing.push_back(absl::StrCat("'", absl::CHexEscape(key), "'"));
  }
  return absl::StrCat(missing.size() == 1 ? "key " : "keys ", absl::StrJoin(missing, ", "),
                      missing.size() == 1 ? " was" : " were");
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port) {
  int bound_port = 0;
  auto listen_fd = wire::Listen(host, port, &bound_port);
  if (!listen_fd.ok()) {
    return absl::Status(listen_fd.status().code(),
                        absl::StrCat("tcp store server: ", listen_fd.status().message()));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(*listen_fd);
    return absl::InternalError("tcp store server: pipe2 failed");
  }
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(*listen_fd, bound_port, pipe_fds[0], pipe_fds[1]));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write)
    : port_(port),
      wake_write_(wake_write),
      loop_(std::make_unique<Loop>(listen_fd, wake_read, &parked_)) {
  thread_ = std::thread([this] { loop_->Run(); });
}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::Stop() {
  if (stopped_.exchange(true)) return;
  char byte = 1;
  while (::write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  loop_.reset();  // closes every connection, the listening socket and the pipe
  ::close(wake_write_);
}

}  // namespace ringmaster::engine::dist
