// Summaries and abridged jobs: bounded whatever a job holds, complete for a
// job within the spec's limits, and readable as a Job by an older client.
#include "coordinator/core/job_summary.h"

#include <string>

#include "absl/strings/str_format.h"
#include "common/spec_limits.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {
namespace {

v1::Job Ordinary() {
  v1::Job job;
  job.set_id("j-7");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_generation(2);
  job.set_restarts(1);
  job.set_owner("alice");
  job.set_message("running: every rank joined");
  job.mutable_submit_time()->set_seconds(100);
  job.mutable_start_time()->set_seconds(110);
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("mnist");
  spec->set_priority(5);
  (*spec->mutable_labels())["team"] = "vision";
  spec->mutable_resources()->set_nodes(2);
  spec->mutable_resources()->set_ranks_per_node(4);
  (*spec->mutable_resources()->mutable_node_selector())["rack"] = "a";
  spec->mutable_model()->mutable_mlp()->add_hidden_sizes(256);
  (*spec->mutable_env())["NCCL_DEBUG"] = "INFO";
  job.mutable_placement()->set_world_size(8);
  job.mutable_placement()->set_nodes(2);
  job.mutable_placement()->add_ranks()->set_node_id("n-1");
  job.mutable_progress()->set_step(42);
  *job.mutable_submitted()->mutable_spec() = *spec;
  return job;
}

void Fill(google::protobuf::Map<std::string, std::string>* map, int n, size_t value_bytes) {
  for (int i = 0; i < n; ++i) (*map)[absl::StrFormat("k%06d", i)] = std::string(value_bytes, 'v');
}

TEST(JobSummaryTest, CarriesWhatJobsShowsAndNothingElse) {
  const v1::JobSummary s = SummarizeJob(Ordinary());
  EXPECT_EQ(s.id(), "j-7");
  EXPECT_EQ(s.spec().name(), "mnist");
  EXPECT_EQ(s.spec().priority(), 5);
  EXPECT_EQ(s.spec().labels().at("team"), "vision");
  EXPECT_EQ(s.spec().resources().nodes(), 2);
  EXPECT_EQ(s.spec().resources().node_selector().at("rack"), "a");
  EXPECT_EQ(s.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(s.generation(), 2);
  EXPECT_EQ(s.restarts(), 1);
  EXPECT_EQ(s.owner(), "alice");
  EXPECT_EQ(s.submit_time().seconds(), 100);
  EXPECT_EQ(s.start_time().seconds(), 110);
  EXPECT_FALSE(s.has_end_time());
  EXPECT_EQ(s.placement().world_size(), 8);
  EXPECT_EQ(s.placement().ranks_size(), 0);  // never the ranks
  EXPECT_EQ(s.progress().step(), 42);
  EXPECT_EQ(s.message(), "running: every rank joined");
  EXPECT_FALSE(s.abridged());
}

// JobSummary has Job's field numbers: a client built before it reads one as
// a Job with the summary's fields and nothing else.
TEST(JobSummaryTest, ReadsAsAJobToAnOlderClient) {
  v1::Job old_view;
  ASSERT_TRUE(old_view.ParseFromString(SummarizeJob(Ordinary()).SerializeAsString()));
  EXPECT_EQ(old_view.id(), "j-7");
  EXPECT_EQ(old_view.spec().name(), "mnist");
  EXPECT_EQ(old_view.spec().labels().at("team"), "vision");
  EXPECT_EQ(old_view.spec().resources().ranks_per_node(), 4);
  EXPECT_EQ(old_view.spec().priority(), 5);
  EXPECT_EQ(old_view.placement().world_size(), 8);
  EXPECT_EQ(old_view.progress().step(), 42);
  EXPECT_EQ(old_view.owner(), "alice");
  EXPECT_FALSE(old_view.spec().has_model());
  EXPECT_EQ(old_view.spec().env_size(), 0);
  EXPECT_FALSE(old_view.has_submitted());
}

TEST(JobSummaryTest, BoundedWhateverTheJobHolds) {
  // A job at every limit: nothing left out.
  v1::Job job = Ordinary();
  Fill(job.mutable_spec()->mutable_labels(), kMaxLabels, kMaxLabelValueBytes);
  job.mutable_spec()->mutable_labels()->erase("team");
  Fill(job.mutable_spec()->mutable_resources()->mutable_node_selector(), kMaxNodeSelectorEntries,
       kMaxLabelValueBytes);
  job.mutable_spec()->mutable_resources()->mutable_node_selector()->erase("rack");
  job.set_message(std::string(5000, 'm'));
  job.set_unschedulable(std::string(5000, 'u'));
  v1::JobSummary s = SummarizeJob(job);
  EXPECT_FALSE(s.abridged());
  EXPECT_EQ(s.spec().labels_size(), kMaxLabels);
  EXPECT_EQ(s.spec().resources().node_selector_size(), kMaxNodeSelectorEntries);
  EXPECT_EQ(s.message().size(), kMaxSummaryTextBytes);
  EXPECT_EQ(s.message().substr(s.message().size() - 10), " [... cut]");
  EXPECT_EQ(s.unschedulable().size(), kMaxSummaryTextBytes);
  EXPECT_LE(s.ByteSizeLong(), kMaxJobSummaryBytes);

  // A job an older coordinator stored: 66,000 labels of 250 bytes (17 MB),
  // oversized keys and values among them.
  Fill(job.mutable_spec()->mutable_labels(), 66000, 250);
  (*job.mutable_spec()->mutable_labels())["a"] = std::string(1 << 20, 'x');
  (*job.mutable_spec()->mutable_labels())[std::string(100, 'a')] = "v";
  Fill(job.mutable_spec()->mutable_resources()->mutable_node_selector(), 5000, 250);
  job.mutable_spec()->set_name(std::string(1 << 20, 'n'));
  s = SummarizeJob(job);
  EXPECT_TRUE(s.abridged());
  EXPECT_EQ(s.spec().labels_size(), kMaxLabels);
  EXPECT_EQ(s.spec().labels().count("a"), 0u);  // too long a value: left out, not cut
  EXPECT_EQ(s.spec().labels().count("k000000"), 1u);  // the first keys kept
  EXPECT_EQ(s.spec().resources().node_selector_size(), kMaxNodeSelectorEntries);
  EXPECT_LE(s.ByteSizeLong(), kMaxJobSummaryBytes);
}

TEST(AbridgeJobTest, AJobWithinTheLimitsIsNeverCut) {
  v1::Job job = Ordinary();
  Fill(job.mutable_spec()->mutable_labels(), kMaxLabels, kMaxLabelValueBytes);
  *job.mutable_submitted()->mutable_spec() = job.spec();
  const v1::Job before = job;
  EXPECT_FALSE(AbridgeJob(&job));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(job, before));
  EXPECT_FALSE(job.abridged());
}

TEST(AbridgeJobTest, AnOversizedStoredJobIsCutToFit) {
  v1::Job job = Ordinary();
  Fill(job.mutable_spec()->mutable_labels(), 66000, 250);
  *job.mutable_submitted()->mutable_spec() = job.spec();
  ASSERT_GT(job.ByteSizeLong(), size_t{32} << 20);  // larger than a gRPC message may be
  EXPECT_TRUE(AbridgeJob(&job));
  EXPECT_TRUE(job.abridged());
  EXPECT_LE(job.ByteSizeLong(), kMaxJobAnswerBytes);
  EXPECT_FALSE(job.has_submitted());
  EXPECT_EQ(job.spec().labels_size(), kMaxLabels);
  EXPECT_EQ(job.spec().model().mlp().hidden_sizes(0), 256);  // the rest of the spec stays
  EXPECT_EQ(job.spec().env().at("NCCL_DEBUG"), "INFO");

  // Only the submitted spec too large: that alone goes.
  v1::Job twice = Ordinary();
  Fill(twice.mutable_submitted()->mutable_spec()->mutable_labels(), 20000, 250);
  EXPECT_TRUE(AbridgeJob(&twice, size_t{1} << 20));
  EXPECT_FALSE(twice.has_submitted());
  EXPECT_EQ(twice.spec().labels().at("team"), "vision");

  // A spec too large in a part without a limit of its own: reduced to its summary.
  v1::Job model = Ordinary();
  for (int i = 0; i < 2000000; ++i) model.mutable_spec()->mutable_model()->mutable_mlp()->add_hidden_sizes(9);
  EXPECT_TRUE(AbridgeJob(&model, size_t{1} << 20));
  EXPECT_LE(model.ByteSizeLong(), size_t{1} << 20);
  EXPECT_FALSE(model.spec().has_model());
  EXPECT_EQ(model.spec().name(), "mnist");
  EXPECT_EQ(model.spec().labels().at("team"), "vision");
}

TEST(CutTextTest, CutsOnACharacterWithAMarker) {
  EXPECT_EQ(CutText("short", 10), "short");
  // 10 bytes of room before the marker: the tenth would split the "é".
  const std::string cut = CutText(std::string(9, 'a') + "\xc3\xa9\xc3\xa9" + std::string(10, 'b'), 20);
  EXPECT_EQ(cut, std::string(9, 'a') + " [... cut]");
}

}  // namespace
}  // namespace ringmaster::coordinator
