#include "coordinator/core/rendezvous.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

// Records what the Rendezvous reports.
class FakeListener : public RendezvousListener {
 public:
  void OnRendezvousComplete(const std::string& job_id, int64_t generation) override {
    std::lock_guard<std::mutex> lock(mu_);
    completed.push_back(job_id + "/" + std::to_string(generation));
  }
  void OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    failed.push_back(job_id + "/" + std::to_string(generation) + ": " + reason);
  }
  std::vector<std::string> Completed() {
    std::lock_guard<std::mutex> lock(mu_);
    return completed;
  }
  std::vector<std::string> Failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> completed;
  std::vector<std::string> failed;
};

class RendezvousTest : public ::testing::Test {
 protected:
  RendezvousTest() : rdv_(&clock_) { rdv_.SetListener(&listener_); }

  // Blocks (without sleeping for time) until `n` calls are parked.
  void AwaitWaiters(int n) {
    while (rdv_.Waiters() != n) std::this_thread::yield();
  }

  RendezvousScope Scope(int rank, int64_t gen = 1, const std::string& job = "j-1") { return {job, gen, rank}; }

  FakeClock clock_;
  FakeListener listener_;
  Rendezvous rdv_;
  const std::string id_a_ = std::string(128, 'a');
  const std::string id_b_ = std::string(128, 'b');
};

TEST_F(RendezvousTest, RankZeroPublishesOthersGetTheId) {
  rdv_.BeginGeneration("j-1", 1, 4, clock_.Now() + absl::Minutes(5));
  std::vector<std::future<absl::StatusOr<std::string>>> gets;
  for (int rank = 1; rank < 4; ++rank) {
    gets.push_back(std::async(std::launch::async, [this, rank] {
      return rdv_.GetNcclUniqueId(Scope(rank), "world", absl::ZeroDuration());
    }));
  }
  AwaitWaiters(3);
  EXPECT_TRUE(listener_.Completed().empty());
  ASSERT_TRUE(rdv_.PublishNcclUniqueId(Scope(0), "world", id_a_).ok());
  for (auto& f : gets) {
    absl::StatusOr<std::string> id = f.get();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, id_a_);
  }
  // All four ranks checked in: reported once.
  EXPECT_EQ(listener_.Completed(), std::vector<std::string>{"j-1/1"});
  EXPECT_TRUE(rdv_.Complete("j-1", 1));
  // A retry with the same bytes is fine; different bytes are not.
  EXPECT_TRUE(rdv_.PublishNcclUniqueId(Scope(0), "world", id_a_).ok());
  EXPECT_EQ(rdv_.PublishNcclUniqueId(Scope(0), "world", id_b_).code(), absl::StatusCode::kAlreadyExists);
  // Another communicator is independent; an id published before anyone
  // asks is returned at once.
  ASSERT_TRUE(rdv_.PublishNcclUniqueId(Scope(2), "dp.0", id_b_).ok());
  EXPECT_EQ(*rdv_.GetNcclUniqueId(Scope(0), "dp.0", absl::Seconds(1)), id_b_);
  EXPECT_EQ(listener_.Completed().size(), 1u);
  EXPECT_TRUE(listener_.Failed().empty());
}

// A waiter's own timeout, driven by the fake clock: it waits the full 10
// fake seconds, then gets DEADLINE_EXCEEDED, and the generation fails.
TEST_F(RendezvousTest, WaitTimesOutWithFakeClockAndFailsTheGeneration) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Minutes(5));
  auto wait = std::async(std::launch::async, [this] { return rdv_.KvWait(Scope(1), {"addr/0"}, absl::Seconds(10)); });
  AwaitWaiters(1);
  clock_.Advance(absl::Seconds(9));
  rdv_.CheckDeadlines();
  AwaitWaiters(1);  // woke, saw 9 s, parked again
  EXPECT_EQ(wait.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  clock_.Advance(absl::Seconds(1));
  rdv_.CheckDeadlines();
  absl::StatusOr<std::vector<std::string>> r = wait.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.status().message(), "rank 1 timed out after 10s waiting for key \"addr/0\"");
  EXPECT_EQ(listener_.Failed(),
            std::vector<std::string>{"j-1/1: rank 1 timed out after 10s waiting for key \"addr/0\""});
  // The generation is failed for everyone now.
  absl::Status late = rdv_.KvSet(Scope(0), "addr/0", "x");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.message(), "generation 1 of job j-1 failed: rank 1 timed out after 10s waiting for key \"addr/0\"");
  rdv_.CheckDeadlines();
  EXPECT_EQ(listener_.Failed().size(), 1u);  // reported once
}

