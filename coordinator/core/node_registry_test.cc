#include "coordinator/core/node_registry.h"

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::MakeNode;

class NodeRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::NewTempDir("registry") + "/rm.db";
    store_ = *Store::Open({path_});
    registry_ = std::make_unique<NodeRegistry>(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(5), 3});
  }

  NodeRegistration MustRegister(const v1::NodeInfo& node) {
    absl::StatusOr<NodeRegistration> r = registry_->Register(node);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : NodeRegistration{};
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<NodeRegistry> registry_;
};

TEST_F(NodeRegistryTest, RegisterAssignsIdSessionAndLease) {
  NodeRegistration r = MustRegister(MakeNode("host-a", 8, 64));
  EXPECT_EQ(r.node_id, "n-1");
  EXPECT_GT(r.session_id, 0);
  EXPECT_EQ(r.lease_duration, absl::Seconds(15));
  EXPECT_EQ(r.heartbeat_interval, absl::Seconds(5));
  EXPECT_EQ(r.lease_expiry, clock_.Now() + absl::Seconds(15));
  v1::NodeInfo info = *registry_->GetNode("n-1");
  EXPECT_EQ(info.state(), v1::NODE_STATE_READY);
  EXPECT_EQ(info.free_gpus(), 8);
  EXPECT_EQ(info.free_cpu_slots(), 64);

  // Registering again (the worker presents its id) keeps the id, opens a new
  // session and retires the old one.
  v1::NodeInfo again = MakeNode("host-a", 8, 64);
  again.set_node_id("n-1");
  NodeRegistration r2 = MustRegister(again);
  EXPECT_EQ(r2.node_id, "n-1");
  EXPECT_NE(r2.session_id, r.session_id);
  EXPECT_EQ(registry_->Heartbeat("n-1", r.session_id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(registry_->Heartbeat("n-1", r2.session_id).ok());
}

// A clock that moves one second each time it is read: time passes inside
// Register (its store write, its locks), as it does in a burst of
// registrations.
class TickingClock : public Clock {
 public:
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += absl::Seconds(1);
    return now_;
  }
  void SleepUntil(absl::Time) override {}

 private:
  mutable std::mutex mu_;
  mutable absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

TEST(NodeRegistryLeaseTest, TheFirstLeaseStartsAfterTheRegistrationIsStoredNotBefore) {
  TickingClock clock;
  std::unique_ptr<Store> store = *Store::Open({testing::NewTempDir("registry") + "/rm.db"});
  NodeRegistry registry(&clock, store.get(), NodeRegistryOptions{absl::Seconds(5), 3});
  absl::StatusOr<NodeRegistration> r = registry.Register(MakeNode("host-a", 8, 64));
  ASSERT_TRUE(r.ok()) << r.status();
  const absl::Time registered = FromProtoTime(registry.GetNode(r->node_id)->register_time());
  // register_time is read before the store write; the lease from a later
  // read, so that no wait inside Register comes off the node's first lease
  // (from 301a43d a 2,048-node burst lost nodes that way).
  EXPECT_GT(r->lease_expiry - registered, absl::Seconds(15));
}

TEST_F(NodeRegistryTest, WorkerThatLostItsIdGetsItsNodeBack) {
  MustRegister(MakeNode("host-a", 1));
  MustRegister(MakeNode("host-b", 1));
  EXPECT_EQ(MustRegister(MakeNode("host-b", 1)).node_id, "n-2");
  EXPECT_EQ(registry_->ListNodes().size(), 2u);
}

TEST_F(NodeRegistryTest, InvalidNodesAreRejectedNamingTheField) {
  struct Case {
    v1::NodeInfo node;
    std::string message;
  };
  v1::NodeInfo no_host = MakeNode("", 1);
  v1::NodeInfo dup = MakeNode("h", 2);
  dup.mutable_gpus(1)->set_uuid(dup.gpus(0).uuid());
  v1::NodeInfo empty_uuid = MakeNode("h", 1);
  empty_uuid.mutable_gpus(0)->clear_uuid();
  v1::NodeInfo negative = MakeNode("h", 0, -1);
  const std::vector<Case> cases = {
      {no_host, "node.hostname: must not be empty"},
      {dup, "node.gpus[1].uuid: h-gpu0 is listed twice"},
      {empty_uuid, "node.gpus[0].uuid: must not be empty"},
      {negative, "node.cpu_slots: must be >= 0, got -1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NodeRegistration> r = registry_->Register(c.node);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST_F(NodeRegistryTest, HeartbeatsKeepTheLeaseThreeMissedLoseTheNode) {
  NodeRegistration r = MustRegister(MakeNode("host-a", 8));
  // A minute of heartbeats every 5 s: never lost.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Seconds(5));
    absl::StatusOr<absl::Time> expiry = registry_->Heartbeat(r.node_id, r.session_id);
    ASSERT_TRUE(expiry.ok());
    EXPECT_EQ(*expiry, clock_.Now() + absl::Seconds(15));
    EXPECT_TRUE(registry_->ExpireLeases().empty());
  }
  // Then silence: fine just before the third missed interval ends...
  clock_.Advance(absl::Seconds(15) - absl::Milliseconds(1));
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  EXPECT_EQ(registry_->GetNode(r.node_id)->state(), v1::NODE_STATE_READY);
  // ...LOST when it ends, reported once.
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(registry_->ExpireLeases(), std::vector<std::string>{r.node_id});
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  EXPECT_EQ(registry_->GetNode(r.node_id)->state(), v1::NODE_STATE_LOST);
  EXPECT_TRUE(registry_->SchedulableCapacity().empty());
  absl::StatusOr<absl::Time> late = registry_->Heartbeat(r.node_id, r.session_id);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.status().message(), "node n-1 is LOST; register again");
  // Registering again brings it back.
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(r.node_id);
  NodeRegistration r2 = MustRegister(again);
  EXPECT_EQ(registry_->GetNode(r.node_id)->state(), v1::NODE_STATE_READY);
  EXPECT_TRUE(registry_->Heartbeat(r.node_id, r2.session_id).ok());
}

TEST_F(NodeRegistryTest, UnknownNodeIsNotFound) {
  EXPECT_EQ(registry_->Heartbeat("n-9", 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->GetNode("n-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->SetCordon("n-9", "alice", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Resolve("n-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Reserve("n-9", {}).code(), absl::StatusCode::kNotFound);
}

TEST_F(NodeRegistryTest, FreeCapacityIsWhatNoRankHolds) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 4, 16));
  ASSERT_TRUE(registry_->Reserve(a.node_id, {{"j-1", 1, 0, "host-a-gpu0", 0}, {"j-1", 1, 1, "host-a-gpu1", 0}}).ok());
  ASSERT_TRUE(registry_->Reserve(a.node_id, {{"j-2", 1, 0, "", 6}}).ok());
  std::vector<NodeCapacity> cap = registry_->SchedulableCapacity();
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].free_gpu_uuids, (std::vector<std::string>{"host-a-gpu2", "host-a-gpu3"}));
  EXPECT_EQ(cap[0].gpu_uuids.size(), 4u);
  EXPECT_EQ(cap[0].free_cpu_slots, 10);

  v1::NodeInfo info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.free_gpus(), 2);
  EXPECT_EQ(info.free_cpu_slots(), 10);
  ASSERT_EQ(info.allocations_size(), 2);
  EXPECT_EQ(info.allocations(0).job_id(), "j-1");
  EXPECT_EQ(info.allocations(0).global_ranks_size(), 2);
  EXPECT_EQ(info.allocations(0).gpu_uuids(1), "host-a-gpu1");
  EXPECT_EQ(info.allocations(1).cpu_slots(), 6);

  // A held GPU, a GPU the node lacks, too many CPU slots: refused, nothing held.
  absl::Status s = registry_->Reserve(a.node_id, {{"j-3", 1, 0, "host-a-gpu2", 0}, {"j-3", 1, 1, "host-a-gpu1", 0}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "GPU host-a-gpu1 of node n-1 is held by rank 1 of job j-1");
  EXPECT_EQ(registry_->Reserve(a.node_id, {{"j-3", 1, 0, "other-gpu", 0}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->Reserve(a.node_id, {{"j-3", 1, 0, "", 11}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->SlotsOn(a.node_id).size(), 3u);
  // The same rank again is a no-op.
  EXPECT_TRUE(registry_->Reserve(a.node_id, {{"j-1", 1, 0, "host-a-gpu0", 0}}).ok());
  EXPECT_EQ(registry_->SlotsOn(a.node_id).size(), 3u);

  registry_->Release(a.node_id, "j-1", 1, 0);
  EXPECT_EQ(registry_->SchedulableCapacity()[0].free_gpu_uuids.size(), 3u);
  registry_->ReleaseGeneration("j-1", 1);
  EXPECT_EQ(registry_->SchedulableCapacity()[0].free_gpu_uuids.size(), 4u);
  EXPECT_EQ(registry_->ReleaseAllOn(a.node_id).size(), 1u);
  EXPECT_EQ(registry_->SchedulableCapacity()[0].free_cpu_slots, 16);
}

TEST_F(NodeRegistryTest, CordonedNodesTakeNoNewPlacements) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  MustRegister(MakeNode("host-b", 8));
  absl::StatusOr<v1::NodeInfo> cordoned = registry_->SetCordon(a.node_id, "alice", "kernel upgrade");
  ASSERT_TRUE(cordoned.ok());
  EXPECT_EQ(cordoned->state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(cordoned->cordoned_by(), "alice");
  EXPECT_EQ(cordoned->cordon_reason(), "kernel upgrade");
  std::vector<NodeCapacity> cap = registry_->SchedulableCapacity();
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].hostname, "host-b");
  // Heartbeats continue while cordoned; registering again keeps it cordoned,
  // also after the lease ran out (an operator's cordon outlives it).
  EXPECT_TRUE(registry_->Heartbeat(a.node_id, a.session_id).ok());
  clock_.Advance(absl::Seconds(16));
  ASSERT_EQ(registry_->ExpireLeases().size(), 2u);
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_LOST);
  EXPECT_EQ(registry_->GetNode(a.node_id)->cordoned_by(), "alice");
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(a.node_id);
  MustRegister(again);
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_CORDONED);
  ASSERT_TRUE(registry_->SetCordon(a.node_id, "", "").ok());
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_READY);
  EXPECT_EQ(registry_->GetNode(a.node_id)->cordoned_by(), "");
  EXPECT_EQ(registry_->SchedulableCapacity().size(), 1u);  // host-b is LOST
}

