// The unique-id exchange: needs no device (ncclGetUniqueId only opens
// NCCL's bootstrap socket).
#include "engine/dist/nccl_unique_id.h"

#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "engine/dist/nccl_fake_store.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

TEST(NcclUniqueIdTest, OverAStoreTheKeyIsScopedByThePrefixAndTheCommunicator) {
  testing::FakeStore store;
  EXPECT_EQ(StoreUniqueIdExchange(&store).Key("world"), "world/nccl_unique_id");
  EXPECT_EQ(StoreUniqueIdExchange(&store, "job/nccl").Key("world"), "job/nccl/world/nccl_unique_id");
}

TEST(NcclUniqueIdTest, RankZeroPublishesAndTheOthersReadTheSameBytes) {
  testing::FakeStore store;
  StoreUniqueIdExchange ids(&store);
  absl::StatusOr<ncclUniqueId> got[3];
  // The readers start first and wait for rank 0.
  std::thread reader1([&] { got[1] = ExchangeNcclUniqueId(ids, "world", 1, absl::Seconds(30)); });
  std::thread reader2([&] { got[2] = ExchangeNcclUniqueId(ids, "world", 2, absl::Seconds(30)); });
  got[0] = ExchangeNcclUniqueId(ids, "world", 0, absl::Seconds(30));
  reader1.join();
  reader2.join();
  for (const auto& id : got) ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(std::memcmp(got[0]->internal, got[1]->internal, NCCL_UNIQUE_ID_BYTES), 0);
  EXPECT_EQ(std::memcmp(got[0]->internal, got[2]->internal, NCCL_UNIQUE_ID_BYTES), 0);
  EXPECT_EQ(store.set_keys(), std::vector<std::string>{"world/nccl_unique_id"});
}

TEST(NcclUniqueIdTest, WithoutRankZeroTheOthersTimeOut) {
  testing::FakeStore store;
  StoreUniqueIdExchange ids(&store);
  const absl::Time start = absl::Now();
  absl::StatusOr<ncclUniqueId> id = ExchangeNcclUniqueId(ids, "world", 3, absl::Milliseconds(100));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(id.status().message(),
            "waiting 100ms for rank 0 to publish the NCCL unique id of communicator \"world\": "
            "key world/nccl_unique_id not set within 100ms");
  EXPECT_LT(waited, absl::Seconds(10)) << "the wait is bounded by the timeout";
  EXPECT_TRUE(store.set_keys().empty()) << "a non-zero rank never publishes";
}

TEST(NcclUniqueIdTest, AValueOfTheWrongSizeIsDataLoss) {
  testing::FakeStore store;
  StoreUniqueIdExchange ids(&store);
  ASSERT_TRUE(ids.Publish("world", "short").ok());
  absl::StatusOr<ncclUniqueId> id = ExchangeNcclUniqueId(ids, "world", 1, absl::Seconds(1));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(id.status().message(), "the NCCL unique id of communicator \"world\" has 5 bytes, not 128");
}

}  // namespace
}  // namespace ringmaster::engine::dist
