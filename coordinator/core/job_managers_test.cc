// The split of the JobController into its managers (job_lifecycle.h,
// dispatcher.h, node_reconciler.h): a job's transition holds only that job's
// lock, so readers and other jobs go on; a job cancelled while a pass places
// it gets its slots back; a node that registers again keeps the slots of the
// ranks it still runs. Retention deletes finished jobs by age and count,
// everywhere they are kept, and survives a restart.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

constexpr auto kPatience = std::chrono::seconds(20);

// Once armed for a job, blocks inside that job's next OnJobChanged until
// released: the job's lock stays held, as during a slow store write.
class BlockingListener : public JobListener {
 public:
  void Arm(const std::string& job_id) {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = job_id;
  }
  bool WaitBlocked() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return blocked_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>&) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (armed_.empty() || job.id() != armed_ || blocked_) return;
    blocked_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, kPatience, [&] { return released_; });
  }
  void OnStartRanks(const StartOrder&) override {}
  void OnStopRanks(const StopOrder&) override {}

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string armed_;
  bool blocked_ = false;
  bool released_ = false;
};

class JobManagersTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    JobControllerFixture::SetUp();
    controller_->AddListener(&blocking_);
  }
  BlockingListener blocking_;
};

// True when `f` finished within kPatience (the future is waited for either way).
template <typename F>
bool FinishesWhileBlocked(std::future<F>& f) {
  return f.wait_for(kPatience) == std::future_status::ready;
}

TEST_F(JobManagersTest, AJobsTransitionHoldsOnlyThatJobsLock) {
  AddNode("h1", 4);
  AddNode("h2", 4);
  const std::string a = MustSubmit(MakeSpec(1, 2));
  const std::string b = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  RunToRunning(a);
  RunToRunning(b);

  blocking_.Arm(a);
  auto cancel = std::async(std::launch::async, [&] { return controller_->lifecycle().Cancel(a, "test").status(); });
  ASSERT_TRUE(blocking_.WaitBlocked()) << "the cancel never reached its announcement";

  // Job a is mid-transition, its lock held. Everything else goes on.
  auto get_a = std::async(std::launch::async, [&] { return controller_->views().GetJob(a); });
  auto get_b = std::async(std::launch::async, [&] { return controller_->views().GetJob(b); });
  auto list = std::async(std::launch::async, [&] { return controller_->views().ListJobs({}); });
  auto progress_a = std::async(std::launch::async, [&] { return controller_->views().GetRankProgress(a).status(); });
  v1::StepMetrics step;
  step.set_step(7);
  auto report_b =
      std::async(std::launch::async, [&] { return controller_->lifecycle().ReportProgress(b, 1, 0, step); });
  auto submit = std::async(std::launch::async, [&] { return controller_->Submit(MakeSpec(1, 1), {}); });
  auto register_node = std::async(std::launch::async, [&] {
    return controller_->reconciler().RegisterNode(testing::MakeNode("h3", 2, 0, {}), {}).status();
  });
  auto events_b = std::async(std::launch::async, [&] { return controller_->lifecycle().GetEvents(b, 0).status(); });

  const bool all_done = FinishesWhileBlocked(get_a) && FinishesWhileBlocked(get_b) && FinishesWhileBlocked(list) &&
                        FinishesWhileBlocked(progress_a) && FinishesWhileBlocked(report_b) &&
                        FinishesWhileBlocked(submit) && FinishesWhileBlocked(register_node) &&
                        FinishesWhileBlocked(events_b);
  const bool cancel_still_blocked = cancel.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  blocking_.Release();
  ASSERT_TRUE(all_done) << "a call waited for another job's transition";
  EXPECT_TRUE(cancel_still_blocked);
  EXPECT_TRUE(cancel.get().ok());

  // What the readers saw is what was published: a's cancel is stored and
  // published before it is announced.
  ASSERT_TRUE(get_a.get().ok());
  absl::StatusOr<v1::Job> seen_b = get_b.get();
  ASSERT_TRUE(seen_b.ok());
  EXPECT_EQ(seen_b->state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(list.get().ok());
  absl::StatusOr<bool> over = report_b.get();
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_FALSE(*over);
  EXPECT_EQ(MustGet(b).progress().step(), 7);
  EXPECT_TRUE(submit.get().ok());
  EXPECT_TRUE(register_node.get().ok());
  EXPECT_TRUE(events_b.get().ok());
  EXPECT_EQ(State(a), v1::JOB_STATE_CANCELLED);
}

// Cancels one job from inside another's announcement (a test-only breach of
// the listener rules: the only way to cancel between a pass's decision and
// its placement, deterministically).
class CancelOnPlaced : public JobListener {
 public:
  CancelOnPlaced(JobController** controller, std::string trigger, std::string victim)
      : controller_(controller), trigger_(std::move(trigger)), victim_(std::move(victim)) {}
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>&) override {
    if (done_ || job.id() != trigger_ || job.state() != v1::JOB_STATE_PLACED) return;
    done_ = true;
    cancelled_ = (*controller_)->lifecycle().Cancel(victim_, "cancelled during the pass").status();
  }
  void OnStartRanks(const StartOrder&) override {}
  void OnStopRanks(const StopOrder&) override {}
  absl::Status cancelled() const { return cancelled_; }

 private:
  JobController** controller_;
  std::string trigger_, victim_;
  bool done_ = false;
  absl::Status cancelled_ = absl::UnknownError("never triggered");
};