TEST_F(NodeRegistryTest, DrainsCordonAndEndWhenTold) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  absl::StatusOr<v1::NodeInfo> draining = registry_->StartDrain(a.node_id, "bob", "driver upgrade");
  ASSERT_TRUE(draining.ok());
  EXPECT_TRUE(draining->draining());
  EXPECT_EQ(draining->state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(draining->cordoned_by(), "bob");
  EXPECT_EQ(registry_->DrainingNodes(), std::vector<std::string>{a.node_id});
  ASSERT_TRUE(registry_->EndDrain(a.node_id).ok());
  EXPECT_TRUE(registry_->DrainingNodes().empty());
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_CORDONED);  // stays cordoned
  // Uncordoning ends a drain too.
  ASSERT_TRUE(registry_->StartDrain(a.node_id, "bob", "again").ok());
  ASSERT_TRUE(registry_->SetCordon(a.node_id, "", "").ok());
  EXPECT_TRUE(registry_->DrainingNodes().empty());
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_READY);
}

// A failing health check (on the heartbeat) makes the node NOT_READY with the
// reason, out of the scheduler's input, and draining (its jobs move); a
// passing one makes it READY again and ends that drain.
TEST_F(NodeRegistryTest, AFailingHealthCheckMakesTheNodeNotReadyUntilItPasses) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  MustRegister(MakeNode("host-b", 8));
  ASSERT_TRUE(registry_->Heartbeat(a.node_id, a.session_id, "free space: /state has 10 MiB free").ok());
  v1::NodeInfo info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.state(), v1::NODE_STATE_NOT_READY);
  EXPECT_EQ(info.not_ready_reason(), "free space: /state has 10 MiB free");
  EXPECT_TRUE(info.draining());
  std::vector<NodeCapacity> cap = registry_->SchedulableCapacity();
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].hostname, "host-b");
  // The drain it began ends as any other (nothing runs there); the node stays NOT_READY.
  ASSERT_TRUE(registry_->EndDrain(a.node_id).ok());
  ASSERT_TRUE(registry_->Heartbeat(a.node_id, a.session_id, "another reason").ok());
  EXPECT_FALSE(registry_->GetNode(a.node_id)->draining());  // still failing: no second drain
  // A new registration keeps it NOT_READY until a heartbeat says it passes.
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(a.node_id);
  NodeRegistration a2 = MustRegister(again);
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_NOT_READY);
  ASSERT_TRUE(registry_->Heartbeat(a.node_id, a2.session_id, "").ok());
  info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.state(), v1::NODE_STATE_READY);
  EXPECT_EQ(info.not_ready_reason(), "");
  EXPECT_EQ(registry_->SchedulableCapacity().size(), 2u);
}

