// The D x P grid: the rank layout, the sub-groups every rank gets, and a
// D = 2 x P = 2 run over 4 in-process ranks that trains exactly like one
// process on the same global batch (pipeline per replica, then a plain
// all-reduce average of each stage's gradients over its data-parallel group).

#include "engine/parallel/grid.h"

#include <thread>

#include "engine/dist/in_process_group.h"
#include "engine/parallel/testing/pipeline_test_harness.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

TEST(GridLayoutTest, ConsecutiveRanksAreConsecutiveStagesOfAReplica) {
  GridLayout layout = GridLayout::Create(6, 2, 3).value();
  EXPECT_EQ(layout.RankOf({0, 0}), 0);
  EXPECT_EQ(layout.RankOf({0, 2}), 2);
  EXPECT_EQ(layout.RankOf({1, 0}), 3);
  EXPECT_EQ(layout.RankOf({1, 2}), 5);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(layout.RankOf(layout.CoordOf(r)), r);
  EXPECT_EQ(layout.CoordOf(4), (GridCoord{1, 1}));
  EXPECT_EQ(layout.PipelineGroupRanks(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(layout.DataGroupRanks(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(GridLayout::Create(5, 2, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GridLayout::Create(0, 0, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GridLayout::Create(4, 4, 1).value().DataGroupRanks(0), (std::vector<int>{0, 1, 2, 3}));
}

TEST(GridTest, EveryRankGetsItsDataAndPipelineGroups) {
  constexpr int kData = 2, kPipe = 3;
  auto world = dist::InProcessWorld::Create(kData * kPipe);
  std::vector<absl::Status> status(kData * kPipe);
  std::vector<GridCoord> coords(kData * kPipe);
  // Per rank: sum over its data group and its pipeline group of the world ranks.
  std::vector<float> data_sums(kData * kPipe), pipe_sums(kData * kPipe);
  std::vector<std::thread> threads;
  for (int r = 0; r < kData * kPipe; ++r) {
    threads.emplace_back([&, r] {
      auto group = world->Group(r);
      // The coordinator's numbering (common/rank_layout.h): replica r / P, stage r % P.
      absl::StatusOr<std::unique_ptr<Grid>> grid = Grid::Create(*group, kData, kPipe, {r / kPipe, r % kPipe});
      if (!grid.ok()) {
        status[r] = grid.status();
        return;
      }
      Grid& g = **grid;
      coords[r] = g.coord();
      if (g.data_group().size() != kData || g.data_group().rank() != g.coord().data ||
          g.pipeline_group().size() != kPipe || g.pipeline_group().rank() != g.coord().stage) {
        status[r] = absl::InternalError("wrong sub-group size or rank");
        return;
      }
      Tensor d = Tensor::FromVector({1}, {static_cast<float>(r)});
      Tensor p = Tensor::FromVector({1}, {static_cast<float>(r)});
      status[r] = g.data_group().AllReduce(d, dist::ReduceOp::kSum);
      if (status[r].ok()) status[r] = g.pipeline_group().AllReduce(p, dist::ReduceOp::kSum);
      data_sums[r] = d.ToVector()[0];
      pipe_sums[r] = p.ToVector()[0];
    });
  }
  for (auto& t : threads) t.join();
  GridLayout layout = GridLayout::Create(kData * kPipe, kData, kPipe).value();
  for (int r = 0; r < kData * kPipe; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(coords[r], layout.CoordOf(r));
    float want_data = 0, want_pipe = 0;
    for (int x : layout.DataGroupRanks(coords[r].stage)) want_data += x;
    for (int x : layout.PipelineGroupRanks(coords[r].data)) want_pipe += x;
    EXPECT_EQ(data_sums[r], want_data) << "rank " << r;
    EXPECT_EQ(pipe_sums[r], want_pipe) << "rank " << r;
  }
}

TEST(GridTest, MismatchedWorldIsAnError) {
  auto world = dist::InProcessWorld::Create(1);
  auto group = world->Group(0);
  EXPECT_EQ(Grid::Create(*group, 2, 2, {0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GridTest, ACoordinateThatIsNotTheRanksPlaceIsAnError) {
  auto world = dist::InProcessWorld::Create(1);
  auto group = world->Group(0);
  absl::Status status = Grid::Create(*group, 1, 1, {0, 1}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "grid: data_rank 0, pipeline_rank 1 is not the place of rank 0 in a data 1 x pipeline 1 grid");
}

nn::ModelConfig TinyGpt() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kGpt;
  c.seed = 21;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 32;
  return c;
}

nn::ModelConfig TinyMlp() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kMlp;
  c.seed = 22;
  c.input_height = c.input_width = 8;
  c.hidden_sizes = {32, 16};
  return c;
}

class GridTrainingTest : public ::testing::TestWithParam<ScheduleKind> {};

void ExpectGridMatchesOneProcess(const nn::ModelConfig& model, ScheduleKind schedule) {
  constexpr int64_t kGlobalBatch = 16;
  std::vector<Batch> batches;
  for (int k = 0; k < 3; ++k) {
    batches.push_back(model.kind == nn::ModelKind::kGpt
                          ? testing::RandomTokenBatch(model, kGlobalBatch, model.block_size, 200 + k)
                          : testing::RandomImageBatch(model, kGlobalBatch, 200 + k));
  }
  testing::PipelineRunConfig config;
  config.model = model;
  config.data = 2;
  config.stages = {{0, 2}, {2, model.kind == nn::ModelKind::kGpt ? 4 : 3}};
  config.schedule = schedule;
  config.micro_batches = 4;  // 8 samples per replica, 2 per micro-batch
  absl::StatusOr<testing::RunResult> got = testing::RunPipeline(config, batches);
  ASSERT_TRUE(got.ok()) << got.status();
  testing::RunResult want = testing::RunReference(model, batches, config.lr).value();
  std::string worst;
  EXPECT_LT(testing::MaxRelDiff(got->first_grads, want.first_grads, &worst), 1e-5) << "gradient of " << worst;
  EXPECT_LT(testing::MaxRelDiff(got->weights, want.weights, &worst), 1e-5) << "weight " << worst;
  for (size_t k = 0; k < want.losses.size(); ++k) EXPECT_NEAR(got->losses[k], want.losses[k], 1e-5 * want.losses[k]);
  EXPECT_EQ(got->copy_mismatch, 0.0) << "replicas, tied copies or reported losses differ";
}

TEST_P(GridTrainingTest, TwoByTwoGptEqualsOneProcess) { ExpectGridMatchesOneProcess(TinyGpt(), GetParam()); }
TEST_P(GridTrainingTest, TwoByTwoMlpEqualsOneProcess) { ExpectGridMatchesOneProcess(TinyMlp(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(Schedules, GridTrainingTest, ::testing::Values(ScheduleKind::kGpipe, ScheduleKind::kOneFOneB),
                         [](const ::testing::TestParamInfo<ScheduleKind>& info) {
                           return std::string(info.param == ScheduleKind::kGpipe ? "Gpipe" : "OneFOneB");
                         });

}  // namespace
}  // namespace ringmaster::engine::parallel
