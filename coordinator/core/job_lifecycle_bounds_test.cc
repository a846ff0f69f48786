// Bounded answers from the job managers (issue #27, item 4): a job's
// timeline stays bounded through thousands of checkpoint commits and is read
// in pages; what a user or a rank sends is cut before it is recorded.
// (ListJobs' pages by count and bytes: job_views_test.cc.)
#include <string>
#include <vector>

#include "coordinator/core/job_controller.h"
#include "coordinator/core/job_summary.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobLifecycleBoundsTest : public JobControllerFixture {};

// A job that commits a checkpoint every step for 10,000 steps: its timeline
// keeps the first commit and the newest 32, the rest counted.
TEST_F(JobLifecycleBoundsTest, ThousandsOfCommitsKeepABoundedTimeline) {
  AddNode("host-a", 0, 1);
  const std::string job = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  RunToRunning(job);
  constexpr int kCommits = 10000;
  for (int step = 1; step <= kCommits; ++step) {
    ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(job, step)).ok()) << step;
  }
  const std::vector<v1::JobEvent> events = Events(job);
  EXPECT_LE(events.size(), 40u);
  int64_t commits = 0, kept = 0;
  for (const v1::JobEvent& e : events) {
    if (e.kind() != v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED) continue;
    ++kept;
    commits += 1 + e.folded();
  }
  EXPECT_EQ(kept, 1 + kEventsKeptPerKind);
  EXPECT_EQ(commits, kCommits);

  // GetJob's pages: the newest first, then older ones by token, each bounded.
  EventPageQuery query;
  query.max_events = 10;
  absl::StatusOr<EventPage> page = controller_->lifecycle().GetEventPage(job, query);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->events.size(), 10u);
  EXPECT_TRUE(page->more);
  EXPECT_EQ(page->events.back().sequence(), events.back().sequence());
  std::vector<v1::JobEvent> walked = page->events;
  while (page->more) {
    query.before_sequence = page->events.front().sequence();
    page = controller_->lifecycle().GetEventPage(job, query);
    ASSERT_TRUE(page.ok());
    walked.insert(walked.begin(), page->events.begin(), page->events.end());
  }
  ASSERT_EQ(walked.size(), events.size());
  for (size_t i = 0; i < walked.size(); ++i) EXPECT_EQ(walked[i].sequence(), events[i].sequence());
  EXPECT_EQ(controller_->lifecycle().GetEventPage("j-404", query).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobLifecycleBoundsTest, ACancelReasonIsBounded) {
  const std::string job = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  absl::StatusOr<CancelResult> refused = controller_->lifecycle().Cancel(job, std::string(1025, 'r'));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "reason: at most 1024 bytes, got 1025");
  EXPECT_EQ(State(job), v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(controller_->lifecycle().Cancel(job, std::string(1024, 'r')).ok());
  EXPECT_EQ(State(job), v1::JOB_STATE_CANCELLED);
}

// What a worker or a rank reports is recorded cut: a start failure of a
// megabyte (a worker quoting what it was given) becomes an event reason and
// a job message of at most kMaxJobTextBytes (and so every answer carrying them).
TEST_F(JobLifecycleBoundsTest, AReportIsCutBeforeItIsRecorded) {
  const std::string node = AddNode("host-a", 0, 1);
  const std::string job = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  controller_->ScheduleNow();
  ASSERT_EQ(State(job), v1::JOB_STATE_STARTING);
  StartFailure failure;
  failure.node_id = node;
  failure.job_id = job;
  failure.generation = MustGet(job).generation();
  failure.error = std::string(1 << 20, 'e');
  failure.unrecoverable = true;
  ASSERT_TRUE(controller_->lifecycle().ReportStartFailure(failure).ok());
  const v1::Job after = MustGet(job);
  EXPECT_EQ(after.state(), v1::JOB_STATE_FAILED);
  EXPECT_LE(after.message().size(), kMaxJobTextBytes);
  EXPECT_EQ(after.message().substr(after.message().size() - 10), " [... cut]");
  const std::vector<v1::JobEvent> events = Events(job);
  for (const v1::JobEvent& e : events) EXPECT_LE(e.reason().size(), kMaxJobTextBytes) << e.kind();
  EXPECT_EQ(events.back().reason().substr(events.back().reason().size() - 10), " [... cut]");
}

}  // namespace
}  // namespace ringmaster::coordinator
