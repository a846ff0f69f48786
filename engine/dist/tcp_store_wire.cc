#include "engine/dist/tcp_store_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::dist::tcp_store_wire {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string* out, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
void PutBytes(std::string* out, absl::string_view bytes) {
  PutU32(out, static_cast<uint32_t>(bytes.size()));
  out->append(bytes.data(), bytes.size());
}

std::string Frame(const std::string& body) {
  std::string frame;
  frame.reserve(body.size() + 4);
  PutU32(&frame, static_cast<uint32_t>(body.size()));
  frame += body;
  return frame;
}

// Reads fixed-size fields from a body, failing once it runs out.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U8(uint8_t* v) {
    if (data_.size() < 1) return false;
    *v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(4);
    return true;
  }
  bool I64(int64_t* v) {
    if (data_.size() < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    *v = static_cast<int64_t>(u);
    data_.remove_prefix(8);
    return true;
  }
  bool Bytes(std::string* v) {
    uint32_t n;
    if (!U32(&n) || data_.size() < n) return false;
    v->assign(data_.data(), n);
    data_.remove_prefix(n);
    return true;
  }
  bool AtEnd() const { return data_.empty(); }

 private:
  absl::string_view data_;
};

int PollTimeoutMs(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                                            1 << 30));
}

// Waits until `fd` is ready for `events`; DEADLINE_EXCEEDED at `deadline`.
absl::Status WaitReady(int fd, short events, absl::Time deadline, absl::string_view what) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int timeout_ms = PollTimeoutMs(deadline);
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    if (n > 0) return absl::OkStatus();
    if (timeout_ms == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
  }
}

absl::Status SocketError(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ETIMEDOUT:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<struct addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  struct addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                         &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "': ", ::gai_strerror(rc)));
  }
  return result;
}

}  // namespace

std::string EncodeRequest(const Request& request) {
  std::string body;
  body.push_back(static_cast<char>(request.op));
  PutU32(&body, static_cast<uint32_t>(request.keys.size()));
  for (const std::string& key : request.keys) PutBytes(&body, key);
  PutBytes(&body, request.value);
  PutI64(&body, request.delta);
  PutI64(&body, request.timeout_ms);
  return Frame(body);
}

std::string EncodeResponse(const Response& response) {
  std::string body;
  body.push_back(static_cast<char>(response.code));
  PutBytes(&body, response.payload);
  return Frame(body);
}

absl::StatusOr<Request> DecodeRequest(absl::string_view body) {
  Reader reader(body);
  Request request;
  uint8_t op;
  uint32_t key_count;
  if (!reader.U8(&op) || op < 1 || op > 4 || !reader.U32(&key_count) || key_count > body.size()) {
    return absl::InvalidArgumentError("malformed tcp store request header");
  }
  request.op = static_cast<Op>(op);
  request.keys.resize(key_count);
  for (std::string& key : request.keys) {
    if (!reader.Bytes(&key)) return absl::InvalidArgumentError("malformed tcp store request key");
  }
  if (!reader.Bytes(&request.value) || !reader.I64(&request.delta) ||
      !reader.I64(&request.timeout_ms) || !reader.AtEnd()) {
    return absl::InvalidArgumentError("malformed tcp store request body");
  }
  return request;
}

absl::StatusOr<Response> DecodeResponse(absl::string_view body) {
  Reader reader(body);
  Response response;
  uint8_t code;
  if (!reader.U8(&code) || !reader.Bytes(&response.payload) || !reader.AtEnd()) {
    return absl::InternalError("malformed tcp store response");
  }
  response.code = static_cast<absl::StatusCode>(code);
  return response;
}

absl::StatusOr<bool> TakeFrame(std::string* buffer, std::string* body) {
  Reader reader(*buffer);
  uint32_t length;
  if (!reader.U32(&length)) return false;
  if (length > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store frame of ", length, " bytes exceeds ", kMaxFrameBytes));
  }
  if (buffer->size() < 4 + static_cast<size_t>(length)) return false;
  body->assign(*buffer, 4, length);
  buffer->erase(0, 4 + static_cast<size_t>(length));
  return true;
}

absl::StatusOr<int> Listen(const std::string& host, int port, int* bound_port) {
  auto resolved = Resolve(host, port, /*passive=*/true);
  if (!resolved.ok()) return resolved.status();
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for '", host, "'"));
  for (struct addrinfo* ai = *resolved; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) {
      last = SocketError("socket", errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last = SocketError(absl::StrCat("bind/listen on ", host, ":", port), errno);
      ::close(fd);
      continue;
    }
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len);
    *bound_port = ntohs(addr.ss_family == AF_INET6
                            ? reinterpret_cast<struct sockaddr_in6*>(&addr)->sin6_port
                            : reinterpret_cast<struct sockaddr_in*>(&addr)->sin_port);
    ::freeaddrinfo(*resolved);
    return fd;
  }
  ::freeaddrinfo(*resolved);
  return last;
}

absl::StatusOr<int> Connect(const std::string& host, int port, absl::Time deadline) {
  auto resolved = Resolve(host, port, /*passive=*/false);
  if (!resolved.ok()) return resolved.status();
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for '", host, "'"));
  for (struct addrinfo* ai = *resolved; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) {
      last = SocketError("socket", errno);
      continue;
    }
    absl::Status status = absl::OkStatus();
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        status = SocketError(absl::StrCat("connect to ", host, ":", port), errno);
      } else {
        status = WaitReady(fd, POLLOUT, deadline, absl::StrCat("connecting to ", host, ":", port));
        int err = 0;
        socklen_t len = sizeof err;
        if (status.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
          status = SocketError(absl::StrCat("connect to ", host, ":", port), err);
        }
      }
    }
    if (status.ok()) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::freeaddrinfo(*resolved);
      return fd;
    }
    ::close(fd);
    last = status;
  }
  ::freeaddrinfo(*resolved);
  return last;
}

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SocketError("send", errno);
    absl::Status ready = WaitReady(fd, POLLOUT, deadline, "sending");
    if (!ready.ok()) return ready;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFrame(int fd, absl::Time deadline) {
  std::string buffer, body;
  char chunk[64 * 1024];
  for (;;) {
    auto taken = TakeFrame(&buffer, &body);
    if (!taken.ok()) return taken.status();
    if (*taken) return body;
    absl::Status ready = WaitReady(fd, POLLIN, deadline, "waiting for a response");
    if (!ready.ok()) return ready;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) return SocketError("recv", errno);
    if (n == 0) return absl::UnavailableError("connection closed by the server");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace ringmaster::engine::dist::tcp_store_wire
