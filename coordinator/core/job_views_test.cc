// What readers see (JobViews): ListJobs pages by count and by bytes, newest
// first, with queue positions and filters; per-rank progress; the finished
// jobs retention looks at.
#include "coordinator/core/job_views.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "common/spec_limits.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

// Job j-<seq>, submitted <seq>th.
v1::Job MakeJob(int seq, v1::JobState state, int32_t priority = 0) {
  v1::Job job;
  job.set_id(absl::StrCat("j-", seq));
  job.set_state(state);
  job.mutable_spec()->set_priority(priority);
  return job;
}

void Publish(JobViews& views, const v1::Job& job) {
  int64_t seq = 0;
  ASSERT_TRUE(absl::SimpleAtoi(job.id().substr(2), &seq));
  views.Publish(job, seq);
}

std::vector<std::string> Ids(const ListJobsPage& page) {
  std::vector<std::string> ids;
  for (const v1::JobSummary& s : page.jobs) ids.push_back(s.id());
  return ids;
}

// Every label and node selector at its limit: a summary of about 30 KiB.
v1::Job Heavy(int seq) {
  v1::Job job = MakeJob(seq, v1::JOB_STATE_QUEUED);
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_name(absl::StrCat("heavy-", seq));
  for (int k = 0; k < kMaxLabels; ++k) {
    (*spec.mutable_labels())[absl::StrFormat("label-%02d", k)] = std::string(kMaxLabelValueBytes, 'v');
  }
  for (int k = 0; k < kMaxNodeSelectorEntries; ++k) {
    (*spec.mutable_resources()->mutable_node_selector())[absl::StrFormat("sel-%02d", k)] =
        std::string(kMaxLabelValueBytes, 's');
  }
  return job;
}

TEST(JobViewsTest, ListJobsPagesBySizeAsWellAsCount) {
  JobViews views;
  constexpr int kJobs = 60;
  for (int i = 1; i <= kJobs; ++i) Publish(views, Heavy(i));
  ListJobsQuery query;
  query.page_size = 1000;
  std::vector<std::string> seen;
  int pages = 0;
  do {
    absl::StatusOr<ListJobsPage> page = views.ListJobs(query);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    size_t bytes = 0;
    for (const v1::JobSummary& s : page->jobs) {
      bytes += s.ByteSizeLong();
      seen.push_back(s.id());
      EXPECT_EQ(s.spec().labels_size(), kMaxLabels);
      EXPECT_FALSE(s.abridged());
    }
    EXPECT_LE(bytes, kMaxListJobsPageBytes);
    EXPECT_LT(page->jobs.size(), static_cast<size_t>(kJobs));  // the bytes stop it, not the count
    query.page_token = page->next_page_token;
  } while (!query.page_token.empty());
  EXPECT_GE(pages, 2);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(seen[i], absl::StrCat("j-", kJobs - i));  // newest first, once each
}

TEST(JobViewsTest, PagesByCountNewestFirstUntilTheTokenIsEmpty) {
  JobViews views;
  for (int i = 1; i <= 5; ++i) Publish(views, MakeJob(i, v1::JOB_STATE_SUCCEEDED));
  ListJobsQuery query;
  query.page_size = 2;
  std::vector<std::vector<std::string>> pages;
  do {
    absl::StatusOr<ListJobsPage> page = views.ListJobs(query);
    ASSERT_TRUE(page.ok()) << page.status();
    pages.push_back(Ids(*page));
    query.page_token = page->next_page_token;
  } while (!query.page_token.empty());
  EXPECT_EQ(pages, (std::vector<std::vector<std::string>>{{"j-5", "j-4"}, {"j-3", "j-2"}, {"j-1"}}));
  EXPECT_EQ(views.ListJobs({})->jobs.size(), 5u);  // page_size 0: up to 100
}

TEST(JobViewsTest, FiltersByStateAndLabels) {
  JobViews views;
  v1::Job a = MakeJob(1, v1::JOB_STATE_RUNNING);
  (*a.mutable_spec()->mutable_labels())["team"] = "a";
  v1::Job b = MakeJob(2, v1::JOB_STATE_QUEUED);
  (*b.mutable_spec()->mutable_labels())["team"] = "b";
  v1::Job c = MakeJob(3, v1::JOB_STATE_RUNNING);
  (*c.mutable_spec()->mutable_labels())["team"] = "b";
  for (const v1::Job& job : {a, b, c}) Publish(views, job);
  ListJobsQuery running;
  running.states = {v1::JOB_STATE_RUNNING};
  EXPECT_EQ(Ids(*views.ListJobs(running)), (std::vector<std::string>{"j-3", "j-1"}));
  ListJobsQuery team_b;
  team_b.label_selector = {{"team", "b"}};
  EXPECT_EQ(Ids(*views.ListJobs(team_b)), (std::vector<std::string>{"j-3", "j-2"}));
  team_b.states = {v1::JOB_STATE_QUEUED};
  EXPECT_EQ(Ids(*views.ListJobs(team_b)), (std::vector<std::string>{"j-2"}));
  ListJobsQuery missing;
  missing.label_selector = {{"owner", "x"}};
  EXPECT_TRUE(views.ListJobs(missing)->jobs.empty());
}

