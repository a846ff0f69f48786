#include "common/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/metrics_promtool.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringmaster {
namespace {

// Threads of this process now (Linux), to show the server leaves none behind.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// The thread count before a test starts servers. Sanitizers start a helper
// thread on the first thread creation; make that happen first.
int BaselineThreadCount() {
  std::thread([] {}).join();
  return ThreadCount();
}

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A plain TCP connection to 127.0.0.1:port; -1 on failure. A small
// receive_buffer (set before connecting) makes a client that does not read
// stall the server's writes early.
int Connect(int port, int receive_buffer = 0) {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  if (sock < 0) return -1;
  if (receive_buffer > 0) setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(sock);
    return -1;
  }
  return sock;
}

// Data or EOF within `seconds`.
bool Readable(int sock, double seconds) {
  pollfd p{sock, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(seconds * 1000)) > 0;
}

struct Answer {
  std::string bytes;
  bool closed = false;  // the server closed the connection
};

// Everything the server sends until it closes the connection, for at most
// `seconds`.
Answer ReadUntilClosed(int sock, double seconds) {
  Answer answer;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(seconds));
  char buffer[65536];
  while (Readable(sock, std::max(0.0, Seconds(end - Clock::now())))) {
    const ssize_t n = recv(sock, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      answer.closed = true;
      break;
    }
    answer.bytes.append(buffer, static_cast<size_t>(n));
  }
  return answer;
}

// Sends `request` on a new connection; what came back before the close.
std::string RawRequest(int port, const std::string& request) {
  const int sock = Connect(port);
  if (sock < 0) return "";
  send(sock, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer = ReadUntilClosed(sock, 5.0).bytes;
  close(sock);
  return answer;
}

std::string StatusLine(const std::string& answer) { return answer.substr(0, answer.find("\r\n")); }

httplib::Result Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  return client.Get(path);
}

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    heartbeats_ = &(*registry_.AddCounter("ringmaster_worker_heartbeats_total", "Heartbeats sent."))
                       ->Add({{"node", "dgx-\"01\"\\a\nb"}});
    (*registry_.AddHistogram("ringmaster_trainer_step_seconds", "Wall time of one training step."))
        ->Add({{"job", "j1"}, {"rank", "0"}}, DefaultSecondsBuckets())
        .Observe(0.3);
  }

  MetricsRegistry registry_;
  prometheus::Counter* heartbeats_ = nullptr;
};

TEST_F(MetricsHttpServerTest, ServesMetricsThatPromtoolAcceptsAndHealthz) {
  const int threads_before = BaselineThreadCount();
  MetricsHttpServer server(&registry_);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  const int port = server.port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(port));

  heartbeats_->Increment(41);
  httplib::Result res = Get(port, "/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusTextContentType);
  EXPECT_EQ(res->body, registry_.ExposeText());
  EXPECT_NE(res->body.find("ringmaster_worker_heartbeats_total{node=\"dgx-\\\"01\\\"\\\\a\\nb\"} 41\n"),
            std::string::npos)
      << res->body;
  absl::StatusOr<PromtoolResult> check = RunPromtoolCheckMetrics(res->body);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0) << check->output;
  EXPECT_EQ(check->output, "");

  heartbeats_->Increment();  // Every scrape renders the values of that moment.
  res = Get(port, "/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("} 42\n"), std::string::npos) << res->body;

  res = Get(port, "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\n");
  res = Get(port, "/nothing-here");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  server.Stop();
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.address(), "");
  res = Get(port, "/metrics");
  EXPECT_FALSE(res) << "still answering after Stop";
  EXPECT_EQ(ThreadCount(), threads_before) << "Stop left threads running";
}

TEST_F(MetricsHttpServerTest, ConcurrentScrapesWhileCounting) {
  MetricsHttpServer server(&registry_);
  ASSERT_TRUE(server.Start().ok());
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        httplib::Result res = Get(server.port(), "/metrics");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 200);
        heartbeats_->Increment();
      }
    });
  }
  for (std::thread& t : scrapers) t.join();
  EXPECT_EQ(heartbeats_->Value(), 40);
}

TEST_F(MetricsHttpServerTest, BusyPortIsUnavailableAndNamesTheAddress) {
  MetricsHttpServer first(&registry_);
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  MetricsHttpServer second(&registry_);
  absl::Status s = second.Start("127.0.0.1", first.port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "metrics endpoint cannot listen on 127.0.0.1:" +
                             std::to_string(first.port()) +
                             " (port in use, or host is not an address of this machine)");
  EXPECT_EQ(second.port(), 0);
  // The first one still serves.
  httplib::Result res = Get(first.port(), "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(MetricsHttpServerTest, RejectsBadPortAndSecondStart) {
  MetricsHttpServer server(&registry_);
  absl::Status s = server.Start("127.0.0.1", 70000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "metrics endpoint port 70000 is outside 0..65535");
  ASSERT_TRUE(server.Start().ok());
  s = server.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "metrics endpoint is already serving on " + server.address());
}

