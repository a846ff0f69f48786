#include "common/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

TEST_F(MetricsHttpServerTest, StopDoesNotWaitForeverOnASilentClient) {
  MetricsHttpServer server(&registry_);
  ASSERT_TRUE(server.Start().ok());
  // A client that connects and never sends a request.
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  server.Stop();  // Returns once the idle timeout drops the connection.
  EXPECT_EQ(server.port(), 0);
  close(sock);
}

}  // namespace
}  // namespace ringmaster
