// The formatters behind tables, `describe` and `submit --follow`.

#include <sstream>

#include "absl/time/time.h"
#include "client/output.h"
#include "client/progress.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  return t;
}

constexpr int64_t kT0 = 1795000000;  // 2026-11-18T11:06:40Z

v1::Job RunningJob() {
  v1::Job job;
  job.set_id("j-42");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.mutable_spec()->mutable_data()->set_batch_size(128);
  v1::StepMetrics* p = job.mutable_progress();
  p->set_step(120);
  p->set_total_steps(1000);
  p->set_loss(0.43119);
  p->set_samples_per_second(1234.56);
  p->set_step_time_seconds(0.25);
  return job;
}

TEST(TableTest, AlignsColumnsWithoutPaddingTheLast) {
  Table table({"ID", "NAME", "STATE"});
  table.AddRow({"j-1", "a-long-name", "RUNNING"});
  table.AddRow({"j-22", "b", "QUEUED"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "ID    NAME         STATE\n"
            "j-1   a-long-name  RUNNING\n"
            "j-22  b            QUEUED\n");
}

TEST(YamlTest, ADocumentInBlockStyleThatReadsBackAsTheJson) {
  std::ostringstream out;
  PrintJsonAsYaml(R"({"name":"a: b","steps":"100","on":"yes","count":3,"ok":false,"when":"2026-11-18T11:06:40Z",)"
                  R"("empty":"","none":{},"list":[],"shards":[{},{"path":"/x"}],"multi":"two\nlines","nil":null})",
                  out);
  EXPECT_EQ(out.str(),
            "---\n"
            "name: \"a: b\"\n"
            "steps: \"100\"\n"
            "\"on\": \"yes\"\n"
            "count: 3\n"
            "ok: false\n"
            "when: \"2026-11-18T11:06:40Z\"\n"
            "empty: \"\"\n"
            "none: {}\n"
            "list: []\n"
            "shards:\n"
            "  - {}\n"
            "  - path: /x\n"
            "multi: \"two\\nlines\"\n"
            "nil: ~\n");
}

TEST(YamlTest, MessagesAndFormats) {
  v1::Job job;
  job.set_id("j-1");
  job.set_generation(2);
  std::ostringstream out;
  PrintMessage(job, OutputFormat::kYaml, out);
  PrintMessage(job, OutputFormat::kJson, out);
  EXPECT_EQ(out.str(), "---\nid: j-1\ngeneration: \"2\"\n{\"id\":\"j-1\",\"generation\":\"2\"}\n");
  EXPECT_TRUE(IsStructured(OutputFormat::kYaml));
  EXPECT_TRUE(IsStructured(OutputFormat::kJson));
  EXPECT_FALSE(IsStructured(OutputFormat::kWide));
  EXPECT_FALSE(IsStructured(OutputFormat::kTable));

  out.str("");
  PrintJsonAsYaml("{not json", out);  // printed as it is
  EXPECT_EQ(out.str(), "---\n{not json\n");
}

TEST(FormatTest, LabelsSortedByKey) {
  google::protobuf::Map<std::string, std::string> labels;
  EXPECT_EQ(FormatLabels(labels), "-");
  labels["team"] = "nlp";
  labels["a.b"] = "2";
  labels["a"] = "1";
  EXPECT_EQ(FormatLabels(labels), "a=1,a.b=2,team=nlp");
}

TEST(FormatTest, StatesTimesAgesDurationsSizes) {
  EXPECT_EQ(StateName(v1::JOB_STATE_RESTARTING), "RESTARTING");
  EXPECT_EQ(NodeStateName(v1::NODE_STATE_LOST), "LOST");
  EXPECT_EQ(EventKindName(v1::JOB_EVENT_KIND_RANK_EXITED), "RANK_EXITED");
  EXPECT_EQ(FormatTimestamp(At(kT0)), "2026-11-18T11:06:40Z");
  EXPECT_EQ(FormatTimestamp(google::protobuf::Timestamp()), "-");
  const absl::Time now = absl::FromUnixSeconds(kT0);
  EXPECT_EQ(FormatAge(At(kT0 - 45), now), "45s");
  EXPECT_EQ(FormatAge(At(kT0 - 12 * 60 - 59), now), "12m");
  EXPECT_EQ(FormatAge(At(kT0 - 3 * 3600), now), "3h");
  EXPECT_EQ(FormatAge(At(kT0 - 5 * 86400 - 10), now), "5d");
  EXPECT_EQ(FormatAge(At(kT0 + 10), now), "0s");
  EXPECT_EQ(FormatDurationShort(absl::Seconds(200)), "3m20s");
  EXPECT_EQ(FormatDurationShort(absl::Seconds(3900)), "1h05m");
  EXPECT_EQ(FormatDurationShort(absl::Hours(51)), "2d03h");
  EXPECT_EQ(FormatDurationShort(absl::Seconds(-3)), "0s");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 30), "5.0 GiB");
}

