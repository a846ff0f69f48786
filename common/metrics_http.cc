#include "common/metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "httplib.h"

namespace ringmaster {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string HostPort(const std::string& host, int port) {
  return host.find(':') == std::string::npos ? absl::StrCat(host, ":", port)
                                             : absl::StrCat("[", host, "]:", port);
}

void CloseSocket(int fd) {
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

// A short answer from the accepting thread, which must not block: what the
// socket buffer takes now is sent, then the connection is closed.
void AnswerAndClose(int fd, absl::string_view status) {
  const std::string answer =
      absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  CloseSocket(fd);
}

// A listening socket on host:port (SO_REUSEADDR, not SO_REUSEPORT: a second
// process must not be able to bind the same port and take half the scrapes;
// SO_REUSEADDR still allows a quick restart while old connections sit in
// TIME_WAIT). Non-blocking; -1 if no address of host can be bound.
int Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1, no = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void IpAndPort(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (rc != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                             NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(serv);
}

// A connection with (some of) its request read: the bytes so far and the
// moment it must be done by.
struct Connection {
  int fd = -1;
  std::string request;
  SteadyClock::time_point deadline;
};

// Only GET and HEAD are served: no body is ever read, so a complete head is
// a complete request.
bool IsGetOrHead(absl::string_view request) {
  return absl::StartsWith(request, "GET ") || absl::StartsWith(request, "HEAD ");
}

// The request line's target is /healthz (any query aside).
bool IsHealthz(absl::string_view request) {
  const size_t space = request.find(' ');
  if (space == absl::string_view::npos) return false;
  absl::string_view target = request.substr(space + 1);
  target = target.substr(0, target.find_first_of(" ?\r\n"));
  return target == "/healthz";
}

// cpp-httplib's view of a connection whose request the accepting thread has
// read: those bytes first, then the socket (a body, if any). Every wait ends
// at the connection's deadline, so a client that trickles its body, or reads
// its answer slowly, is cut off there rather than after each timeout anew.
class DeadlineStream : public httplib::Stream {
 public:
  explicit DeadlineStream(Connection& c) : fd_(c.fd), read_(std::move(c.request)), deadline_(c.deadline) {}

  bool is_readable() const override { return offset_ < read_.size() || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ < read_.size()) {
      const size_t n = std::min(size, read_.size() - offset_);
      std::memcpy(ptr, read_.data() + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      if (!Wait(POLLIN)) return -1;
      const ssize_t n = recv(fd_, ptr, size, 0);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!Wait(POLLOUT)) return -1;
      const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { IpAndPort(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { IpAndPort(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Until the socket is ready for `events` (true) or the deadline (false).
  bool Wait(short events) const {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - SteadyClock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, events, 0};
      const int rc = poll(&p, 1, static_cast<int>(left.count()));
      if (rc > 0) return true;  // ready, or an error recv/send will report
      if (rc < 0 && errno != EINTR) return false;
    }
  }

  const int fd_;
  const std::string read_;
  size_t offset_ = 0;
  const SteadyClock::time_point deadline_;
};

// cpp-httplib's request parsing, routing and answer writing, on a stream we
// hand it (process_request is protected; its listen loop is not used).
class Router : public httplib::Server {
 public:
  void Answer(httplib::Stream& stream) {
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
  }
};

// Threads that answer complete requests, fed through a bounded queue.
class Lane {
 public:
  Lane(int threads, size_t max_queued, std::function<void(Connection&)> answer)
      : max_queued_(max_queued), answer_(std::move(answer)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Lane() { Shutdown(); }

  // False, and `c` untouched, when the queue is full.
  bool Push(Connection& c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.size() >= max_queued_) return false;
      queue_.push_back(std::move(c));
    }
    ready_.notify_one();
    return true;
  }

  // Closes the connections still queued; joins the threads once each has
  // finished the one in hand.
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (Connection& c : queue_) CloseSocket(c.fd);
      queue_.clear();
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Run() {
    for (;;) {
      Connection c;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        c = std::move(queue_.front());
        queue_.pop_front();
      }
      answer_(c);
    }
  }

  const size_t max_queued_;
  const std::function<void(Connection&)> answer_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Connection> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

// Owns the listening socket, the accepting thread and the two lanes, from
// Start to Stop. The accepting thread alone touches pending connections.
class MetricsHttpServer::Serving {
 public:
  Serving(const MetricsRegistry* registry, const MetricsHttpOptions& options, Counters* counters, int listen_fd)
      : options_(options), counters_(counters), listen_fd_(listen_fd), wake_fd_(eventfd(0, EFD_CLOEXEC)) {
    if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    InstallHandlers(registry);
    try {
      auto answer = [this](Connection& c) { Answer(c); };
      health_ = std::make_unique<Lane>(1, options_.max_queued, answer);
      scrape_ = std::make_unique<Lane>(kHandlerThreads, options_.max_queued, answer);
      accepting_ = std::thread([this] { Loop(); });
    } catch (...) {
      close(wake_fd_);  // the lanes built so far join their threads as members
      throw;
    }
  }

  ~Serving() {
    stopping_.store(true);
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) {
      // The counter cannot overflow from one write; nothing else to do.
    }
    if (accepting_.joinable()) accepting_.join();
    if (health_ != nullptr) health_->Shutdown();
    if (scrape_ != nullptr) scrape_->Shutdown();
    close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
  }

 private:
  void InstallHandlers(const MetricsRegistry* registry) {
    router_.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(registry->ExposeText(), kPrometheusTextContentType);
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(absl::StrCat("cannot render metrics: ", e.what(), "\n"), "text/plain");
      }
    });
    router_.Get("/healthz", [note = options_.health_note](const httplib::Request&, httplib::Response& res) {
      std::string body = "ok\n";
      if (note) {
        try {
          if (std::string more = note(); !more.empty()) absl::StrAppend(&body, more, "\n");
        } catch (const std::exception& e) {
          absl::StrAppend(&body, "health note failed: ", e.what(), "\n");
        }
      }
      res.set_content(body, "text/plain; charset=utf-8");
    });
  }

  // On a lane's thread.
  void Answer(Connection& c) {
    const int fd = c.fd;
    counters_->answered.fetch_add(1);  // before the client can see its answer
    try {
      DeadlineStream stream(c);
      router_.Answer(stream);
    } catch (...) {
      // A connection's failure is its own; the server goes on.
    }
    CloseSocket(fd);
  }

  void Loop() {
    std::list<Connection> pending;  // in accept order, which is deadline order
    std::vector<pollfd> fds;
    while (!stopping_.load()) {
      fds.assign({{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
      for (const Connection& c : pending) fds.push_back({c.fd, POLLIN, 0});
      int timeout_ms = -1;
      if (!pending.empty()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(pending.front().deadline - SteadyClock::now());
        timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (stopping_.load()) break;
      size_t i = 2;
      for (auto it = pending.begin(); it != pending.end(); ++i) {
        it = fds[i].revents != 0 ? ReadMore(pending, it) : std::next(it);
      }
      const auto now = SteadyClock::now();
      while (!pending.empty() && pending.front().deadline <= now) {
        counters_->timed_out.fetch_add(1);  // counts come before the client can see them
        AnswerAndClose(pending.front().fd, "408 Request Timeout");
        pending.pop_front();
      }
      if (fds[0].revents != 0) Accept(pending);
    }
    for (Connection& c : pending) CloseSocket(c.fd);
  }

  // Reads what `it` has sent; hands a complete request to its lane. Returns
  // the next connection.
  std::list<Connection>::iterator ReadMore(std::list<Connection>& pending, std::list<Connection>::iterator it) {
    Connection& c = *it;
    char buffer[4096];
    const size_t room = options_.max_request_bytes - std::min(options_.max_request_bytes, c.request.size());
    const ssize_t n = recv(c.fd, buffer, std::min(sizeof(buffer), room + 1), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return std::next(it);
    if (n <= 0) {  // the client went away
      CloseSocket(c.fd);
      return pending.erase(it);
    }
    c.request.append(buffer, static_cast<size_t>(n));
    const size_t end = c.request.find("\r\n\r\n");
    if (end == std::string::npos || end + 4 > options_.max_request_bytes) {
      if (c.request.size() <= options_.max_request_bytes) return std::next(it);
      counters_->rejected.fetch_add(1);
      AnswerAndClose(c.fd, "431 Request Header Fields Too Large");
      return pending.erase(it);
    }
    if (!IsGetOrHead(c.request)) {
      counters_->rejected.fetch_add(1);
      AnswerAndClose(c.fd, "405 Method Not Allowed");
      return pending.erase(it);
    }
    Lane* lane = IsHealthz(c.request) ? health_.get() : scrape_.get();
    if (!lane->Push(c)) {
      counters_->refused_busy.fetch_add(1);
      AnswerAndClose(c.fd, "503 Service Unavailable");
    }
    return pending.erase(it);
  }

  void Accept(std::list<Connection>& pending) {
    // A bounded batch, so that a flood of connections cannot keep this
    // thread from reading the ones it has.
    for (int i = 0; i < 64; ++i) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: free the oldest pending one, else wait a moment.
          if (pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          else Evict(pending);
          continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        continue;  // ECONNABORTED, EINTR, a network error on that connection: the next one
      }
      counters_->accepted.fetch_add(1);
      if (static_cast<int>(pending.size()) >= options_.max_pending) Evict(pending);
      pending.push_back({fd, std::string(), SteadyClock::now() + absl::ToChronoNanoseconds(options_.deadline)});
    }
  }

  void Evict(std::list<Connection>& pending) {
    counters_->evicted.fetch_add(1);
    AnswerAndClose(pending.front().fd, "503 Service Unavailable");
    pending.pop_front();
  }

  const MetricsHttpOptions options_;
  Counters* const counters_;
  const int listen_fd_;
  const int wake_fd_;
  std::atomic<bool> stopping_{false};
  Router router_;
  std::unique_ptr<Lane> health_;
  std::unique_ptr<Lane> scrape_;
  std::thread accepting_;
};

MetricsHttpServer::MetricsHttpServer(const MetricsRegistry* registry, MetricsHttpOptions options)
    : registry_(registry), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metrics endpoint port %d is outside 0..65535", port));
  }
  if (options_.deadline <= absl::ZeroDuration() || options_.max_pending < 1 || options_.max_queued < 1 ||
      options_.max_request_bytes < 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics endpoint options: the deadline must be positive (", absl::FormatDuration(options_.deadline),
        "), max_pending and max_queued at least 1 (", options_.max_pending, ", ", options_.max_queued,
        "), max_request_bytes at least 64 (", options_.max_request_bytes, ")"));
  }
  absl::MutexLock lock(&mu_);
  if (serving_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics endpoint is already serving on ", address_));
  }
  const int fd = Listen(host, port);
  const int bound = fd < 0 ? -1 : BoundPort(fd);
  if (bound <= 0) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint cannot listen on ", HostPort(host, port),
                     " (port in use, or host is not an address of this machine)"));
  }
  try {
    serving_ = std::make_unique<Serving>(registry_, options_, &counters_, fd);
  } catch (const std::exception& e) {
    close(fd);  // A Serving that threw closed nothing: its destructor did not run.
    return absl::InternalError(
        absl::StrCat("metrics endpoint on ", HostPort(host, bound), " failed to start: ", e.what()));
  }
  port_ = bound;
  address_ = HostPort(host, bound);
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  absl::MutexLock lock(&mu_);
  serving_.reset();
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

MetricsHttpStats MetricsHttpServer::stats() const {
  MetricsHttpStats s;
  s.accepted = counters_.accepted.load();
  s.answered = counters_.answered.load();
  s.timed_out = counters_.timed_out.load();
  s.evicted = counters_.evicted.load();
  s.rejected = counters_.rejected.load();
  s.refused_busy = counters_.refused_busy.load();
  return s;
}

}  // namespace ringmaster
