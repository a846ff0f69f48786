// LogPusher against a coordinator that refuses log lines with
// RESOURCE_EXHAUSTED, as one under its disk reserve does: the pusher comes
// back only every refused_retry (it does not spin), the shipper's buffer
// stays bounded and counts what it drops (the ranks never wait), and lines
// flow again once the coordinator takes them.
#include "worker/log_pusher.h"

#include <atomic>
#include <fstream>
#include <thread>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_node_service.h"
#include "worker/log_shipper.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::FakeCoordinator;

TEST(LogPusherTest, ACoordinatorRefusingLogsIsRetriedSlowlyWhileTheBufferStaysBounded) {
  FakeCoordinator coordinator;
  coordinator.service().RefuseLogs(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the coordinator's disk is low"));
  testing::TempDir dir;
  const std::string path = dir.path() + "/rank-0.log";
  LogShipperOptions options;
  options.max_buffered_bytes = 4096;
  options.max_chunk_lines = 4;
  LogShipper shipper(Clock::Real(), options);
  ASSERT_TRUE(shipper.Watch({"j-1", 1, 0, path, 0}));
  // A rank that logs all the time (the shipper reads its file after the fact).
  std::atomic<bool> stop{false};
  std::thread rank([&] {
    std::ofstream out(path);
    for (int i = 0; !stop.load(); ++i) {
      out << "step " << i << " loss 2.345\n" << std::flush;
      if (i % 20 == 0) {
        shipper.Poll();
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
  });
  ASSERT_TRUE(testing::WaitUntil([&] { return shipper.dropped_lines() > 0; }));
  EXPECT_LE(shipper.buffered_bytes(), 4096u);

  RetryPolicy backoff;
  backoff.initial = absl::Milliseconds(5);
  backoff.max = absl::Milliseconds(10);
  backoff.jitter = 0;
  const absl::Duration refused_retry = absl::Milliseconds(300);
  LogPusher pusher(grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()), &shipper,
                   [] { return std::string("n-1"); }, backoff, refused_retry);
  const absl::Time start = absl::Now();
  pusher.Start();
  ASSERT_TRUE(testing::WaitUntil([&] { return pusher.refusals() >= 3; }));
  // Between the 1st and 3rd refusals the pusher waited refused_retry twice;
  // with the backoff alone (10 ms) it would have been back 30 times as often.
  EXPECT_GE(absl::Now() - start, 2 * refused_retry);
  EXPECT_TRUE(coordinator.service().log_lines().empty());
  EXPECT_LE(shipper.buffered_bytes(), 4096u);
  EXPECT_GT(shipper.dropped_lines(), 0u);

  coordinator.service().RefuseLogs(std::nullopt);
  const int64_t refused = pusher.refusals();
  ASSERT_TRUE(testing::WaitUntil([&] { return !coordinator.service().log_lines().empty(); }));
  stop = true;
  rank.join();
  EXPECT_LE(pusher.refusals(), refused + 1);
  shipper.Close();
  pusher.Stop(absl::Seconds(1));
}

}  // namespace
}  // namespace ringmaster::worker