TEST_F(MetricsHttpServerTest, HealthNoteFollowsOkAndOptionsAreChecked) {
  MetricsHttpOptions options;
  std::string note;
  options.health_note = [&note] { return note; };
  MetricsHttpServer server(&registry_, options);
  ASSERT_TRUE(server.Start().ok());
  httplib::Result res = Get(server.port(), "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "ok\n");
  note = "disk_low: under the reserve";
  res = Get(server.port(), "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\ndisk_low: under the reserve\n");

  options.deadline = absl::ZeroDuration();
  options.max_queued = 0;
  MetricsHttpServer bad(&registry_, options);
  absl::Status s = bad.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "metrics endpoint options: the deadline must be positive (0), max_pending and max_queued at least 1 "
            "(128, 0), max_request_bytes at least 64 (8192)");
}

TEST_F(MetricsHttpServerTest, DestructorStopsAndStartWorksAfterStop) {
  const int threads_before = BaselineThreadCount();
  int port = 0;
  {
    MetricsHttpServer server(&registry_);
    ASSERT_TRUE(server.Start().ok());
    server.Stop();
    server.Stop();  // Idempotent.
    ASSERT_TRUE(server.Start().ok());
    port = server.port();
    ASSERT_TRUE(Get(port, "/healthz"));
  }
  EXPECT_FALSE(Get(port, "/healthz")) << "still answering after destruction";
  EXPECT_EQ(ThreadCount(), threads_before);
}

TEST_F(MetricsHttpServerTest, StopDoesNotWaitForASilentClient) {
  MetricsHttpServer server(&registry_);
  ASSERT_TRUE(server.Start().ok());
  const int sock = Connect(server.port());  // connects and never sends a request
  ASSERT_GE(sock, 0);
  ASSERT_TRUE(Get(server.port(), "/healthz"));  // the silent one has been accepted by now
  const Clock::time_point start = Clock::now();
  server.Stop();  // closes it at once rather than at its deadline
  EXPECT_LT(Seconds(Clock::now() - start), 1.0);
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(ReadUntilClosed(sock, 2.0).bytes, "");
  close(sock);
}

// The attack of issue #27 item 5: connections that send their request a byte
// at a time, more often than any per-read timeout, are closed at the
// whole-request deadline (408), counted from their accept.
TEST_F(MetricsHttpServerTest, TricklingRequestIsClosedAtTheDeadline) {
  MetricsHttpOptions options;
  options.deadline = absl::Milliseconds(600);
  MetricsHttpServer server(&registry_, options);
  ASSERT_TRUE(server.Start().ok());
  const int sock = Connect(server.port());
  ASSERT_GE(sock, 0);
  const Clock::time_point start = Clock::now();
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    closed = send(sock, &request[i], 1, MSG_NOSIGNAL) != 1 || Readable(sock, 0.05);
  }
  Answer answer = ReadUntilClosed(sock, 2.0);
  const double lived = Seconds(Clock::now() - start);
  EXPECT_EQ(answer.bytes.substr(0, answer.bytes.find("\r\n")), "HTTP/1.1 408 Request Timeout");
  EXPECT_GE(lived, 0.55);
  EXPECT_LT(lived, 1.2) << "the trickle kept the connection open past its deadline";
  close(sock);
  EXPECT_EQ(server.stats().timed_out, 1u);
  EXPECT_EQ(server.stats().answered, 0u);
}