TEST_F(JobManagersTest, AJobCancelledWhileAPassPlacesItGetsItsSlotsBack) {
  const std::string node = AddNode("h1", 4);
  const std::string first = MustSubmit(MakeSpec(1, 2));   // j-1: placed first
  const std::string second = MustSubmit(MakeSpec(1, 2));  // j-2: decided in the same pass
  JobController* controller = controller_.get();
  CancelOnPlaced canceller(&controller, first, second);
  controller_->AddListener(&canceller);
  controller_->ScheduleNow();
  ASSERT_TRUE(canceller.cancelled().ok()) << canceller.cancelled();
  EXPECT_EQ(State(first), v1::JOB_STATE_STARTING);
  EXPECT_EQ(State(second), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(MustGet(second).generation(), 0) << "no generation began";
  for (const RankSlot& slot : nodes_->SlotsOn(node)) EXPECT_EQ(slot.job_id, first) << "rank " << slot.global_rank;
  EXPECT_EQ(nodes_->SlotsOn(node).size(), 2u);
}

TEST_F(JobManagersTest, ANodeBackFromLostHoldsTheSlotsOfRanksItStillRunsBeforeAnyPlacement) {
  const std::string node = AddNode("h1", 2);
  const std::string job = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  RunToRunning(job);
  // h1 misses its heartbeats: lost, its slots released, the job restarting.
  AdvanceWithHeartbeats(absl::Seconds(20), {node});
  controller_->Tick();
  ASSERT_EQ(State(job), v1::JOB_STATE_RESTARTING);
  ASSERT_TRUE(nodes_->SlotsOn(node).empty());
  // Its worker was only cut off: it registers again with both ranks of
  // generation 1 still running. Their GPUs are held from the registration
  // on, and they are told to stop.
  absl::StatusOr<NodeRegistrationResult> back =
      controller_->reconciler().RegisterNode(testing::MakeNode("h1", 2), {{job, 1, 0}, {job, 1, 1}});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->stop.size(), 2u);
  EXPECT_EQ(nodes_->SlotsOn(node).size(), 2u);
  // So the next pass cannot start generation 2 on GPUs still in use.
  controller_->ScheduleNow();
  EXPECT_EQ(State(job), v1::JOB_STATE_RESTARTING);
  Exit(job, 0, 0, "", /*stopped_by_worker=*/true, /*generation=*/1);
  Exit(job, 1, 0, "", /*stopped_by_worker=*/true, /*generation=*/1);
  controller_->ScheduleNow();
  EXPECT_EQ(State(job), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(job).generation(), 2);
}

TEST_F(JobControllerFixture, RetentionDeletesFinishedJobsByAgeAndCount) {
  AddNode("h1", 4);
  std::vector<std::string> ended;
  for (int i = 0; i < 4; ++i) {  // ended 40, 30, 20 and 10 hours ago
    ended.push_back(MustSubmit(MakeSpec(1, 1)));
    ASSERT_TRUE(controller_->lifecycle().Cancel(ended.back(), "done").ok());
    clock_.Advance(absl::Hours(10));
  }
  const std::string running = MustSubmit(MakeSpec(1, 1));
  RunToRunning(running);
  clock_.Advance(absl::Hours(1000));  // older than any limit, but not finished
  const absl::Time now = clock_.Now() - absl::Hours(1000);

  // Nothing past the limits: nothing removed.
  auto none = controller_->lifecycle().ExpireFinished(now, {absl::Hours(100), 10});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // Older than 25 hours: the first two; beyond the newest one: the third too.
  auto expired = controller_->lifecycle().ExpireFinished(now, {absl::Hours(25), 1});
  ASSERT_TRUE(expired.ok()) << expired.status();
  std::sort(expired->begin(), expired->end());
  EXPECT_EQ(*expired, (std::vector<std::string>{ended[0], ended[1], ended[2]}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(controller_->views().GetJob(ended[i]).status().code(), absl::StatusCode::kNotFound) << ended[i];
  }
  EXPECT_TRUE(controller_->views().GetJob(ended[3]).ok());
  EXPECT_TRUE(controller_->views().GetJob(running).ok());
  auto page = controller_->views().ListJobs(ListJobsQuery{});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 2u);

  // Gone from the store too: a restarted coordinator does not bring them back.
  Restart();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(controller_->views().GetJob(ended[i]).ok()) << ended[i];
  EXPECT_TRUE(controller_->views().GetJob(ended[3]).ok());
  EXPECT_TRUE(controller_->lifecycle().GetEvents(ended[3], 0).ok());
  auto events = store_->LoadEvents(ended[0], 0);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
}

}  // namespace
}  // namespace ringmaster::coordinator
