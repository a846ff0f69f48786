#include "coordinator/core/node_store_writer.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::MakeNode;

// Concurrent Puts: each returns its own node's id, every row is in the
// database once Put returns (read back through a second connection), and
// overlapping calls shared transactions.
TEST(NodeStoreWriterTest, ConcurrentPutsShareTransactionsAndAreAllDurable) {
  const std::string path = testing::NewTempDir("writer") + "/rm.db";
  std::unique_ptr<Store> store = *Store::Open({path});
  NodeStoreWriter writer(store.get());
  constexpr int kThreads = 32, kPerThread = 20;
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<std::string> id = writer.Put(MakeNode(absl::StrCat("h", t, "-", i), 1));
        ASSERT_TRUE(id.ok()) << id.status();
        ids[t].push_back(*id);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::set<std::string> distinct;
  for (const auto& v : ids) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kPerThread));
  std::unique_ptr<Store> reader = *Store::Open({path});
  absl::StatusOr<std::vector<v1::NodeInfo>> stored = reader->LoadNodes();
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::set<std::string> hosts;
  for (const v1::NodeInfo& n : *stored) {
    EXPECT_EQ(distinct.count(n.node_id()), 1u) << n.node_id();
    hosts.insert(n.hostname());
  }
  EXPECT_EQ(hosts.size(), static_cast<size_t>(kThreads * kPerThread));
  // 640 fsynced writes from 32 threads at once: some overlap, so fewer
  // transactions than writes (one each was the cost this class removes).
  EXPECT_LT(writer.transactions(), kThreads * kPerThread);
  EXPECT_GT(writer.transactions(), 0);
}

// An update of a known node in a batch keeps its id; a new one gets one.
TEST(NodeStoreWriterTest, PutKeepsAKnownIdAndAssignsNewOnes) {
  std::unique_ptr<Store> store = *Store::Open({testing::NewTempDir("writer") + "/rm.db"});
  NodeStoreWriter writer(store.get());
  absl::StatusOr<std::string> first = writer.Put(MakeNode("a", 1));
  ASSERT_TRUE(first.ok()) << first.status();
  v1::NodeInfo again = MakeNode("a2", 2);
  again.set_node_id(*first);
  absl::StatusOr<std::string> same = writer.Put(again);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, *first);
  absl::StatusOr<std::string> other = writer.Put(MakeNode("b", 1));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, *first);
  absl::StatusOr<std::vector<v1::NodeInfo>> stored = store->LoadNodes();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].hostname(), "a2");
}

}  // namespace
}  // namespace ringmaster::coordinator