// 64 stalled connections, half on each path: fresh requests are answered at
// once, and none of them waits for a stalled one.
TEST_F(MetricsHttpServerTest, StalledConnectionsDoNotDelayFreshRequests) {
  MetricsHttpServer server(&registry_);
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> stalls;
  for (int i = 0; i < 64; ++i) {
    const int sock = Connect(server.port());
    ASSERT_GE(sock, 0);
    const std::string start = i % 2 == 0 ? "GET /metrics HTTP/1.1\r\nX-Slow: " : "GET /healthz HTTP/1.1\r\nX-Slow: ";
    ASSERT_EQ(send(sock, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    stalls.push_back(sock);
  }
  for (int round = 0; round < 5; ++round) {
    for (const std::string path : {"/healthz", "/metrics"}) {
      const Clock::time_point start = Clock::now();
      httplib::Result res = Get(server.port(), path);
      ASSERT_TRUE(res) << path;
      EXPECT_EQ(res->status, 200) << path;
      EXPECT_LT(Seconds(Clock::now() - start), 1.0) << path << " waited behind stalled connections";
    }
  }
  EXPECT_EQ(server.stats().answered, 10u);
  EXPECT_EQ(server.stats().timed_out, 0u);
  for (int sock : stalls) close(sock);
}

// Beyond max_pending connections still sending their request, the oldest is
// closed (503) to make room: new clients are never locked out by old stalls.
TEST_F(MetricsHttpServerTest, OldestStalledConnectionMakesRoomBeyondMaxPending) {
  MetricsHttpOptions options;
  options.max_pending = 4;
  MetricsHttpServer server(&registry_, options);
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> stalls;
  for (int i = 0; i < 4; ++i) {
    stalls.push_back(Connect(server.port()));
    ASSERT_GE(stalls.back(), 0);
    ASSERT_EQ(send(stalls.back(), "GET", 3, MSG_NOSIGNAL), 3);
  }
  httplib::Result res = Get(server.port(), "/healthz");  // the fifth
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  Answer oldest = ReadUntilClosed(stalls[0], 2.0);
  EXPECT_EQ(oldest.bytes.substr(0, oldest.bytes.find("\r\n")), "HTTP/1.1 503 Service Unavailable");
  EXPECT_TRUE(oldest.closed);
  EXPECT_FALSE(Readable(stalls[1], 0.1)) << "only the oldest makes room";
  EXPECT_EQ(server.stats().evicted, 1u);
  for (int sock : stalls) close(sock);
}

TEST_F(MetricsHttpServerTest, OversizedRequestsAndOtherMethodsAreRefusedWithoutAThread) {
  MetricsHttpOptions options;
  options.max_request_bytes = 1024;
  MetricsHttpServer server(&registry_, options);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(StatusLine(RawRequest(server.port(), "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(2000, 'a'))),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(StatusLine(RawRequest(server.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n")),
            "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(StatusLine(RawRequest(server.port(), "HEAD /healthz HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(server.stats().rejected, 2u);
  EXPECT_EQ(server.stats().answered, 1u);
}

// Scrapers that do not read their (large) answer hold the /metrics threads,
// at most until their deadline; /healthz has its own thread meanwhile, and a
// request beyond the /metrics queue's bound is refused at once (503).
TEST_F(MetricsHttpServerTest, SlowReadersHoldOnlyScrapeThreadsAndTheQueueIsBounded) {
  prometheus::Family<prometheus::Gauge>* big = *registry_.AddGauge("ringmaster_test_big", "Many series.");
  for (int i = 0; i < 60000; ++i) big->Add({{"series", std::to_string(i) + std::string(80, 'x')}}).Set(i);
  MetricsHttpOptions options;
  options.deadline = absl::Milliseconds(2500);
  options.max_queued = 1;
  MetricsHttpServer server(&registry_, options);
  ASSERT_TRUE(server.Start().ok());
  const size_t body_size = registry_.ExposeText().size();
  ASSERT_GT(body_size, 4u << 20);

  std::vector<int> slow;
  const Clock::time_point held = Clock::now();
  for (int i = 0; i < MetricsHttpServer::kHandlerThreads; ++i) {
    slow.push_back(Connect(server.port(), /*receive_buffer=*/4096));
    ASSERT_GE(slow.back(), 0);
    const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(send(slow.back(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    // Its thread has begun the answer (and holds it); then the next one.
    char first[15];
    ASSERT_TRUE(Readable(slow.back(), 2.0));
    ASSERT_EQ(recv(slow.back(), first, sizeof(first), MSG_WAITALL), static_cast<ssize_t>(sizeof(first)));
    ASSERT_EQ(std::string(first, sizeof(first)), "HTTP/1.1 200 OK");
  }

  Clock::time_point start = Clock::now();
  httplib::Result health = Get(server.port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(Seconds(Clock::now() - start), 1.0) << "/healthz waited for the scrape threads";

  const int queued = Connect(server.port());  // waits in the queue (its bound is 1)
  ASSERT_GE(queued, 0);
  ASSERT_EQ(send(queued, "GET /metrics HTTP/1.1\r\n\r\n", 25, MSG_NOSIGNAL), 25);
  start = Clock::now();
  EXPECT_EQ(StatusLine(RawRequest(server.port(), "GET /metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 503 Service Unavailable");
  EXPECT_LT(Seconds(Clock::now() - start), 1.0);
  EXPECT_EQ(server.stats().refused_busy, 1u);

  // Still not reading when their deadline passes (what is under test is a
  // time: no event to wait for): their answers end there, mid-way. What the
  // socket buffers held still arrives.
  std::this_thread::sleep_until(held + std::chrono::milliseconds(2500 + 300));
  for (int sock : slow) {
    Answer rest = ReadUntilClosed(sock, 5.0);
    EXPECT_TRUE(rest.closed);
    EXPECT_LT(rest.bytes.size() + 16, body_size) << "a slow reader got its whole answer";
    close(sock);
  }
  EXPECT_LT(Seconds(Clock::now() - held), 4.0);
  close(queued);
  httplib::Result fresh = Get(server.port(), "/metrics");  // the threads are free again
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->status, 200);
  EXPECT_EQ(fresh->body.size(), body_size);
}

}  // namespace
}  // namespace ringmaster
