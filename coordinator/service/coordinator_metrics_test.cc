// The coordinator's /metrics: scraped over HTTP after some traffic, every
// family named as promised, and accepted by `promtool check metrics`.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/metrics_promtool.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringmaster::coordinator::testing {
namespace {

using CoordinatorMetricsTest = CoordinatorFixture;

bool Has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST_F(CoordinatorMetricsTest, ScrapedMetricsAreCompleteAndPassPromtool) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string job_id = StartCpuJob(worker.get(), &start);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(worker->Progress(job_id, 1, 0, 1));  // RUNNING, 2 s after the start orders
  ASSERT_TRUE(worker->Sync().has_value());
  ASSERT_TRUE(worker->ReportExit(job_id, 1, 1, 3).ok());  // a crash: restart
  const std::string queued = Submit(MakeSpec(4, 1, v1::ResourceSpec::CPU));  // no node could hold it: queued
  v1::GetJobRequest unknown;
  unknown.set_job_id("j-99");
  v1::GetJobResponse response;
  EXPECT_EQ(jobs_->GetJob(Context().get(), unknown, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  clock_.Advance(absl::Seconds(1));  // both waiting jobs have waited 1 s (the node's lease is 3 s)

  httplib::Client client("127.0.0.1", server_->metrics_port());
  client.set_read_timeout(10, 0);
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res) << "scrape failed";
  ASSERT_EQ(res->status, 200);
  const std::string text = res->body;

  for (const char* family :
       {"ringmaster_jobs", "ringmaster_queue_length", "ringmaster_queue_wait_seconds", "ringmaster_nodes",
        "ringmaster_gpus", "ringmaster_cpu_slots", "ringmaster_node_sessions", "ringmaster_scheduling_latency_seconds",
        "ringmaster_rendezvous_duration_seconds", "ringmaster_job_restarts_total", "ringmaster_rpc_latency_seconds",
        "ringmaster_rpcs_total", "ringmaster_log_lines_total", "ringmaster_queue_oldest_wait_seconds",
        "ringmaster_job_state", "ringmaster_jobs_ended_total", "ringmaster_job_unschedulable",
        "ringmaster_queue_gpu_seconds_total", "ringmaster_queue_cpu_slot_seconds_total",
        "ringmaster_job_goodput_ratio", "ringmaster_job_time_seconds"}) {
    EXPECT_TRUE(Has(text, absl::StrCat("# HELP ", family, " "))) << family;
    EXPECT_TRUE(Has(text, absl::StrCat("# TYPE ", family, " "))) << family;
  }
  EXPECT_TRUE(Has(text, "ringmaster_jobs{state=\"restarting\"} 1")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_jobs{state=\"queued\"} 1"));
  EXPECT_TRUE(Has(text, "ringmaster_jobs{state=\"succeeded\"} 0"));
  EXPECT_TRUE(Has(text, "ringmaster_queue_length 2"));  // the restarting job waits for its next generation
  EXPECT_TRUE(Has(text, "ringmaster_job_restarts_total{reason=\"RankExited\"} 1"));
  EXPECT_TRUE(Has(text, "ringmaster_job_restarts_total{reason=\"NodeLost\"} 0"));  // every cause, from the start
  EXPECT_TRUE(Has(text, "ringmaster_job_restarts_total{reason=\"NodeDrained\"} 0"));
  EXPECT_TRUE(Has(text, "ringmaster_jobs_ended_total{state=\"failed\"} 0"));
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_unschedulable{job=\"", job_id, "\"} 0"))) << text;
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_unschedulable{job=\"", queued, "\"} 1"))) << text;
  EXPECT_TRUE(Has(text, "ringmaster_queue_oldest_wait_seconds 1\n")) << text;
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_state{job=\"", job_id, "\",state=\"restarting\"} 1")));
  EXPECT_FALSE(Has(text, absl::StrCat("ringmaster_job_state{job=\"", job_id, "\",state=\"running\"}")));
  // Goodput: the crashed job has been restarting for 1 s; the queued one waited 1 s, never placed.
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_time_seconds{job=\"", job_id, "\",phase=\"restart\"} 1\n")))
      << text;
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_time_seconds{job=\"", queued, "\",phase=\"queued\"} 1\n")));
  EXPECT_TRUE(Has(text, absl::StrCat("ringmaster_job_goodput_ratio{job=\"", queued, "\"} 0\n")));
  EXPECT_TRUE(Has(text, "ringmaster_nodes{state=\"ready\"} 1"));
  EXPECT_TRUE(Has(text, "ringmaster_cpu_slots{state=\"allocated\"} 1"));  // rank 0 has not exited yet
  EXPECT_TRUE(Has(text, "ringmaster_cpu_slots{state=\"free\"} 1"));
  EXPECT_TRUE(Has(text, "ringmaster_gpus{state=\"free\"} 0"));
  EXPECT_TRUE(Has(text, "ringmaster_node_sessions 1"));
  EXPECT_TRUE(Has(text, "ringmaster_rendezvous_duration_seconds_count 1"));
  EXPECT_TRUE(Has(text, "ringmaster_rendezvous_duration_seconds_sum 2"));
  EXPECT_TRUE(Has(text, "ringmaster_queue_wait_seconds_count 1"));
  EXPECT_TRUE(Has(text, "ringmaster_rpcs_total{code=\"NOT_FOUND\",method=\"JobService/GetJob\"} 1"));
  EXPECT_TRUE(Has(text, "ringmaster_rpc_latency_seconds_count{method=\"NodeService/Register\"} 1"));
  EXPECT_FALSE(Has(text, "ringmaster_rpc_latency_seconds_count{method=\"NodeService/Session\"}"));  // a stream

  absl::StatusOr<PromtoolResult> check = RunPromtoolCheckMetrics(text);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0) << check->output;
  EXPECT_EQ(check->output, "");

  // A job that ends is counted by its final state and leaves the per-job series.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(queued);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &cancelled).ok());
  res = client.Get("/metrics");
  ASSERT_TRUE(res) << "scrape failed";
  EXPECT_TRUE(Has(res->body, "ringmaster_jobs_ended_total{state=\"cancelled\"} 1")) << res->body;
  EXPECT_FALSE(Has(res->body, absl::StrCat("ringmaster_job_unschedulable{job=\"", queued, "\"}")));
  EXPECT_FALSE(Has(res->body, absl::StrCat("ringmaster_job_goodput_ratio{job=\"", queued, "\"}")));
  EXPECT_FALSE(Has(res->body, absl::StrCat("ringmaster_job_time_seconds{job=\"", queued, "\"")));
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