TEST_F(NodeRegistryTest, ACordonedNodeThatRecoversIsCordonedAgainAndKeepsTheOperatorsDrain) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  ASSERT_TRUE(registry_->StartDrain(a.node_id, "bob", "rma").ok());
  ASSERT_TRUE(registry_->Heartbeat(a.node_id, a.session_id, "script x failed").ok());
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_NOT_READY);
  ASSERT_TRUE(registry_->Heartbeat(a.node_id, a.session_id, "").ok());
  v1::NodeInfo info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.state(), v1::NODE_STATE_CORDONED);
  EXPECT_TRUE(info.draining());
}

TEST_F(NodeRegistryTest, AWorkerDrainingItselfIsUncordonedByTheNextWorker) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(a.node_id);
  ASSERT_TRUE(registry_->Register(again, {}, /*worker_drains=*/true).ok());
  v1::NodeInfo info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.cordoned_by(), kCordonedByWorker);
  EXPECT_TRUE(info.draining());
  EXPECT_EQ(info.state(), v1::NODE_STATE_CORDONED);
  // The same worker registering again (a reconnect) keeps asking; a new worker
  // process (the next Slurm allocation) does not, and the node is capacity again.
  ASSERT_TRUE(registry_->Register(again, {}, true).ok());
  EXPECT_EQ(registry_->GetNode(a.node_id)->cordoned_by(), kCordonedByWorker);
  ASSERT_TRUE(registry_->Register(again, {}, false).ok());
  info = *registry_->GetNode(a.node_id);
  EXPECT_EQ(info.cordoned_by(), "");
  EXPECT_FALSE(info.draining());
  EXPECT_EQ(info.state(), v1::NODE_STATE_READY);
  // An operator's cordon is not the worker's to clear.
  ASSERT_TRUE(registry_->SetCordon(a.node_id, "alice", "bad DIMM").ok());
  ASSERT_TRUE(registry_->Register(again, {}, true).ok());
  EXPECT_EQ(registry_->GetNode(a.node_id)->cordoned_by(), "alice");
  EXPECT_TRUE(registry_->GetNode(a.node_id)->draining());
  ASSERT_TRUE(registry_->Register(again, {}, false).ok());
  EXPECT_EQ(registry_->GetNode(a.node_id)->cordoned_by(), "alice");
  EXPECT_EQ(registry_->GetNode(a.node_id)->state(), v1::NODE_STATE_CORDONED);
}

