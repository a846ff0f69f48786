// The unique-id exchange through the Store: needs no device (ncclGetUniqueId
// only opens NCCL's bootstrap socket).
#include "engine/dist/nccl_unique_id.h"

#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "engine/dist/nccl_fake_store.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

TEST(NcclUniqueIdTest, KeyIsScopedByThePrefix) {
  EXPECT_EQ(NcclUniqueIdKey("job/7/gen/2/world"), "job/7/gen/2/world/nccl_unique_id");
  EXPECT_EQ(NcclUniqueIdKey(""), "nccl_unique_id");
}

TEST(NcclUniqueIdTest, RankZeroPublishesAndTheOthersReadTheSameBytes) {
  testing::FakeStore store;
  const std::string key = NcclUniqueIdKey("job/1/gen/0");
  absl::StatusOr<ncclUniqueId> got[3];
  // The readers start first and wait for rank 0.
  std::thread reader1([&] { got[1] = ExchangeNcclUniqueId(store, key, 1, absl::Seconds(30)); });
  std::thread reader2([&] { got[2] = ExchangeNcclUniqueId(store, key, 2, absl::Seconds(30)); });
  got[0] = ExchangeNcclUniqueId(store, key, 0, absl::Seconds(30));
  reader1.join();
  reader2.join();
  for (const auto& id : got) ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(std::memcmp(got[0]->internal, got[1]->internal, NCCL_UNIQUE_ID_BYTES), 0);
  EXPECT_EQ(std::memcmp(got[0]->internal, got[2]->internal, NCCL_UNIQUE_ID_BYTES), 0);
  EXPECT_EQ(store.set_keys(), std::vector<std::string>{key});
}

TEST(NcclUniqueIdTest, WithoutRankZeroTheOthersTimeOut) {
  testing::FakeStore store;
  const absl::Time start = absl::Now();
  absl::StatusOr<ncclUniqueId> id =
      ExchangeNcclUniqueId(store, "job/1/gen/0/nccl_unique_id", 3, absl::Milliseconds(100));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(id.status().message(),
            "waiting 100ms for rank 0 to publish the NCCL unique id at job/1/gen/0/nccl_unique_id: "
            "key job/1/gen/0/nccl_unique_id not set within 100ms");
  EXPECT_LT(waited, absl::Seconds(10)) << "the wait is bounded by the timeout";
  EXPECT_TRUE(store.set_keys().empty()) << "a non-zero rank never publishes";
}

TEST(NcclUniqueIdTest, AValueOfTheWrongSizeIsDataLoss) {
  testing::FakeStore store;
  ASSERT_TRUE(store.Set("k", "short").ok());
  absl::StatusOr<ncclUniqueId> id = ExchangeNcclUniqueId(store, "k", 1, absl::Seconds(1));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(id.status().message(), "the NCCL unique id at k has 5 bytes, not 128");
}

}  // namespace
}  // namespace ringmaster::engine::dist
