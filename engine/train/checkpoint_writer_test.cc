// The background writer: one write at a time, in order; the next waits for
// the one in flight; a failed write's error reaches the training thread once.
#include "engine/train/checkpoint_writer.h"

#include <atomic>
#include <future>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

TEST(CheckpointWriterTest, WritesInTheBackgroundAndWaitReturnsOnceDone) {
  CheckpointWriter writer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> written{false};
  ASSERT_TRUE(writer.Start([&] {
                      released.wait();
                      written = true;
                      return absl::OkStatus();
                    })
                  .ok());
  EXPECT_TRUE(writer.in_flight());  // Start returned while the write is blocked
  EXPECT_TRUE(writer.Poll().ok());
  EXPECT_FALSE(written);
  release.set_value();
  EXPECT_TRUE(writer.Wait().ok());
  EXPECT_TRUE(written);
  EXPECT_FALSE(writer.in_flight());
}

TEST(CheckpointWriterTest, TheNextWriteWaitsForTheOneInFlight) {
  CheckpointWriter writer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<int> order;  // written by the writer thread only
  ASSERT_TRUE(writer.Start([&] {
                      released.wait();
                      order.push_back(1);
                      return absl::OkStatus();
                    })
                  .ok());
  std::future<absl::Status> second = std::async(std::launch::async, [&] {
    return writer.Start([&] {
      order.push_back(2);
      return absl::OkStatus();
    });
  });
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);  // blocked behind the first
  release.set_value();
  EXPECT_TRUE(second.get().ok());
  EXPECT_TRUE(writer.Wait().ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(CheckpointWriterTest, AFailedWriteIsReportedOnceAndStopsTheNext) {
  CheckpointWriter writer;
  ASSERT_TRUE(writer.Start([] { return absl::ResourceExhaustedError("write /ckpt: No space left on device"); }).ok());
  bool second_ran = false;
  absl::Status refused = writer.Start([&] {
    second_ran = true;
    return absl::OkStatus();
  });
  EXPECT_EQ(refused, absl::ResourceExhaustedError("write /ckpt: No space left on device"));
  EXPECT_TRUE(writer.Wait().ok());  // collected already
  EXPECT_FALSE(second_ran);
}

TEST(CheckpointWriterTest, PollReturnsTheErrorOfAFinishedWrite) {
  CheckpointWriter writer;
  ASSERT_TRUE(writer.Start([] { return absl::InternalError("commit refused"); }).ok());
  while (writer.in_flight()) std::this_thread::yield();
  EXPECT_EQ(writer.Poll(), absl::InternalError("commit refused"));
  EXPECT_TRUE(writer.Poll().ok());
}

}  // namespace
}  // namespace ringmaster::engine