TEST(FormatTest, RanksFromPlacementElseSpec) {
  v1::Job job;
  EXPECT_EQ(FormatRanks(job), "-");
  job.mutable_spec()->mutable_resources()->set_nodes(2);
  job.mutable_spec()->mutable_resources()->set_ranks_per_node(4);
  EXPECT_EQ(FormatRanks(job), "8");
  job.mutable_placement()->set_world_size(4);  // elastic: fewer nodes now
  EXPECT_EQ(FormatRanks(job), "4");
}

TEST(ProgressLineTest, RunningShowsStepLossThroughputAndEta) {
  v1::Job job = RunningJob();
  // 880 steps left x 0.25 s = 220 s.
  EXPECT_EQ(FormatProgressLine(job), "step 120/1000 (12%)  loss 0.4312  1234.6 samples/s  ETA 3m40s");
}

TEST(ProgressLineTest, LossScaleOnlyWithFp16) {
  v1::Job job = RunningJob();
  job.mutable_progress()->set_loss_scale(65536);
  EXPECT_EQ(FormatProgressLine(job),
            "step 120/1000 (12%)  loss 0.4312  1234.6 samples/s  loss scale 65536  ETA 3m40s");
}

TEST(ProgressLineTest, EtaFromThroughputAndBatchWithoutStepTime) {
  v1::Job job = RunningJob();
  job.mutable_progress()->set_step_time_seconds(0);
  job.mutable_progress()->set_samples_per_second(1280);  // 10 steps/s
  EXPECT_EQ(EstimateRemaining(job), absl::Seconds(88));
  EXPECT_EQ(FormatProgressLine(job), "step 120/1000 (12%)  loss 0.4312  1280.0 samples/s  ETA 1m28s");
  job.mutable_progress()->set_samples_per_second(0);
  EXPECT_EQ(FormatProgressLine(job), "step 120/1000 (12%)  loss 0.4312  0.0 samples/s");
}

TEST(ProgressLineTest, BeforeRunningShowsStateAndMessage) {
  v1::Job job;
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_message("waiting for 2 nodes with 8 GPUs");
  EXPECT_EQ(FormatProgressLine(job), "QUEUED: waiting for 2 nodes with 8 GPUs");
  v1::Job restarting = RunningJob();
  restarting.set_state(v1::JOB_STATE_RESTARTING);
  restarting.set_message("rank 3 exited with signal 9 on node-7");
  EXPECT_EQ(FormatProgressLine(restarting),
            "RESTARTING: rank 3 exited with signal 9 on node-7 (step 120/1000 (12%))");
}

TEST(FinalLineTest, SucceededWithTestAccuracyAndLoss) {
  v1::Job job = RunningJob();
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  *job.mutable_start_time() = At(kT0);
  *job.mutable_end_time() = At(kT0 + 312);
  job.mutable_progress()->set_step(1000);
  job.mutable_progress()->set_eval_step(1000);
  job.mutable_progress()->set_eval_accuracy(0.89123);
  job.mutable_progress()->set_eval_loss(0.30119);
  EXPECT_EQ(FormatFinalLine(job, absl::FromUnixSeconds(kT0 + 999)),
            "job j-42 SUCCEEDED after 5m12s at step 1000/1000 (100%); test accuracy 89.12%, test loss 0.3012");
  job.mutable_progress()->set_eval_accuracy(0);  // GPT: loss only
  EXPECT_EQ(FormatFinalLine(job, absl::FromUnixSeconds(kT0 + 999)),
            "job j-42 SUCCEEDED after 5m12s at step 1000/1000 (100%); test loss 0.3012");
}

TEST(FinalLineTest, FailedCarriesTheMessage) {
  v1::Job job;
  job.set_id("j-7");
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_message("rank 1 exited with status 3 (out of restarts)");
  *job.mutable_submit_time() = At(kT0);
  EXPECT_EQ(FormatFinalLine(job, absl::FromUnixSeconds(kT0 + 61)),
            "job j-7 FAILED after 1m01s: rank 1 exited with status 3 (out of restarts)");
}

TEST(ProgressPrinterTest, PipeGetsALinePerChange) {
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/false);
  printer.Update("step 1/10");
  printer.Update("step 1/10");
  printer.Note("event");
  printer.Update("step 2/10");
  printer.Finish();
  EXPECT_EQ(out.str(), "step 1/10\nevent\nstep 2/10\n");
}

TEST(ProgressPrinterTest, TerminalRewritesTheLineInPlace) {
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/true);
  printer.Update("step 1/10");
  printer.Update("step 2/10");
  printer.Note("event");
  printer.Finish();
  EXPECT_EQ(out.str(),
            "\rstep 1/10\x1b[K"
            "\rstep 2/10\x1b[K"
            "\r\x1b[K" "event\n" "step 2/10\x1b[K"
            "\n");
}

}  // namespace
}  // namespace ringmaster::client