TEST_F(RendezvousTest, TimeoutNamesTheMissingKeys) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Minutes(5));
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "a", "1").ok());
  auto wait = std::async(std::launch::async,
                         [this] { return rdv_.KvWait(Scope(1), {"a", "b", "c"}, absl::Seconds(5)); });
  AwaitWaiters(1);
  clock_.Advance(absl::Seconds(5));
  rdv_.CheckDeadlines();
  absl::StatusOr<std::vector<std::string>> r = wait.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.status().message(),
            "rank 1 timed out after 5s waiting for keys \"a\", \"b\", \"c\"; missing \"b\", \"c\"");
}

TEST_F(RendezvousTest, ZeroTimeoutWaitsUntilTheGenerationDeadline) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Seconds(30));
  auto wait = std::async(std::launch::async,
                         [this] { return rdv_.GetNcclUniqueId(Scope(1), "world", absl::ZeroDuration()); });
  AwaitWaiters(1);
  clock_.Advance(absl::Seconds(30));
  rdv_.CheckDeadlines();
  absl::StatusOr<std::string> r = wait.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.status().message(), "rank 1 timed out after 30s waiting for the NCCL id of communicator \"world\"");
}

TEST_F(RendezvousTest, RankThatNeverJoinsFailsTheGenerationAtTheDeadline) {
  rdv_.BeginGeneration("j-1", 1, 4, clock_.Now() + absl::Seconds(30));
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "a", "1").ok());
  ASSERT_TRUE(rdv_.CheckIn(Scope(1)).ok());
  clock_.Advance(absl::Seconds(29));
  rdv_.CheckDeadlines();
  EXPECT_TRUE(listener_.Failed().empty());
  clock_.Advance(absl::Seconds(1));
  rdv_.CheckDeadlines();
  rdv_.CheckDeadlines();
  EXPECT_EQ(listener_.Failed(),
            std::vector<std::string>{"j-1/1: rendezvous deadline passed; rank(s) 2, 3 never joined"});
}

TEST_F(RendezvousTest, CompleteGenerationOutlivesItsDeadline) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Seconds(30));
  ASSERT_TRUE(rdv_.CheckIn(Scope(0)).ok());
  ASSERT_TRUE(rdv_.CheckIn(Scope(1)).ok());
  EXPECT_EQ(listener_.Completed(), std::vector<std::string>{"j-1/1"});
  clock_.Advance(absl::Hours(1));
  rdv_.CheckDeadlines();
  EXPECT_TRUE(listener_.Failed().empty());
  EXPECT_TRUE(rdv_.KvSet(Scope(0), "k", "v").ok());
}

TEST_F(RendezvousTest, FencingRejectsOtherGenerations) {
  rdv_.BeginGeneration("j-3", 3, 2, clock_.Now() + absl::Minutes(1));
  struct Case {
    RendezvousScope scope;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"j-3", 2, 0}, absl::StatusCode::kFailedPrecondition, "generation 2 of job j-3 is over; current is 3"},
      {{"j-3", 4, 0}, absl::StatusCode::kFailedPrecondition, "generation 4 of job j-3 is not known; current is 3"},
      {{"j-9", 1, 0}, absl::StatusCode::kNotFound, "job j-9 has no rendezvous"},
      {{"j-3", 3, 2}, absl::StatusCode::kInvalidArgument, "rank: must be in [0, 2), got 2"},
      {{"j-3", 3, -1}, absl::StatusCode::kInvalidArgument, "rank: must be in [0, 2), got -1"},
  };
  for (const Case& c : cases) {
    for (absl::Status s : {rdv_.KvSet(c.scope, "k", "v"), rdv_.KvGet(c.scope, "k").status(),
                           rdv_.KvAdd(c.scope, "k", 1).status(), rdv_.KvWait(c.scope, {"k"}, absl::Seconds(1)).status(),
                           rdv_.PublishNcclUniqueId(c.scope, "world", id_a_),
                           rdv_.GetNcclUniqueId(c.scope, "world", absl::Seconds(1)).status(), rdv_.CheckIn(c.scope)}) {
      EXPECT_EQ(s.code(), c.code) << c.message;
      EXPECT_EQ(s.message(), c.message);
    }
  }
  rdv_.EndGeneration("j-3", 3);
  absl::Status over = rdv_.KvSet({"j-3", 3, 0}, "k", "v");
  EXPECT_EQ(over.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(over.message(), "generation 3 of job j-3 is over");
  // An older generation begun late (out of order) changes nothing.
  rdv_.BeginGeneration("j-3", 2, 2, clock_.Now() + absl::Minutes(1));
  EXPECT_EQ(rdv_.KvSet({"j-3", 2, 0}, "k", "v").message(), "generation 2 of job j-3 is over; current is 3");
}