TEST_F(NodeRegistryTest, ResolveTakesAnIdOrAUniqueHostname) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  EXPECT_EQ(*registry_->Resolve(a.node_id), a.node_id);
  EXPECT_EQ(*registry_->Resolve("host-a"), a.node_id);
  v1::NodeInfo twin = MakeNode("host-a", 8);
  twin.set_address("10.0.0.9:7071");  // another node with the same hostname
  MustRegister(twin);
  absl::StatusOr<std::string> ambiguous = registry_->Resolve("host-a");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ambiguous.status().message(), "node: 2 nodes have the hostname \"host-a\" (n-1, n-2); name one by its id");
  EXPECT_EQ(registry_->Resolve("host-z").status().message(), "node: no node has the id or hostname \"host-z\"");
}

// The hostname index follows a node that registers again under another
// hostname, and is rebuilt by Recover.
TEST_F(NodeRegistryTest, AHostnameFindsTheNodeThatHasItNow) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  v1::NodeInfo renamed = MakeNode("host-c", 8);
  renamed.set_node_id(a.node_id);
  MustRegister(renamed);
  EXPECT_EQ(registry_->Resolve("host-a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*registry_->Resolve("host-c"), a.node_id);
  MustRegister(MakeNode("host-b", 8));
  std::vector<v1::NodeInfo> nodes = registry_->ListNodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].hostname(), "host-b");
  EXPECT_EQ(nodes[1].hostname(), "host-c");
  // A worker that lost its id, on the renamed host: its node, not a new one.
  EXPECT_EQ(MustRegister(MakeNode("host-c", 8)).node_id, a.node_id);
  EXPECT_NE(MustRegister(MakeNode("host-a", 8)).node_id, a.node_id);

  registry_.reset();
  store_.reset();
  store_ = *Store::Open({path_});
  NodeRegistry recovered(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(5), 3});
  ASSERT_TRUE(recovered.Recover().ok());
  EXPECT_EQ(*recovered.Resolve("host-c"), a.node_id);
  absl::StatusOr<NodeRegistration> back = recovered.Register(MakeNode("host-c", 8));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->node_id, a.node_id);
}

