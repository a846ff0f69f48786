#include "worker/worker_metrics.h"

#include "common/metrics_promtool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::StepMetrics Step(int64_t step) {
  v1::StepMetrics m;
  m.set_step(step);
  m.set_loss(0.25);
  m.set_samples_per_second(1234.5);
  m.set_tokens_per_second(99);
  m.set_loss_scale(65536);
  m.set_skipped_steps(2);
  m.set_step_time_seconds(0.02);
  m.set_communication_seconds(0.005);
  m.set_grad_norm(1.5);
  m.set_learning_rate(0.001);
  m.set_memory_bytes(1 << 30);
  return m;
}

TEST(WorkerMetricsTest, ExposesEachRanksStepMetricsWithJobRankAndNodeLabels) {
  MetricsRegistry registry;
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> metrics = WorkerMetrics::Create(&registry, "node-a");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->SetCapacity(8, 0);
  (*metrics)->SetRanksRunningSource([] { return 2.0; });
  (*metrics)->SetLogLinesDroppedSource([] { return 0.0; });
  (*metrics)->RecordStep("j1", 1, 3, Step(10));
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_loss{job=\"j1\",node=\"node-a\",rank=\"3\"} 0.25"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_samples_per_second{job=\"j1\",node=\"node-a\",rank=\"3\"} 1234.5"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_loss_scale{job=\"j1\",node=\"node-a\",rank=\"3\"} 65536"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step{job=\"j1\",node=\"node-a\",rank=\"3\"} 10"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_device_memory_bytes{job=\"j1\",node=\"node-a\",rank=\"3\"} 1073741824"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step_seconds_count{job=\"j1\",node=\"node-a\",rank=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_worker_gpus{node=\"node-a\"} 8"));
  EXPECT_THAT(text, HasSubstr("ringmaster_worker_ranks_running{node=\"node-a\"} 2"));

  absl::StatusOr<PromtoolResult> lint = RunPromtoolCheckMetrics(text);
  if (lint.status().code() == absl::StatusCode::kNotFound) GTEST_SKIP() << lint.status();
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_code, 0) << lint->output;
}

TEST(WorkerMetricsTest, ExposesProgressCheckpointsAndEvaluationsForTheDashboardsAndAlerts) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  metrics->SetCheckpointPlan("j", 2, 500, 1000);  // generation 2 resumes from step 1000
  v1::StepMetrics m = Step(1200);
  m.set_epoch(2);
  m.set_total_steps(5000);
  metrics->RecordStep("j", 2, 0, m);
  metrics->RecordStep("j", 2, 1, m);
  std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_epoch{job=\"j\",node=\"n\",rank=\"0\"} 2"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_total_steps{job=\"j\",node=\"n\",rank=\"0\"} 5000"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_interval_steps{job=\"j\",node=\"n\",rank=\"1\"} 500"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_last_checkpoint_step{job=\"j\",node=\"n\",rank=\"0\"} 1000"));
  // No evaluation yet: NaN, not a misleading 0.
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_eval_accuracy{job=\"j\",node=\"n\",rank=\"0\"} Nan"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_eval_step{job=\"j\",node=\"n\",rank=\"0\"} 0"));
  // Rank 0 commits a checkpoint; it evaluates.
  metrics->RecordCheckpoint("j", 2, 0, 0.5, 0.02, 4096, 1500);
  m.set_eval_step(1500);
  m.set_eval_loss(0.41);
  m.set_eval_accuracy(0.875);
  metrics->RecordStep("j", 2, 0, m);
  text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_stall_seconds_sum{job=\"j\",node=\"n\",rank=\"0\"} 0.02"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_last_checkpoint_step{job=\"j\",node=\"n\",rank=\"0\"} 1500"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_last_checkpoint_step{job=\"j\",node=\"n\",rank=\"1\"} 1000"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_eval_loss{job=\"j\",node=\"n\",rank=\"0\"} 0.41"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_eval_accuracy{job=\"j\",node=\"n\",rank=\"0\"} 0.875"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_eval_step{job=\"j\",node=\"n\",rank=\"0\"} 1500"));
  // The next generation starts from its own plan.
  metrics->SetCheckpointPlan("j", 3, 500, 1500);
  metrics->RecordStep("j", 3, 0, Step(1510));
  EXPECT_THAT(registry.ExposeText(),
              HasSubstr("ringmaster_rank_last_checkpoint_step{job=\"j\",node=\"n\",rank=\"0\"} 1500"));
  metrics->RankExited("j", 3, 0);
  EXPECT_THAT(registry.ExposeText(), Not(HasSubstr("ringmaster_rank_eval_loss{job=\"j\",node=\"n\",rank=\"0\"}")));
}

// A timed interval (interval_seconds or auto) is in the reports; the time of
// the last commit (else of the generation's first report) beside it: the
// overdue alert of timed intervals reads both.
TEST(WorkerMetricsTest, ExposesATimedIntervalAndTheLastCheckpointsTime) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  v1::StepMetrics m = Step(10);
  m.set_checkpoint_interval_seconds(6.5);
  const double before = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  metrics->RecordStep("j", 1, 0, m);
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_interval_seconds{job=\"j\",node=\"n\",rank=\"0\"} 6.5"));
  const std::string key = "ringmaster_rank_last_checkpoint_timestamp_seconds{job=\"j\",node=\"n\",rank=\"0\"} ";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  const double stamp = std::stod(text.substr(at + key.size()));
  EXPECT_GE(stamp, before - 1);
  EXPECT_LE(stamp, before + 60);
}

TEST(WorkerMetricsTest, AnExitedRanksSeriesGoUnlessANewerGenerationReports) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  metrics->RecordStep("j", 1, 0, Step(5));
  metrics->RecordStep("j", 2, 0, Step(1));
  metrics->RecordStep("j", 1, 0, Step(6));  // a late report of the old generation: ignored
  EXPECT_THAT(registry.ExposeText(), HasSubstr("ringmaster_rank_step{job=\"j\",node=\"n\",rank=\"0\"} 1"));
  metrics->RankExited("j", 1, 0);  // generation 1's process ends after 2 started
  EXPECT_THAT(registry.ExposeText(), HasSubstr("ringmaster_rank_step{job=\"j\",node=\"n\",rank=\"0\"} 1"));
  metrics->RankExited("j", 2, 0);
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, Not(HasSubstr("ringmaster_rank_step{")));
  EXPECT_THAT(text, HasSubstr("ringmaster_worker_rank_exits_total{node=\"n\"} 2"));
}

TEST(WorkerMetricsTest, AProgramsOwnGaugesAreExposedByNameBoundedAndGoWithTheRank) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  v1::StepMetrics m = Step(5);
  (*m.mutable_gauges())["grad_scale"] = 2.5;
  metrics->RecordStep("j", 1, 0, m);
  (*m.mutable_gauges())["bad name"] = 1;  // not a name we export
  for (int i = 0; i < 70; ++i) (*m.mutable_gauges())["g" + std::to_string(i)] = i;
  metrics->RecordStep("j", 1, 0, m);
  std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_gauge{job=\"j\",name=\"grad_scale\",node=\"n\",rank=\"0\"} 2.5"));
  EXPECT_THAT(text, Not(HasSubstr("bad name")));
  size_t series = 0;
  for (size_t at = text.find("ringmaster_rank_gauge{"); at != std::string::npos;
       at = text.find("ringmaster_rank_gauge{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 64u);  // at most 64 names per rank
  metrics->RankExited("j", 1, 0);
  EXPECT_THAT(registry.ExposeText(), Not(HasSubstr("ringmaster_rank_gauge{")));
}

TEST(WorkerMetricsTest, ExposesMfuDataWaitAndTheGpuOfEachRank) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  metrics->SetRankGpu("j", 0, "GPU-8f1c0000-1111-2222-3333-444455556666");
  v1::StepMetrics m = Step(3);
  m.set_model_flops_per_second(400e12);
  m.set_peak_flops_per_second(1000e12);
  m.set_data_wait_seconds(0.002);
  metrics->RecordStep("j", 1, 0, m);
  metrics->RecordStep("j", 1, 1, Step(3));  // a CPU rank: peak unknown, no GPU
  std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_model_flops_per_second{job=\"j\",node=\"n\",rank=\"0\"} 400000000000000"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_mfu_ratio{job=\"j\",node=\"n\",rank=\"0\"} 0.4"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_mfu_ratio{job=\"j\",node=\"n\",rank=\"1\"} Nan"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_data_wait_seconds{job=\"j\",node=\"n\",rank=\"0\"} 0.002"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_gpu_info{UUID=\"GPU-8f1c0000-1111-2222-3333-444455556666\",job=\"j\","
                              "node=\"n\",rank=\"0\"} 1"));
  // Only the CUDA rank has one.
  const std::string info = "ringmaster_rank_gpu_info{";
  EXPECT_EQ(text.find(info, text.find(info) + 1), std::string::npos);
  metrics->RankExited("j", 1, 0);
  EXPECT_THAT(registry.ExposeText(), Not(HasSubstr("ringmaster_rank_gpu_info{")));
}

v1::StepMetrics Timed(double step_seconds, double comm_seconds) {
  v1::StepMetrics m = Step(1);
  m.set_step_time_seconds(step_seconds);
  m.set_communication_seconds(comm_seconds);
  return m;
}

TEST(WorkerMetricsTest, TheStragglerIsTheRankThatComputesLongestAgainstItsJobsMedian) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  // Every rank's step takes 1 s; rank 2 computes 0.75 s of it, the others 0.25 s and wait.
  metrics->RecordStep("j", 1, 0, Timed(1.0, 0.75));
  metrics->RecordStep("j", 1, 1, Timed(1.0, 0.75));
  metrics->RecordStep("j", 1, 2, Timed(1.0, 0.25));
  metrics->RecordStep("other", 1, 0, Timed(1.0, 0.0));  // another job: its own median
  std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_compute_seconds{job=\"j\",node=\"n\",rank=\"2\"} 0.75"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step_time_skew_ratio{job=\"j\",node=\"n\",rank=\"2\"} 3"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step_time_skew_ratio{job=\"j\",node=\"n\",rank=\"0\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step_time_skew_ratio{job=\"other\",node=\"n\",rank=\"0\"} 1"));
  // The straggler exits: the two left are even.
  metrics->RankExited("j", 1, 2);
  text = registry.ExposeText();
  EXPECT_THAT(text, Not(HasSubstr("ringmaster_rank_step_time_skew_ratio{job=\"j\",rank=\"2\"")));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_step_time_skew_ratio{job=\"j\",node=\"n\",rank=\"1\"} 1"));
}

TEST(WorkerMetricsTest, CheckpointsAreCountedWithTheirWriteTimeAndSize) {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> metrics = *WorkerMetrics::Create(&registry, "n");
  metrics->RecordCheckpoint("j", 1, 0, 0.3, -1, 4096, 100);
  metrics->RecordCheckpoint("j", 1, 0, -1, -1, 8192, 200);  // write time unknown: counted, not observed
  metrics->RecordCheckpoint("j", 0, 0, 5.0, -1, 1, 300);      // an older generation: ignored
  const std::string text = registry.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoints_total{job=\"j\",node=\"n\",rank=\"0\"} 2"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_bytes{job=\"j\",node=\"n\",rank=\"0\"} 8192"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_seconds_count{job=\"j\",node=\"n\",rank=\"0\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_seconds_sum{job=\"j\",node=\"n\",rank=\"0\"} 0.3"));
  metrics->RankExited("j", 1, 0);
  EXPECT_THAT(registry.ExposeText(), Not(HasSubstr("ringmaster_rank_checkpoint_bytes{")));

  absl::StatusOr<PromtoolResult> lint = RunPromtoolCheckMetrics(text);
  if (lint.status().code() == absl::StatusCode::kNotFound) GTEST_SKIP() << lint.status();
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_code, 0) << lint->output;
}

TEST(WorkerMetricsTest, CreatingTwiceOnOneRegistrySharesTheFamilies) {
  MetricsRegistry registry;
  ASSERT_TRUE(WorkerMetrics::Create(&registry, "n").ok());
  // Same definitions: the families are shared, which is allowed.
  EXPECT_TRUE(WorkerMetrics::Create(&registry, "n").ok());
}

}  // namespace
}  // namespace ringmaster::worker
