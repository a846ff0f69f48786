#include "coordinator/core/straggler_metrics.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/metrics.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

v1::Job Job(v1::JobState state) {
  v1::Job job;
  job.set_id("j-1");
  job.set_state(state);
  job.set_generation(1);
  for (const char* host : {"host-a", "host-b"}) {
    v1::RankAssignment* r = job.mutable_placement()->add_ranks();
    r->set_global_rank(job.placement().ranks_size() - 1);
    r->set_hostname(host);
  }
  return job;
}

v1::JobEvent Event(v1::JobEventKind kind, int32_t rank) {
  v1::JobEvent e;
  e.set_kind(kind);
  e.set_rank(rank);
  return e;
}

class StragglerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<StragglerMetrics>> m = StragglerMetrics::Create(&registry_);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics_ = *std::move(m);
  }
  bool Exposes(const std::string& line) { return absl::StrContains(registry_.ExposeText(), line); }

  MetricsRegistry registry_;
  std::unique_ptr<StragglerMetrics> metrics_;
};

TEST_F(StragglerMetricsTest, FlaggedRanksAreCountedAndResetWhenTheyRecover) {
  metrics_->OnJobChanged(Job(v1::JOB_STATE_RUNNING), {});
  EXPECT_TRUE(Exposes("ringmaster_job_straggler_ranks{job=\"j-1\"} 0"));
  EXPECT_TRUE(Exposes("ringmaster_straggler{job=\"j-1\",node=\"host-a\",rank=\"0\"} 0"));
  EXPECT_TRUE(Exposes("ringmaster_straggler{job=\"j-1\",node=\"host-b\",rank=\"1\"} 0"));
  metrics_->OnJobChanged(Job(v1::JOB_STATE_RUNNING), {Event(v1::JOB_EVENT_KIND_STRAGGLER, 1)});
  EXPECT_TRUE(Exposes("ringmaster_job_straggler_ranks{job=\"j-1\"} 1"));
  EXPECT_TRUE(Exposes("ringmaster_straggler{job=\"j-1\",node=\"host-b\",rank=\"1\"} 1"));
  EXPECT_TRUE(Exposes("ringmaster_stragglers_flagged_total 1"));
  metrics_->OnJobChanged(Job(v1::JOB_STATE_RUNNING), {Event(v1::JOB_EVENT_KIND_STRAGGLER_RECOVERED, 1)});
  EXPECT_TRUE(Exposes("ringmaster_job_straggler_ranks{job=\"j-1\"} 0"));
  EXPECT_TRUE(Exposes("ringmaster_straggler{job=\"j-1\",node=\"host-b\",rank=\"1\"} 0"));
  EXPECT_TRUE(Exposes("ringmaster_stragglers_flagged_total 1"));
}

TEST_F(StragglerMetricsTest, ARestartClearsTheFlagsAndAnEndRemovesTheJob) {
  metrics_->OnJobChanged(Job(v1::JOB_STATE_RUNNING), {Event(v1::JOB_EVENT_KIND_STRAGGLER, 0)});
  EXPECT_TRUE(Exposes("ringmaster_straggler{job=\"j-1\",node=\"host-a\",rank=\"0\"} 1"));
  metrics_->OnJobChanged(Job(v1::JOB_STATE_RESTARTING), {});
  EXPECT_TRUE(Exposes("ringmaster_job_straggler_ranks{job=\"j-1\"} 0"));
  EXPECT_FALSE(Exposes("ringmaster_straggler{"));
  metrics_->OnJobChanged(Job(v1::JOB_STATE_SUCCEEDED), {});
  EXPECT_FALSE(Exposes("ringmaster_job_straggler_ranks{"));
}

}  // namespace
}  // namespace ringmaster::coordinator
