// GrpcStore against an in-process fake RendezvousService on 127.0.0.1:0, and
// JoinWorld's "grpc:ADDRESS" rendezvous (two Gloo ranks meeting through it).

#include "engine/dist/grpc_store.h"

#include <condition_variable>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/train/join_world.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::string_literals;

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// The key-value part of RendezvousService: one key space per (job,
// generation), fencing against `current_generation`, KvWait bounded by the
// request's timeout (unless `ignore_timeouts`, to exercise the client's own
// deadline). Records every request's scope and every KvWait timeout.
class FakeRendezvousService final : public v1::RendezvousService::Service {
 public:
  void set_current_generation(int64_t generation) {
    std::lock_guard<std::mutex> lock(mu_);
    current_generation_ = generation;
  }
  void set_ignore_timeouts(bool ignore) {
    std::lock_guard<std::mutex> lock(mu_);
    ignore_timeouts_ = ignore;
  }
  std::vector<std::string> scopes() {
    std::lock_guard<std::mutex> lock(mu_);
    return scopes_;
  }
  std::vector<absl::Duration> wait_timeouts() {
    std::lock_guard<std::mutex> lock(mu_);
    return wait_timeouts_;
  }
  std::vector<std::string> methods() {
    std::lock_guard<std::mutex> lock(mu_);
    return methods_;
  }
  // The next `n` calls are turned away with RESOURCE_EXHAUSTED (a coordinator
  // at its limit of waiting calls).
  void set_turn_away(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    turn_away_ = n;
  }

  grpc::Status PublishNcclUniqueId(grpc::ServerContext*, const v1::PublishNcclUniqueIdRequest* request,
                                   v1::PublishNcclUniqueIdResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("PublishNcclUniqueId", request->scope()); !fenced.ok()) return fenced;
    Space(request->scope())["nccl:" + request->communicator()] = request->unique_id();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status GetNcclUniqueId(grpc::ServerContext*, const v1::GetNcclUniqueIdRequest* request,
                               v1::GetNcclUniqueIdResponse* response) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("GetNcclUniqueId", request->scope()); !fenced.ok()) return fenced;
    const absl::Duration timeout = FromProto(request->timeout());
    wait_timeouts_.push_back(timeout);
    const std::string key = "nccl:" + request->communicator();
    auto& space = Space(request->scope());
    if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return space.count(key) > 0; })) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no id");
    }
    response->set_unique_id(space[key]);
    return grpc::Status::OK;
  }

  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request, v1::KvSetResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("KvSet", request->scope()); !fenced.ok()) return fenced;
    Space(request->scope())[request->key()] = request->value();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request, v1::KvGetResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("KvGet", request->scope()); !fenced.ok()) return fenced;
    auto& space = Space(request->scope());
    auto it = space.find(request->key());
    response->set_found(it != space.end());
    if (it != space.end()) response->set_value(it->second);
    return grpc::Status::OK;
  }

  // Decimal text, as FileStore and TcpStore keep counters.
  grpc::Status KvAdd(grpc::ServerContext*, const v1::KvAddRequest* request, v1::KvAddResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("KvAdd", request->scope()); !fenced.ok()) return fenced;
    std::string& value = Space(request->scope())[request->key()];
    int64_t n = 0;
    if (!value.empty() && !absl::SimpleAtoi(value, &n)) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("key '", request->key(), "' does not hold an integer"));
    }
    n += request->delta();
    value = absl::StrCat(n);
    response->set_value(n);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status KvWait(grpc::ServerContext* context, const v1::KvWaitRequest* request,
                      v1::KvWaitResponse* response) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (grpc::Status fenced = Record("KvWait", request->scope()); !fenced.ok()) return fenced;
    const absl::Duration timeout = FromProto(request->timeout());
    wait_timeouts_.push_back(timeout);
    const absl::Time deadline =
        ignore_timeouts_ || timeout == absl::ZeroDuration() ? absl::Now() + absl::Seconds(30) : absl::Now() + timeout;
    auto& space = Space(request->scope());
    for (;;) {
      std::vector<std::string> missing;
      for (const std::string& key : request->keys()) {
        if (space.count(key) == 0) missing.push_back(absl::StrCat("'", key, "'"));
      }
      if (missing.empty()) break;
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      if (absl::Now() >= deadline) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            absl::StrCat(missing.size() == 1 ? "key " : "keys ", absl::StrJoin(missing, ", "),
                                         missing.size() == 1 ? " was" : " were", " not set within ",
                                         absl::FormatDuration(timeout)));
      }
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    for (const std::string& key : request->keys()) response->add_values(space[key]);
    return grpc::Status::OK;
  }

 private:
  grpc::Status Record(const char* method, const v1::RendezvousScope& scope) {
    methods_.push_back(method);
    if (turn_away_ > 0) {
      --turn_away_;
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many calls are waiting; retry");
    }
    scopes_.push_back(absl::StrCat(scope.job_id(), "/", scope.generation(), "/", scope.rank()));
    if (scope.generation() < current_generation_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("generation ", scope.generation(), " is over; current is ",
                                       current_generation_));
    }
    return grpc::Status::OK;
  }
  std::map<std::string, std::string>& Space(const v1::RendezvousScope& scope) {
    return spaces_[absl::StrCat(scope.job_id(), "/", scope.generation())];
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t current_generation_ = 1;
  bool ignore_timeouts_ = false;
  int turn_away_ = 0;
  std::map<std::string, std::map<std::string, std::string>> spaces_;
  std::vector<std::string> scopes_;
  std::vector<std::string> methods_;
  std::vector<absl::Duration> wait_timeouts_;
};

class GrpcStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    target_ = absl::StrCat("127.0.0.1:", port_);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  std::unique_ptr<GrpcStore> NewStore(int rank, int64_t generation = 1) {
    GrpcStoreOptions options;
    options.target = target_;
    options.job_id = "j-42";
    options.generation = generation;
    options.rank = rank;
    auto store = GrpcStore::Connect(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

  FakeRendezvousService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string target_;
};

TEST_F(GrpcStoreTest, SetThenGetFromAnotherRankWithArbitraryBytes) {
  auto a = NewStore(0);
  auto b = NewStore(1);
  const std::string value = "\0\x01\xff" "bytes"s;
  ASSERT_TRUE(a->Set("addr/0", value).ok());
  auto got = b->Get("addr/0", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE(a->Set("addr/0", "second").ok());
  EXPECT_EQ(*b->Get("addr/0", absl::Seconds(5)), "second");
}

TEST_F(GrpcStoreTest, EveryRequestCarriesJobGenerationAndRank) {
  auto store = NewStore(3, 7);
  service_.set_current_generation(7);
  ASSERT_TRUE(store->Set("k", "v").ok());
  ASSERT_TRUE(store->Get("k", absl::Seconds(1)).ok());
  ASSERT_TRUE(store->Get("k", absl::ZeroDuration()).ok());
  ASSERT_TRUE(store->Wait({"k"}, absl::Seconds(1)).ok());
  ASSERT_TRUE(store->Add("n", 2).ok());
  EXPECT_THAT(service_.methods(), ::testing::ElementsAre("KvSet", "KvWait", "KvGet", "KvWait", "KvAdd"));
  EXPECT_THAT(service_.scopes(), ::testing::Each(std::string("j-42/7/3")));
}

TEST_F(GrpcStoreTest, GenerationsAreSeparateKeySpaces) {
  auto old_generation = NewStore(0, 1);
  auto new_generation = NewStore(0, 2);
  ASSERT_TRUE(old_generation->Set("k", "old").ok());
  auto got = new_generation->Get("k", absl::ZeroDuration());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
}

TEST_F(GrpcStoreTest, GetAndWaitBlockUntilAnotherRankSets) {
  auto reader = NewStore(0);
  auto writer = NewStore(1);
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(writer->Set("late", "here").ok());
  });
  EXPECT_TRUE(reader->Wait({"late"}, absl::Seconds(10)).ok());
  auto got = reader->Get("late", absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
}

TEST_F(GrpcStoreTest, TimeoutIsSentToTheService) {
  auto store = NewStore(0);
  ASSERT_TRUE(store->Set("k", "v").ok());
  ASSERT_TRUE(store->Wait({"k"}, absl::Milliseconds(1500)).ok());
  ASSERT_TRUE(store->Get("k", absl::Seconds(3)).ok());
  EXPECT_THAT(service_.wait_timeouts(), ::testing::ElementsAre(absl::Milliseconds(1500), absl::Seconds(3)));
}

TEST_F(GrpcStoreTest, ServiceDeadlineNamesTheMissingKeys) {
  auto store = NewStore(0);
  ASSERT_TRUE(store->Set("a", "1").ok());
  absl::Status status = store->Wait({"a", "b", "c"}, absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(status.message(), absl::StrCat("grpc store ", target_, ": keys 'b', 'c' were not set within 50ms"));
}

TEST_F(GrpcStoreTest, ClientDeadlineWhenTheServiceDoesNotAnswer) {
  service_.set_ignore_timeouts(true);
  GrpcStoreOptions options;
  options.target = target_;
  options.job_id = "j-42";
  options.generation = 1;
  options.deadline_slack = absl::Milliseconds(100);
  auto store = GrpcStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto got = (*store)->Get("rendezvous/rank3", absl::Milliseconds(50));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_EQ(got.status().message(),
            absl::StrCat("grpc store ", target_, ": key 'rendezvous/rank3' was not set within 50ms"));
}

TEST_F(GrpcStoreTest, GetWithoutWaitingUsesKvGet) {
  auto store = NewStore(0);
  auto missing = store->Get("nothing", absl::ZeroDuration());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(missing.status().message(), absl::StrCat("grpc store ", target_, ": key 'nothing' was not set within 0"));
  ASSERT_TRUE(store->Set("nothing", "now").ok());
  EXPECT_EQ(*store->Get("nothing", absl::ZeroDuration()), "now");
  EXPECT_THAT(service_.methods(), ::testing::ElementsAre("KvGet", "KvSet", "KvGet"));
}

TEST_F(GrpcStoreTest, StaleGenerationIsFailedPreconditionWithTheServiceMessage) {
  service_.set_current_generation(4);
  auto store = NewStore(0, 3);
  absl::Status set = store->Set("k", "v");
  EXPECT_EQ(set.code(), absl::StatusCode::kFailedPrecondition) << set;
  EXPECT_EQ(set.message(), absl::StrCat("grpc store ", target_, ": generation 3 is over; current is 4"));
  auto got = store->Get("k", absl::Seconds(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_EQ(store->Wait({"k"}, absl::Seconds(1)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->Add("n", 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(GrpcStoreTest, AddIsAtomicAcrossRanks) {
  constexpr int kRanks = 4;
  constexpr int kAdds = 25;
  std::vector<std::unique_ptr<GrpcStore>> stores;
  for (int rank = 0; rank < kRanks; ++rank) stores.push_back(NewStore(rank));
  std::vector<std::vector<int64_t>> seen(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      for (int i = 0; i < kAdds; ++i) {
        auto value = stores[rank]->Add("arrivals", 1);
        ASSERT_TRUE(value.ok()) << value.status();
        seen[rank].push_back(*value);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<int64_t> all;
  for (const auto& values : seen) all.insert(values.begin(), values.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kRanks * kAdds));  // every value handed out once
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kRanks * kAdds);
  EXPECT_EQ(*stores[0]->Get("arrivals", absl::Seconds(1)), absl::StrCat(kRanks * kAdds));
  EXPECT_EQ(*stores[1]->Add("arrivals", -kRanks * kAdds), 0);
}

TEST_F(GrpcStoreTest, AddToANonIntegerPassesTheServiceError) {
  auto store = NewStore(0);
  ASSERT_TRUE(store->Set("name", "gloo").ok());
  auto added = store->Add("name", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kFailedPrecondition) << added.status();
  EXPECT_EQ(added.status().message(), absl::StrCat("grpc store ", target_, ": key 'name' does not hold an integer"));
}

TEST(GrpcStoreUnreachableTest, NoServiceIsUnavailable) {
  // A short path: TEST_TMPDIR can exceed the 107 bytes of a socket path.
  GrpcStoreOptions options;
  options.target = absl::StrCat("unix:/tmp/ringmaster-grpc-store-test-", ::getpid(), "-no-agent.sock");
  options.job_id = "j-1";
  options.generation = 1;
  auto store = GrpcStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status status = (*store)->Set("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(absl::StrCat("grpc store ", options.target, ": unavailable: ")));
  auto got = (*store)->Get("k", absl::Seconds(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
}

TEST(GrpcStoreConnectTest, RejectsMissingTargetAndJob) {
  GrpcStoreOptions options;
  EXPECT_EQ(GrpcStore::Connect(options).status().message(),
            "grpc store: target: required (e.g. unix:/path/agent.sock)");
  options.target = "unix:/x.sock";
  EXPECT_EQ(GrpcStore::Connect(options).status().message(), "grpc store unix:/x.sock: job id: required");
  options.job_id = "j-1";
  options.generation = -1;
  EXPECT_EQ(GrpcStore::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.generation = 1;
  options.target = absl::StrCat("unix:/", std::string(107, 'x'));
  EXPECT_EQ(GrpcStore::Connect(options).status().message(),
            absl::StrCat("grpc store ", options.target, ": unix socket path longer than 107 bytes"));
}

TEST_F(GrpcStoreTest, TheNcclIdGoesThroughTheIdRpcsNotTheKeys) {
  auto rank0 = NewStore(0);
  auto rank1 = NewStore(1);
  const std::string id(128, '\x07');
  absl::StatusOr<std::string> fetched;
  std::thread waiter([&] { fetched = rank1->Fetch("world", absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(rank0->Publish("world", id).ok());
  waiter.join();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*fetched, id);
  EXPECT_THAT(service_.methods(), ::testing::UnorderedElementsAre("GetNcclUniqueId", "PublishNcclUniqueId"));
  EXPECT_THAT(service_.wait_timeouts(), ::testing::ElementsAre(absl::Seconds(10)));
}

TEST_F(GrpcStoreTest, AnIdNeverPublishedIsDeadlineExceededNamingTheCommunicator) {
  GrpcStoreOptions options;
  options.target = target_;
  options.job_id = "j-42";
  options.generation = 1;
  options.deadline_slack = absl::Milliseconds(100);
  auto store = GrpcStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::string> got = (*store)->Fetch("world", absl::Milliseconds(50));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
}

TEST_F(GrpcStoreTest, CallsTurnedAwayAtALimitComeBackAfterABackoff) {
  auto store = NewStore(0);
  service_.set_turn_away(3);
  ASSERT_TRUE(store->Set("k", "v").ok());
  EXPECT_THAT(service_.methods(), ::testing::ElementsAre("KvSet", "KvSet", "KvSet", "KvSet"));
  service_.set_turn_away(2);
  auto got = store->Fetch("absent", absl::Milliseconds(300));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << "retried, then waited";
  std::vector<absl::Duration> waits = service_.wait_timeouts();
  ASSERT_EQ(waits.size(), 1u) << "only the attempt let in waits";
  EXPECT_LT(waits[0], absl::Milliseconds(300)) << "the retry asks for what is left of the wait";
}

TEST_F(GrpcStoreTest, AtALimitThatDoesNotLiftTheCallGivesUpAtItsDeadline) {
  GrpcStoreOptions options;
  options.target = target_;
  options.job_id = "j-42";
  options.generation = 1;
  options.call_timeout = absl::Milliseconds(200);
  auto store = GrpcStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status();
  service_.set_turn_away(1000000);
  const absl::Time start = absl::Now();
  absl::Status status = (*store)->Set("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_GT(service_.methods().size(), 1u);
}

// JoinWorld with a grpc: rendezvous in its rank context: two ranks (threads)
// meet through the fake service, every call scoped by the context's job,
// generation and rank.
TEST_F(GrpcStoreTest, JoinWorldOverTheGrpcRendezvous) {
  service_.set_current_generation(5);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      v1::RankContext context;
      context.set_job_id("j-7");
      context.set_generation(5);
      context.mutable_rank()->set_global_rank(rank);
      context.mutable_rank()->set_local_rank(rank);
      context.mutable_rank()->set_data_rank(rank);
      context.mutable_world()->set_world_size(2);
      context.mutable_rendezvous()->set_address(absl::StrCat("grpc:", target_));
      JoinOptions options;
      options.timeout = absl::Seconds(20);
      auto group = JoinWorld(context, options);
      if (!group.ok()) {
        results[rank] = group.status();
        return;
      }
      results[rank] = (*group)->Barrier();
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  std::vector<std::string> scopes = service_.scopes();
  ASSERT_FALSE(scopes.empty());
  for (const std::string& scope : scopes) EXPECT_THAT(scope, StartsWith("j-7/5/"));
}

}  // namespace
}  // namespace ringmaster::engine::dist
