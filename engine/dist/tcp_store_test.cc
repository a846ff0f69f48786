// TcpStore specifics: across a forked process, server shutdown, connecting.
// The Store contract itself is in store_test.cc.

#include "engine/dist/tcp_store.h"

#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "engine/dist/child_processes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::HasSubstr;

TcpStoreOptions ClientOf(int port) {
  TcpStoreOptions options;
  options.port = port;
  options.connect_timeout = absl::Seconds(10);
  return options;
}

TEST(TcpStoreTest, RankZeroServesAForkedProcess) {
  TcpStoreOptions options;
  options.start_server = true;
  auto rank0 = TcpStore::Connect(options);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  const int port = (*rank0)->port();
  ASSERT_GT(port, 0);

  ChildProcesses child(1, [port](int) {
    auto store = TcpStore::Connect(ClientOf(port));
    if (!store.ok()) return 2;
    auto from_parent = (*store)->Get("parent/says", absl::Seconds(20));
    if (!from_parent.ok() || *from_parent != "hello child") return 3;
    if (!(*store)->Set("child/says", "hello parent").ok()) return 4;
    auto added = (*store)->Add("arrivals", 1);
    return added.ok() ? 0 : 5;
  });
  ASSERT_TRUE((*rank0)->Set("parent/says", "hello child").ok());
  auto from_child = (*rank0)->Get("child/says", absl::Seconds(20));
  ASSERT_TRUE(from_child.ok()) << from_child.status();
  EXPECT_EQ(*from_child, "hello parent");
  std::vector<ChildExit> exits = child.WaitAll(absl::Seconds(30));
  EXPECT_TRUE(exits[0].Succeeded()) << exits[0].Describe();
  EXPECT_EQ(*(*rank0)->Add("arrivals", 1), 2);
}

TEST(TcpStoreTest, ServerShutdownMakesClientsUnavailable) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = TcpStore::Connect(ClientOf((*server)->port()));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> parked_get;
  std::thread getter([&] { parked_get = (*client)->Get("never", absl::Seconds(60)); });
  while ((*server)->parked() < 1) std::this_thread::yield();
  absl::Time stop = absl::Now();
  (*server)->Stop();
  getter.join();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(5));
  EXPECT_EQ(parked_get.status().code(), absl::StatusCode::kUnavailable) << parked_get.status();
  EXPECT_THAT(parked_get.status().message(),
              HasSubstr("get 'never': connection closed by the server"));
  // Later calls cannot reconnect.
  absl::Status set = (*client)->Set("k", "v");
  EXPECT_EQ(set.code(), absl::StatusCode::kUnavailable) << set;
  EXPECT_THAT(set.message(), HasSubstr("Connection refused"));
}

TEST(TcpStoreTest, AParkedGetDoesNotHoldUpOtherThreadsOfTheSameClient) {
  TcpStoreOptions options;
  options.start_server = true;
  auto store = TcpStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::string> got;
  std::thread getter([&] { got = (*store)->Get("key", absl::Seconds(20)); });
  while ((*store)->server()->parked() < 1) std::this_thread::yield();
  ASSERT_TRUE((*store)->Set("key", "value").ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "value");
}

TEST(TcpStoreTest, ConnectGivesUpAtItsDeadlineWhenNoServerComes) {
  int port;
  {
    auto server = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }  // nothing listens on `port` any more
  TcpStoreOptions options = ClientOf(port);
  options.connect_timeout = absl::Milliseconds(200);
  absl::Time start = absl::Now();
  auto store = TcpStore::Connect(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDeadlineExceeded) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("no server within 200ms"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(TcpStoreTest, ClientConnectsToAServerThatStartsLater) {
  int port;
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  absl::StatusOr<std::unique_ptr<TcpStore>> client;
  std::thread connecter([&] { client = TcpStore::Connect(ClientOf(port)); });
  auto server = TcpStoreServer::Start("127.0.0.1", port);
  ASSERT_TRUE(server.ok()) << server.status();
  connecter.join();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Set("up", "yes").ok());
}

}  // namespace
}  // namespace ringmaster::engine::dist
