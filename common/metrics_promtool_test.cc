// Prometheus' own checker accepts what the registry exposes, and rejects what
// it should reject (so a pass means something).

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/metrics_promtool.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

// A registry with one of everything, named as Ringmaster names its metrics.
void FillRegistry(MetricsRegistry* registry) {
  prometheus::Family<prometheus::Counter>* steps =
      *registry->AddCounter("ringmaster_trainer_steps_total", "Optimizer steps taken.");
  steps->Add({{"job", "j1"}, {"rank", "0"}}).Increment(120);
  steps->Add({{"job", "j1"}, {"rank", "1"}}).Increment(118);
  (*registry->AddCounter("ringmaster_coordinator_jobs_submitted_total", "Jobs submitted."))->Add({}).Increment(3);
  prometheus::Family<prometheus::Gauge>* loss = *registry->AddGauge("ringmaster_trainer_loss", "Training loss, last step.");
  loss->Add({{"job", "j1"}, {"rank", "0"}}).Set(0.6931471805599453);
  loss->Add({{"job", "j1"}, {"rank", "1"}}).Set(std::numeric_limits<double>::quiet_NaN());
  (*registry->AddGauge("ringmaster_trainer_device_memory_bytes", "Device memory in use."))
      ->Add({{"node", "dgx-01"}})
      .Set(3.2e10);
  prometheus::Family<prometheus::Histogram>* step =
      *registry->AddHistogram("ringmaster_trainer_step_seconds", "Wall time of one training step.");
  for (double v : {0.004, 0.2, 0.2, 3.0, 30.0}) step->Add({{"job", "j1"}, {"rank", "0"}}, DefaultSecondsBuckets()).Observe(v);
  step->Add({{"job", "j1"}, {"rank", "1"}}, DefaultSecondsBuckets()).Observe(0.07);
  (*registry->AddHistogram("ringmaster_rpc_payload_bytes", "RPC payload size."))
      ->Add({}, *ExponentialBuckets(64, 4, 6))
      .Observe(1000);
  (*registry->AddGauge("ringmaster_job_info", "Job metadata; the value is 1."))
      ->Add({{"job", "j1"}, {"spec", "C:\\specs\\\"gpt2\".yaml\nline two"}})
      .Set(1);
  (*registry->AddCallbackGauges("ringmaster_coordinator_queue_length", "Jobs waiting."))->Set({}, [] { return 4.0; });
}

TEST(PromtoolTest, AcceptsTheRegistryExposition) {
  MetricsRegistry registry;
  FillRegistry(&registry);
  const std::string text = registry.ExposeText();
  // The hard cases are really in there.
  ASSERT_NE(text.find("spec=\"C:\\\\specs\\\\\\\"gpt2\\\".yaml\\nline two\""), std::string::npos)
      << text;
  ASSERT_NE(text.find("le=\"+Inf\""), std::string::npos);
  ASSERT_NE(text.find(" Nan\n"), std::string::npos) << "prometheus-cpp's spelling, which Prometheus parses";

  absl::StatusOr<PromtoolResult> result = RunPromtoolCheckMetrics(text);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0) << result->output << "\n--- input ---\n" << text;
  EXPECT_EQ(result->output, "") << "\n--- input ---\n" << text;
}

TEST(PromtoolTest, FlagsACounterWithoutTotal) {
  // The registry refuses this name, so the bad input is written by hand.
  ASSERT_EQ(MetricsRegistry().AddCounter("ringmaster_steps", "Steps.").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PromtoolResult> result = RunPromtoolCheckMetrics(
      "# HELP ringmaster_steps Steps.\n# TYPE ringmaster_steps counter\nringmaster_steps 1\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 3) << result->output;
  EXPECT_NE(result->output.find("ringmaster_steps counter metrics should have \"_total\" suffix"),
            std::string::npos)
      << result->output;
}

TEST(PromtoolTest, RejectsAnUnescapedQuoteInALabelValue) {
  absl::StatusOr<PromtoolResult> result = RunPromtoolCheckMetrics(
      "# HELP ringmaster_x_bytes X.\n# TYPE ringmaster_x_bytes gauge\n"
      "ringmaster_x_bytes{path=\"a\"b\"} 1\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1) << result->output;
  EXPECT_NE(result->output.find("text format parsing error in line 3"), std::string::npos)
      << result->output;
}

}  // namespace
}  // namespace ringmaster
