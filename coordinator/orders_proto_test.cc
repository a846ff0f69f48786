// StartRanksProto splices the placement in as bytes: what a worker parses must
// still be the whole order, and each placement must get its own bytes.
#include "coordinator/orders_proto.h"

#include <memory>

#include "absl/time/time.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using google::protobuf::util::MessageDifferencer;

std::shared_ptr<const v1::Placement> MakePlacement(int generation, int world_size) {
  auto placement = std::make_shared<v1::Placement>();
  placement->set_generation(generation);
  placement->set_world_size(world_size);
  placement->set_data_parallel_size(world_size);
  placement->set_pipeline_parallel_size(1);
  for (int r = 0; r < world_size; ++r) {
    v1::RankAssignment* a = placement->add_ranks();
    a->set_global_rank(r);
    a->set_node_id(r < world_size / 2 ? "n-1" : "n-2");
    a->set_hostname(r < world_size / 2 ? "host-a" : "host-b");
    a->set_gpu_uuid("GPU-8f1c2d3e-0000-4000-8000-00000000000" + std::to_string(r));
  }
  return placement;
}

StartOrder MakeOrder(std::shared_ptr<const v1::Placement> placement) {
  StartOrder order;
  order.node_id = "n-2";
  order.job_id = "j-7";
  order.generation = placement->generation();
  order.spec.set_name("spliced");
  order.placement = std::move(placement);
  order.global_ranks = {2, 3};
  order.checkpoint_dir = "/ckpt/j-7";
  order.rendezvous_deadline = absl::FromUnixSeconds(1000);
  return order;
}

// The bytes a worker receives, parsed as it parses them.
v1::StartRanks OnTheWire(const v1::StartRanks& sent) {
  v1::StartRanks parsed;
  EXPECT_TRUE(parsed.ParseFromString(sent.SerializeAsString()));
  return parsed;
}

TEST(OrdersProtoTest, TheWorkerParsesTheWholeOrder) {
  const StartOrder order = MakeOrder(MakePlacement(3, 4));
  const v1::StartRanks parsed = OnTheWire(StartRanksProto(order));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.placement(), *order.placement)) << parsed.placement().DebugString();
  EXPECT_EQ(parsed.job_id(), "j-7");
  EXPECT_EQ(parsed.generation(), 3);
  EXPECT_EQ(parsed.spec().name(), "spliced");
  ASSERT_EQ(parsed.global_ranks_size(), 2);
  EXPECT_EQ(parsed.global_ranks(0), 2);
  EXPECT_EQ(parsed.global_ranks(1), 3);
  EXPECT_EQ(parsed.checkpoint_dir(), "/ckpt/j-7");
  EXPECT_EQ(parsed.rendezvous_deadline().seconds(), 1000);
}

TEST(OrdersProtoTest, EveryPlacementGetsItsOwnBytes) {
  std::shared_ptr<const v1::Placement> first = MakePlacement(1, 2);
  const std::shared_ptr<const v1::Placement> second = MakePlacement(2, 6);
  // Orders sharing a placement, then another placement, then the first again.
  for (const auto& placement : {first, first, second, first}) {
    const v1::StartRanks parsed = OnTheWire(StartRanksProto(MakeOrder(placement)));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed.placement(), *placement));
  }
  // A new placement where a freed one was (same address or not) is not taken for it.
  first.reset();
  const std::shared_ptr<const v1::Placement> third = MakePlacement(3, 8);
  EXPECT_EQ(OnTheWire(StartRanksProto(MakeOrder(third))).placement().world_size(), 8);
}

}  // namespace
}  // namespace ringmaster::coordinator
