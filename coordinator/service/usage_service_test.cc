// GetUsage through the real gRPC server with users' tokens: who sees whose
// usage, the groupings, the window, a bad `by`; and the queue usage
// counters on /metrics.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringmaster::coordinator::testing {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kRoot[] = "root-token-0123456789a";

class UsageServiceTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    UseTokenFile({std::string(kAlice) + " alice", std::string(kBob) + " bob", std::string(kRoot) + " root admin"});
    CoordinatorFixture::SetUp();
  }

  std::string SubmitAs(const char* token) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = MakeSpec(1, 2, v1::ResourceSpec::CPU);  // 2 CPU slots
    v1::SubmitJobResponse response;
    grpc::Status status = jobs_->Submit(As(token).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.job().id();
  }

  grpc::Status UsageAs(const char* token, v1::GetUsageRequest::GroupBy by, v1::GetUsageResponse* response,
                       absl::Time since = absl::InfinitePast()) {
    v1::GetUsageRequest request;
    request.set_by(by);
    if (since != absl::InfinitePast()) *request.mutable_since() = ToProtoTime(since);
    return jobs_->GetUsage(As(token).get(), request, response);
  }

  // "key=cpu-slot-seconds/placements" per row.
  std::vector<std::string> Rows(const char* token, v1::GetUsageRequest::GroupBy by,
                                absl::Time since = absl::InfinitePast()) {
    v1::GetUsageResponse response;
    grpc::Status status = UsageAs(token, by, &response, since);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(FromProtoTime(response.as_of()), clock_.Now());
    std::vector<std::string> rows;
    for (const v1::UsageRow& r : response.rows()) {
      EXPECT_EQ(r.gpu_seconds(), 0) << "CPU jobs hold no GPU";
      rows.push_back(absl::StrCat(r.key(), "=", r.cpu_slot_seconds(), "/", r.placements()));
    }
    return rows;
  }
};

using Want = std::vector<std::string>;

TEST_F(UsageServiceTest, UsersSeeTheirOwnJobsUsageAndAdminsEveryones) {
  auto worker = NewWorker("node-a", 4);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open());
  ASSERT_TRUE(worker->Sync().has_value());
  const absl::Time placed = clock_.Now();
  const std::string alices = SubmitAs(kAlice);
  const std::string bobs = SubmitAs(kBob);
  server_->Tick();  // both placed
  clock_.Advance(absl::Hours(1));

  EXPECT_EQ(Rows(kAlice, v1::GetUsageRequest::GROUP_BY_USER), (Want{"alice=7200/1"}));
  EXPECT_EQ(Rows(kAlice, v1::GetUsageRequest::GROUP_BY_UNSPECIFIED), (Want{"alice=7200/1"}));
  EXPECT_EQ(Rows(kAlice, v1::GetUsageRequest::GROUP_BY_JOB), (Want{alices + "=7200/1"}));
  EXPECT_EQ(Rows(kBob, v1::GetUsageRequest::GROUP_BY_QUEUE), (Want{"default=7200/1"}));
  EXPECT_EQ(Rows(kRoot, v1::GetUsageRequest::GROUP_BY_USER), (Want{"alice=7200/1", "bob=7200/1"}));
  EXPECT_EQ(Rows(kRoot, v1::GetUsageRequest::GROUP_BY_QUEUE), (Want{"default=14400/2"}));
  EXPECT_EQ(Rows(kRoot, v1::GetUsageRequest::GROUP_BY_JOB), (Want{alices + "=7200/1", bobs + "=7200/1"}));

  // A window: only its part; one that begins later than now: nothing.
  EXPECT_EQ(Rows(kAlice, v1::GetUsageRequest::GROUP_BY_USER, placed + absl::Minutes(30)), (Want{"alice=3600/1"}));
  EXPECT_EQ(Rows(kRoot, v1::GetUsageRequest::GROUP_BY_USER, clock_.Now() + absl::Hours(1)), Want{});

  v1::GetUsageResponse response;
  grpc::Status bad = UsageAs(kRoot, static_cast<v1::GetUsageRequest::GroupBy>(7), &response);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "by: unknown grouping 7; use user, queue or job");
}

// The counters follow the store's totals at the ticks and never go back;
// a restarted coordinator starts them at the stored totals.
TEST_F(UsageServiceTest, QueueCountersFollowTheStoredTotals) {
  auto worker = NewWorker("node-a", 4);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open());
  ASSERT_TRUE(worker->Sync().has_value());
  SubmitAs(kAlice);
  server_->Tick();
  clock_.Advance(absl::Seconds(100));
  server_->Tick();  // the node's lease ran out: the generation ends now, its placement with it
  auto scrape = [this] {
    httplib::Client client("127.0.0.1", server_->metrics_port());
    client.set_read_timeout(10, 0);
    httplib::Result res = client.Get("/metrics");
    return res ? res->body : std::string("scrape failed");
  };
  const std::string counted = "ringmaster_queue_cpu_slot_seconds_total{queue=\"default\"} 200\n";
  EXPECT_NE(scrape().find(counted), std::string::npos) << scrape();
  EXPECT_NE(scrape().find("ringmaster_queue_gpu_seconds_total{queue=\"default\"} 0\n"), std::string::npos);
  clock_.Advance(absl::Seconds(100));
  server_->Tick();
  EXPECT_NE(scrape().find(counted), std::string::npos) << "nothing is held any more";

  StopServer();
  StartServer();
  server_->Tick();
  EXPECT_NE(scrape().find(counted), std::string::npos) << scrape();
  EXPECT_EQ(Rows(kRoot, v1::GetUsageRequest::GROUP_BY_USER), (Want{"alice=200/1"}));
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