TEST_F(RendezvousTest, NewGenerationClearsTheOldOneAndReleasesItsWaiters) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Minutes(1));
  ASSERT_TRUE(rdv_.KvSet(Scope(0, 1), "k", "old").ok());
  ASSERT_TRUE(rdv_.PublishNcclUniqueId(Scope(0, 1), "world", id_a_).ok());
  auto stale = std::async(std::launch::async, [this] { return rdv_.KvWait(Scope(1, 1), {"never"}, absl::ZeroDuration()); });
  AwaitWaiters(1);
  rdv_.BeginGeneration("j-1", 2, 2, clock_.Now() + absl::Minutes(1));
  absl::StatusOr<std::vector<std::string>> r = stale.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "generation 1 of job j-1 is over; current is 2");
  EXPECT_EQ(*rdv_.KvGet(Scope(0, 2), "k"), std::nullopt);
  // The new generation's world id is new too.
  ASSERT_TRUE(rdv_.PublishNcclUniqueId(Scope(0, 2), "world", id_b_).ok());
  EXPECT_EQ(*rdv_.GetNcclUniqueId(Scope(1, 2), "world", absl::Seconds(1)), id_b_);
  EXPECT_TRUE(listener_.Failed().empty());
}

TEST_F(RendezvousTest, KeyValueStoreForGloo) {
  rdv_.BeginGeneration("j-1", 1, 3, clock_.Now() + absl::Minutes(1));
  EXPECT_EQ(*rdv_.KvGet(Scope(0), "missing"), std::nullopt);
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "k", "v1").ok());
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "k", "v2").ok());  // overwrites
  EXPECT_EQ(*rdv_.KvGet(Scope(1), "k"), std::optional<std::string>("v2"));
  EXPECT_EQ(*rdv_.KvAdd(Scope(0), "counter", 1), 1);
  EXPECT_EQ(*rdv_.KvAdd(Scope(1), "counter", 1), 2);
  EXPECT_EQ(*rdv_.KvAdd(Scope(2), "counter", -5), -3);
  EXPECT_EQ(rdv_.KvAdd(Scope(0), "k", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  // A sum past int64 is refused and the value kept (was undefined behaviour).
  EXPECT_EQ(*rdv_.KvAdd(Scope(0), "big", INT64_MAX), INT64_MAX);
  EXPECT_EQ(rdv_.KvAdd(Scope(1), "big", 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*rdv_.KvAdd(Scope(2), "big", INT64_MIN), -1);
  EXPECT_EQ(rdv_.KvAdd(Scope(0), "big", INT64_MIN).status().code(), absl::StatusCode::kOutOfRange);

  // KvWait returns once every key is set, values in request order.
  auto wait = std::async(std::launch::async,
                         [this] { return rdv_.KvWait(Scope(2), {"b", "a", "k"}, absl::Seconds(30)); });
  AwaitWaiters(1);
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "a", "A").ok());
  AwaitWaiters(1);
  ASSERT_TRUE(rdv_.KvSet(Scope(1), "b", "B").ok());
  absl::StatusOr<std::vector<std::string>> values = wait.get();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"B", "A", "v2"}));
}