TEST_F(NodeRegistryTest, PagesFollowHostnameThenIdStrictlyAfterTheToken) {
  for (const char* host : {"host-d", "host-b", "host-a", "host-c"}) MustRegister(MakeNode(host, 1));
  v1::NodeInfo twin = MakeNode("host-b", 1);
  twin.set_address("10.0.0.9:7071");
  const std::string twin_id = MustRegister(twin).node_id;  // n-5, after n-2 on host-b
  ASSERT_TRUE(registry_->SetCordon("n-3", "alice", "rma").ok());  // host-a

  NodeRegistry::NodePage first = registry_->ListNodesPage({v1::NODE_STATE_READY}, "", "", 2, 1 << 20);
  EXPECT_EQ(first.total, 4);
  EXPECT_TRUE(first.more);
  ASSERT_EQ(first.nodes.size(), 2u);
  EXPECT_EQ(first.nodes[0].node_id(), "n-2");
  EXPECT_EQ(first.nodes[1].node_id(), twin_id);
  NodeRegistry::NodePage second = registry_->ListNodesPage({v1::NODE_STATE_READY}, "host-b", twin_id, 2, 1 << 20);
  EXPECT_FALSE(second.more);
  ASSERT_EQ(second.nodes.size(), 2u);
  EXPECT_EQ(second.nodes[0].hostname(), "host-c");
  EXPECT_EQ(second.nodes[1].hostname(), "host-d");
  // A token between two nodes of one hostname; every state.
  NodeRegistry::NodePage all = registry_->ListNodesPage({}, "host-b", "n-3", 10, 1 << 20);
  EXPECT_EQ(all.total, 5);
  ASSERT_EQ(all.nodes.size(), 3u);
  EXPECT_EQ(all.nodes[0].node_id(), twin_id);
  // At least one node, however small the byte bound.
  NodeRegistry::NodePage tiny = registry_->ListNodesPage({}, "", "", 10, 1);
  ASSERT_EQ(tiny.nodes.size(), 1u);
  EXPECT_EQ(tiny.nodes[0].hostname(), "host-a");
  EXPECT_TRUE(tiny.more);
}

