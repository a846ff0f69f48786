// The Store contract, run against FileStore and TcpStore: several clients of
// one store (threads here; processes in tcp_store_test and the Gloo tests).

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "engine/dist/file_store.h"
#include "engine/dist/store.h"
#include "engine/dist/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::HasSubstr;
using namespace std::string_literals;

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/", name, "_", ::testing::UnitTest::GetInstance()
                                                               ->current_test_info()
                                                               ->name());
}

// Makes clients of one shared store.
class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<Store> NewClient() = 0;
};

class FileStoreFactory : public StoreFactory {
 public:
  FileStoreFactory() : dir_(TestDir("file_store")) {}
  std::unique_ptr<Store> NewClient() override {
    auto store = FileStore::Create(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

 private:
  std::string dir_;
};

class TcpStoreFactory : public StoreFactory {
 public:
  TcpStoreFactory() {
    auto server = TcpStoreServer::Start("127.0.0.1", 0);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  std::unique_ptr<Store> NewClient() override {
    TcpStoreOptions options;
    options.port = server_->port();
    auto store = TcpStore::Connect(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "file") {
      factory_ = std::make_unique<FileStoreFactory>();
    } else {
      factory_ = std::make_unique<TcpStoreFactory>();
    }
  }
  std::unique_ptr<StoreFactory> factory_;
};

TEST_P(StoreTest, SetThenGetFromAnotherClientWithArbitraryBytes) {
  auto a = factory_->NewClient(), b = factory_->NewClient();
  const std::string key = "job/7/\0\xff/addr"s, value = "\0\x01\x02 bytes \xfe"s;
  ASSERT_EQ(key.size(), 13u);
  ASSERT_TRUE(a->Set(key, value).ok());
  auto got = b->Get(key, absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE(b->Set(key, "second").ok());  // overwrites
  EXPECT_EQ(*a->Get(key, absl::Seconds(5)), "second");
  const std::string long_key(300, 'k');
  ASSERT_TRUE(a->Set(long_key, std::string(1 << 20, 'v')).ok());
  EXPECT_EQ(b->Get(long_key, absl::Seconds(5))->size(), 1u << 20);
}

TEST_P(StoreTest, GetAndWaitBlockUntilAnotherThreadSets) {
  auto waiter = factory_->NewClient(), setter = factory_->NewClient();
  absl::StatusOr<std::string> got;
  absl::Status waited;
  std::thread get_thread([&] { got = waiter->Get("late", absl::Seconds(20)); });
  std::thread wait_thread([&] { waited = setter->Wait({"late", "later"}, absl::Seconds(20)); });
  auto third = factory_->NewClient();
  ASSERT_TRUE(third->Set("late", "here").ok());
  ASSERT_TRUE(third->Set("later", "too").ok());
  get_thread.join();
  wait_thread.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST_P(StoreTest, GetDeadlineNamesTheKey) {
  auto store = factory_->NewClient();
  absl::Time start = absl::Now();
  auto got = store->Get("rendezvous/rank3", absl::Milliseconds(100));
  absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(),
              HasSubstr("key 'rendezvous/rank3' was not set within 100ms"));
  EXPECT_GE(elapsed, absl::Milliseconds(100));
  EXPECT_LT(elapsed, absl::Seconds(5));
}

TEST_P(StoreTest, WaitDeadlineNamesOnlyTheMissingKeys) {
  auto store = factory_->NewClient();
  ASSERT_TRUE(store->Set("a", "1").ok());
  absl::Status status = store->Wait({"a", "b", "c"}, absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("keys 'b', 'c' were not set within 50ms"));
  EXPECT_TRUE(store->Wait({"a"}, absl::ZeroDuration()).ok());
}

TEST_P(StoreTest, AddIsAtomicUnderContention) {
  constexpr int kThreads = 8, kAdds = 150;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto store = factory_->NewClient();
      for (int i = 0; i < kAdds; ++i) {
        auto value = store->Add("counter", 1);
        ASSERT_TRUE(value.ok()) << value.status();
        seen[t].push_back(*value);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every Add saw a distinct value: 1 .. kThreads * kAdds, each once.
  std::set<int64_t> all;
  for (const auto& values : seen) all.insert(values.begin(), values.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kAdds));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
  auto store = factory_->NewClient();
  EXPECT_EQ(*store->Get("counter", absl::Seconds(1)), absl::StrCat(kThreads * kAdds));
  EXPECT_EQ(*store->Add("counter", -kThreads * kAdds), 0);
}

TEST_P(StoreTest, AddToANonIntegerIsInvalidArgument) {
  auto store = factory_->NewClient();
  ASSERT_TRUE(store->Set("name", "not a number").ok());
  auto added = store->Add("name", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kInvalidArgument) << added.status();
  EXPECT_THAT(added.status().message(), HasSubstr("add to key 'name'"));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("file", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(FileStoreTest, GetDeadlineFollowsTheInjectedClock) {
  FakeClock clock;
  auto store = FileStore::Create(TestDir("file_store"), &clock);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time start = clock.Now();
  absl::StatusOr<std::string> got;
  std::thread getter([&] { got = (*store)->Get("never", absl::Minutes(10)); });
  // The getter polls with backoff, sleeping on the fake clock: move the time
  // on while it sleeps until its deadline has passed.
  while (clock.Now() < start + absl::Minutes(10)) {
    while (clock.Sleepers() == 0) std::this_thread::yield();
    clock.Advance(absl::Minutes(1));
  }
  getter.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("key 'never' was not set within 10m"));
}

TEST(FileStoreTest, CreateFailsForAnUnusableDirectory) {
  auto store = FileStore::Create("/proc/self/no/such/dir");
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("file store: create directory /proc/self/no"));
}

}  // namespace
}  // namespace ringmaster::engine::dist