TEST_F(RendezvousTest, MalformedRequestsAreInvalidArgument) {
  rdv_.BeginGeneration("j-1", 1, 1, clock_.Now() + absl::Minutes(1));
  struct Case {
    absl::Status status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {rdv_.KvSet(Scope(0), "", "v"), "key: must be 1 to 512 bytes, got 0"},
      {rdv_.KvSet(Scope(0), std::string(513, 'k'), "v"), "key: must be 1 to 512 bytes, got 513"},
      {rdv_.KvSet(Scope(0), "k", std::string((1 << 20) + 1, 'v')), "value: must be at most 1048576 bytes, got 1048577"},
      {rdv_.KvWait(Scope(0), {}, absl::Seconds(1)).status(), "keys: must be 1 to 4096 keys, got 0"},
      {rdv_.PublishNcclUniqueId(Scope(0), "world", "short"), "unique_id: must be 128 bytes, got 5"},
      {rdv_.PublishNcclUniqueId(Scope(0), "", id_a_), "communicator: must be 1 to 128 characters, got 0"},
      {rdv_.GetNcclUniqueId(Scope(0), "", absl::Seconds(1)).status(), "communicator: must be 1 to 128 characters, got 0"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(c.status.message(), c.message);
  }
}

// Threads of this process (Linux), to show that parked calls hold none.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// Thousands of ranks waiting for the id are records, not threads: they are
// parked and answered by the call that publishes, on its own thread.
TEST_F(RendezvousTest, WaitingCallsHoldNoThread) {
  constexpr int kRanks = 10000;
  rdv_.BeginGeneration("j-1", 1, kRanks + 1, clock_.Now() + absl::Minutes(5));
  const int threads = ThreadCount();
  std::vector<absl::StatusOr<std::vector<std::string>>> got(kRanks + 1);
  std::vector<bool> answered(kRanks + 1, false);
  for (int rank = 1; rank <= kRanks; ++rank) {
    rdv_.GetNcclUniqueIdAsync(Scope(rank), "world", absl::ZeroDuration(), [&, rank](auto r) {
      got[rank] = std::move(r);
      answered[rank] = true;
    });
  }
  EXPECT_EQ(rdv_.Waiters(), kRanks);
  EXPECT_EQ(ThreadCount(), threads) << "a parked call must not hold a thread";
  EXPECT_EQ(std::count(answered.begin(), answered.end(), true), 0);
  ASSERT_TRUE(rdv_.PublishNcclUniqueId(Scope(0), "world", id_a_).ok());
  EXPECT_EQ(rdv_.Waiters(), 0);
  for (int rank = 1; rank <= kRanks; ++rank) {
    ASSERT_TRUE(answered[rank]) << rank;
    ASSERT_TRUE(got[rank].ok()) << got[rank].status();
    ASSERT_EQ(got[rank]->front(), id_a_);
  }
}

// A key-value wait is indexed by the key it still misses: it advances as
// keys arrive, and only the last one finishes it.
TEST_F(RendezvousTest, AKeyWaitAdvancesKeyByKey) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Minutes(5));
  absl::StatusOr<std::vector<std::string>> got;
  int calls = 0;
  rdv_.KvWaitAsync(Scope(1), {"a", "b", "c"}, absl::Seconds(30), [&](auto r) {
    got = std::move(r);
    ++calls;
  });
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "b", "B").ok());
  ASSERT_TRUE(rdv_.KvSet(Scope(0), "a", "A").ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(*rdv_.KvAdd(Scope(0), "c", 3), 3);
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<std::string>{"A", "B", "3"}));
}

// Beyond the limit of parked calls a new one is turned away at once with
// RESOURCE_EXHAUSTED (its client comes back after a backoff); the generation
// is not failed for it.
TEST(RendezvousLimitTest, BeyondTheLimitOfParkedCallsIsResourceExhausted) {
  FakeClock clock;
  RendezvousOptions options;
  options.max_waiters = 2;
  Rendezvous rdv(&clock, options);
  rdv.BeginGeneration("j-1", 1, 4, clock.Now() + absl::Minutes(5));
  int answered = 0;
  for (int rank = 1; rank <= 2; ++rank) {
    rdv.GetNcclUniqueIdAsync({"j-1", 1, rank}, "world", absl::ZeroDuration(), [&](auto r) {
      EXPECT_TRUE(r.ok()) << r.status();
      ++answered;
    });
  }
  absl::StatusOr<std::string> third = rdv.GetNcclUniqueId({"j-1", 1, 3}, "world", absl::ZeroDuration());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(), "too many rendezvous calls are waiting on the coordinator (2); retry after a backoff");
  ASSERT_TRUE(rdv.PublishNcclUniqueId({"j-1", 1, 0}, "world", std::string(128, 'x')).ok());
  EXPECT_EQ(answered, 2);
  EXPECT_TRUE(rdv.GetNcclUniqueId({"j-1", 1, 3}, "world", absl::ZeroDuration()).ok()) << "room again";
}

TEST_F(RendezvousTest, ShutdownAnswersParkedCallsWithoutFailingTheGeneration) {
  rdv_.BeginGeneration("j-1", 1, 2, clock_.Now() + absl::Minutes(5));
  absl::StatusOr<std::vector<std::string>> got;
  rdv_.KvWaitAsync(Scope(1), {"k"}, absl::ZeroDuration(), [&](auto r) { got = std::move(r); });
  rdv_.Shutdown();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), "the coordinator is shutting down");
  EXPECT_TRUE(listener_.Failed().empty());
  EXPECT_EQ(rdv_.KvWait(Scope(1), {"k"}, absl::Seconds(1)).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringmaster::coordinator