TEST_F(NodeRegistryTest, RecoverReloadsNodesWithFreshLeasesAndNoSessions) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8, 0, {{"rack", "a3"}}));
  NodeRegistration b = MustRegister(MakeNode("host-b", 8));
  ASSERT_TRUE(registry_->StartDrain(b.node_id, "alice", "rma").ok());
  registry_.reset();
  store_.reset();

  clock_.Advance(absl::Minutes(10));
  store_ = *Store::Open({path_});
  // No grace beyond one lease here (RecoverGivesNodesTimeToReconnect).
  NodeRegistry recovered(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(5), 3, absl::ZeroDuration()});
  ASSERT_TRUE(recovered.Recover().ok());
  std::vector<v1::NodeInfo> nodes = recovered.ListNodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].labels().at("rack"), "a3");
  EXPECT_EQ(nodes[0].gpus_size(), 8);
  EXPECT_EQ(nodes[0].state(), v1::NODE_STATE_READY);
  EXPECT_EQ(nodes[1].state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(nodes[1].cordoned_by(), "alice");
  EXPECT_EQ(nodes[1].cordon_reason(), "rma");
  EXPECT_TRUE(nodes[1].draining());
  // Old sessions are gone; the lease runs from recovery.
  EXPECT_EQ(recovered.Heartbeat(a.node_id, a.session_id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(recovered.ExpireLeases().empty());
  clock_.Advance(absl::Seconds(15));
  EXPECT_EQ(recovered.ExpireLeases().size(), 2u);
  // Session ids stay unique across restarts.
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(a.node_id);
  absl::StatusOr<NodeRegistration> r = recovered.Register(again);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->session_id, b.session_id);
}

// After a restart, workers come back only after their reconnection backoff:
// a recovered node is not lost before the recovery grace, however short its
// lease; once registered again, its normal lease applies.
TEST_F(NodeRegistryTest, RecoverGivesNodesTimeToReconnect) {
  NodeRegistration a = MustRegister(MakeNode("host-a", 8));
  NodeRegistration b = MustRegister(MakeNode("host-b", 8));
  registry_.reset();
  store_.reset();
  store_ = *Store::Open({path_});
  NodeRegistry recovered(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(1), 3, absl::Seconds(60)});
  ASSERT_TRUE(recovered.Recover().ok());
  clock_.Advance(absl::Seconds(59));
  EXPECT_TRUE(recovered.ExpireLeases().empty());
  v1::NodeInfo again = MakeNode("host-a", 8);
  again.set_node_id(a.node_id);
  ASSERT_TRUE(recovered.Register(again).ok());
  clock_.Advance(absl::Seconds(1));
  // b never came back: lost at the end of the grace.
  EXPECT_EQ(recovered.ExpireLeases(), std::vector<std::string>{b.node_id});
  // a's lease is 3 heartbeats from its registration again.
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(recovered.ExpireLeases().empty());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(recovered.ExpireLeases(), std::vector<std::string>{a.node_id});
}

TEST_F(NodeRegistryTest, ConcurrentHeartbeatsAndReservations) {
  std::vector<NodeRegistration> regs;
  for (int i = 0; i < 4; ++i) regs.push_back(MustRegister(MakeNode("host-" + std::to_string(i), 8, 8)));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        EXPECT_TRUE(registry_->Heartbeat(regs[t].node_id, regs[t].session_id).ok());
        std::string job = "j-" + std::to_string(k);
        EXPECT_TRUE(registry_->Reserve(regs[t].node_id, {{job, 1, 0, "", 1}}).ok());
        registry_->SchedulableCapacity();
        registry_->Release(regs[t].node_id, job, 1, 0);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const NodeCapacity& c : registry_->SchedulableCapacity()) EXPECT_EQ(c.free_cpu_slots, 8);
}

}  // namespace
}  // namespace ringmaster::coordinator