TEST(JobViewsTest, RefusesABadPageSizeOrAForeignToken) {
  JobViews views;
  ListJobsQuery query;
  query.page_size = 1001;
  EXPECT_EQ(views.ListJobs(query).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(views.ListJobs(query).status().message(), "page_size: must be in [0, 1000], got 1001");
  query.page_size = -1;
  EXPECT_EQ(views.ListJobs(query).status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string token : {"abc", "0", "-3"}) {
    ListJobsQuery foreign;
    foreign.page_token = token;
    EXPECT_EQ(views.ListJobs(foreign).status().message(), "page_token: not a token ListJobs returned") << token;
  }
}

TEST(JobViewsTest, SummariesCarryTheirQueuePosition) {
  JobViews views;
  Publish(views, MakeJob(1, v1::JOB_STATE_QUEUED, 0));
  Publish(views, MakeJob(2, v1::JOB_STATE_QUEUED, 5));
  Publish(views, MakeJob(3, v1::JOB_STATE_RESTARTING, 0));  // a restart waits in its place
  Publish(views, MakeJob(4, v1::JOB_STATE_RUNNING, 9));
  auto positions = [&] {
    std::map<std::string, int32_t> out;
    const ListJobsPage page = *views.ListJobs({});
    for (const v1::JobSummary& s : page.jobs) out[s.id()] = s.queue_position();
    return out;
  };
  EXPECT_EQ(positions(), (std::map<std::string, int32_t>{{"j-1", 2}, {"j-2", 1}, {"j-3", 3}, {"j-4", 0}}));
  Publish(views, MakeJob(2, v1::JOB_STATE_CANCELLED, 5));
  EXPECT_EQ(positions(), (std::map<std::string, int32_t>{{"j-1", 1}, {"j-2", 0}, {"j-3", 2}, {"j-4", 0}}));
  // A filtered page still counts every waiting job.
  ListJobsQuery only_restarting;
  only_restarting.states = {v1::JOB_STATE_RESTARTING};
  EXPECT_EQ(views.ListJobs(only_restarting)->jobs[0].queue_position(), 2);
}

TEST(JobViewsTest, ProgressIsKeptPerRankAndRankZerosIsTheJobs) {
  JobViews views;
  Publish(views, MakeJob(1, v1::JOB_STATE_RUNNING));
  v1::StepMetrics step7, step8;
  step7.set_step(7);
  step8.set_step(8);
  views.PublishProgress("j-1", 0, step7);
  views.PublishProgress("j-1", 1, step8);
  EXPECT_EQ(views.GetJob("j-1")->progress().step(), 7);
  EXPECT_EQ(views.ListJobs({})->jobs[0].progress().step(), 7);
  std::map<int32_t, v1::StepMetrics> ranks = *views.GetRankProgress("j-1");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].step(), 8);
  // A new publish of the job keeps the ranks' progress; a new generation clears it.
  Publish(views, MakeJob(1, v1::JOB_STATE_RUNNING));
  EXPECT_EQ(views.GetRankProgress("j-1")->size(), 2u);
  views.ClearProgress("j-1");
  EXPECT_TRUE(views.GetRankProgress("j-1")->empty());
}

TEST(JobViewsTest, UnknownJobsAreNotFound) {
  JobViews views;
  EXPECT_EQ(views.GetJob("j-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(views.GetJob("j-9").status().message(), "job j-9 not found");
  EXPECT_EQ(views.GetRankProgress("j-9").status().code(), absl::StatusCode::kNotFound);
}

TEST(JobViewsTest, FinishedListsTerminalJobsUntilErased) {
  JobViews views;
  v1::Job done = MakeJob(1, v1::JOB_STATE_SUCCEEDED);
  *done.mutable_end_time() = ToProtoTime(absl::FromUnixSeconds(1000));
  Publish(views, done);
  Publish(views, MakeJob(2, v1::JOB_STATE_RUNNING));
  Publish(views, MakeJob(3, v1::JOB_STATE_FAILED));
  std::vector<FinishedJob> finished = views.Finished();
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_EQ(finished[0].id, "j-1");
  EXPECT_EQ(finished[0].ended, absl::FromUnixSeconds(1000));
  EXPECT_EQ(finished[0].submit_seq, 1);
  EXPECT_EQ(finished[1].id, "j-3");
  views.Erase({"j-1", "j-3"});
  EXPECT_TRUE(views.Finished().empty());
  EXPECT_EQ(views.GetJob("j-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Ids(*views.ListJobs({})), std::vector<std::string>{"j-2"});
}

}  // namespace
}  // namespace ringmaster::coordinator
