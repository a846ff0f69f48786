#include "coordinator/core/rank_layout.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

std::vector<NodeGrant> Grants(int nodes, int gpus_each) {
  std::vector<NodeGrant> out;
  for (int n = 0; n < nodes; ++n) {
    NodeGrant g{absl::StrCat("n", n), absl::StrCat("host-", n), {}, 0};
    for (int i = 0; i < gpus_each; ++i) g.gpu_uuids.push_back(absl::StrCat("n", n, "-g", 7 - i));
    out.push_back(g);
  }
  return out;
}

// 2 nodes x 4 ranks, pipeline 2 (data 4): ranks contiguous per node,
// stage = rank % pipeline, replica = rank / pipeline.
TEST(RankLayoutTest, TwoNodesFourRanksPipelineTwo) {
  absl::StatusOr<v1::Placement> p = BuildPlacement(3, 4, 4, 2, Grants(2, 4), /*cuda=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->generation(), 3);
  EXPECT_EQ(p->world_size(), 8);
  EXPECT_EQ(p->data_parallel_size(), 4);
  EXPECT_EQ(p->pipeline_parallel_size(), 2);
  EXPECT_EQ(p->nodes(), 2);
  EXPECT_EQ(p->ranks_per_node(), 4);
  ASSERT_EQ(p->ranks_size(), 8);
  struct Want {
    int node_rank, local_rank, data_rank, pipeline_rank;
    const char* node;
    const char* gpu;
  };
  const Want want[8] = {{0, 0, 0, 0, "n0", "n0-g7"}, {0, 1, 0, 1, "n0", "n0-g6"}, {0, 2, 1, 0, "n0", "n0-g5"},
                        {0, 3, 1, 1, "n0", "n0-g4"}, {1, 0, 2, 0, "n1", "n1-g7"}, {1, 1, 2, 1, "n1", "n1-g6"},
                        {1, 2, 3, 0, "n1", "n1-g5"}, {1, 3, 3, 1, "n1", "n1-g4"}};
  for (int r = 0; r < 8; ++r) {
    const v1::RankAssignment& a = p->ranks(r);
    EXPECT_EQ(a.global_rank(), r);
    EXPECT_EQ(a.node_rank(), want[r].node_rank) << r;
    EXPECT_EQ(a.local_rank(), want[r].local_rank) << r;
    EXPECT_EQ(a.data_rank(), want[r].data_rank) << r;
    EXPECT_EQ(a.pipeline_rank(), want[r].pipeline_rank) << r;
    EXPECT_EQ(a.node_id(), want[r].node) << r;
    EXPECT_EQ(a.gpu_uuid(), want[r].gpu) << r;
    EXPECT_EQ(a.global_rank(), a.data_rank() * 2 + a.pipeline_rank());
  }
}

TEST(RankLayoutTest, CpuRanksHaveNoGpu) {
  std::vector<NodeGrant> g = {{"n0", "h0", {}, 4}};
  absl::StatusOr<v1::Placement> p = BuildPlacement(1, 2, 2, 1, g, /*cuda=*/false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ranks(1).gpu_uuid(), "");
  EXPECT_EQ(p->ranks(1).data_rank(), 1);
}

TEST(RankLayoutTest, GridMustMatchTheGang) {
  absl::StatusOr<v1::Placement> p = BuildPlacement(1, 4, 3, 1, Grants(1, 4), true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "placement: data (3) x pipeline (1) must equal nodes (1) x ranks_per_node (4)");
  EXPECT_EQ(BuildPlacement(1, 4, 4, 1, Grants(1, 3), true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildPlacement(1, 4, 4, 1, {}, true).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::coordinator
