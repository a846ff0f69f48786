// StartRanksProto / StopRanksProto: what a worker parses is the whole order.
#include "coordinator/core/orders_proto.h"

#include "absl/time/time.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using google::protobuf::util::MessageDifferencer;

// Node n-2's slice of a 4-rank placement on two nodes: ranks 2 and 3.
v1::Placement Slice() {
  v1::Placement placement;
  placement.set_generation(3);
  placement.set_world_size(4);
  placement.set_data_parallel_size(4);
  placement.set_pipeline_parallel_size(1);
  placement.set_nodes(2);
  placement.set_ranks_per_node(2);
  for (int r = 2; r < 4; ++r) {
    v1::RankAssignment* a = placement.add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r - 2);
    a->set_node_rank(1);
    a->set_node_id("n-2");
    a->set_hostname("host-b");
    a->set_gpu_uuid("GPU-8f1c2d3e-0000-4000-8000-00000000000" + std::to_string(r));
  }
  return placement;
}

// The bytes a worker receives, parsed as it parses them.
v1::StartRanks OnTheWire(const v1::StartRanks& sent) {
  v1::StartRanks parsed;
  EXPECT_TRUE(parsed.ParseFromString(sent.SerializeAsString()));
  return parsed;
}

TEST(OrdersProtoTest, TheWorkerParsesTheWholeOrder) {
  StartOrder order;
  order.node_id = "n-2";
  order.job_id = "j-7";
  order.generation = 3;
  order.spec.set_name("sliced");
  order.placement = Slice();
  order.global_ranks = {2, 3};
  order.checkpoint_dir = "/ckpt/j-7/gen-3";
  order.checkpoint_roots = {"/ckpt", "/shared/ckpt"};
  order.rendezvous_deadline = absl::FromUnixSeconds(1000);
  order.rendezvous_secret = "s3cret";
  order.owner = "alice";
  const v1::StartRanks parsed = OnTheWire(StartRanksProto(order));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.placement(), order.placement)) << parsed.placement().DebugString();
  EXPECT_EQ(parsed.job_id(), "j-7");
  EXPECT_EQ(parsed.generation(), 3);
  EXPECT_EQ(parsed.spec().name(), "sliced");
  ASSERT_EQ(parsed.global_ranks_size(), 2);
  EXPECT_EQ(parsed.global_ranks(0), 2);
  EXPECT_EQ(parsed.global_ranks(1), 3);
  EXPECT_EQ(parsed.checkpoint_dir(), "/ckpt/j-7/gen-3");
  EXPECT_EQ(parsed.checkpoint_roots_size(), 2);
  EXPECT_EQ(parsed.checkpoint_roots(1), "/shared/ckpt");
  EXPECT_EQ(parsed.rendezvous_deadline().seconds(), 1000);
  EXPECT_EQ(parsed.rendezvous_secret(), "s3cret");
  EXPECT_EQ(parsed.owner(), "alice");
  EXPECT_FALSE(parsed.has_resume_from());
}

TEST(OrdersProtoTest, StopOrders) {
  StopOrder order{"n-1", "j-7", 4, {1}, absl::Seconds(30), "cancelled", true};
  const v1::StopRanks stop = StopRanksProto(order);
  EXPECT_EQ(stop.job_id(), "j-7");
  EXPECT_EQ(stop.generation(), 4);
  ASSERT_EQ(stop.global_ranks_size(), 1);
  EXPECT_EQ(stop.grace_period().seconds(), 30);
  EXPECT_EQ(stop.reason(), "cancelled");
  EXPECT_TRUE(stop.dump_state());
  EXPECT_FALSE(stop.restarting());
  order.restarting = true;
  EXPECT_TRUE(StopRanksProto(order).restarting());
}

}  // namespace
}  // namespace ringmaster::coordinator
