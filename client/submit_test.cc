// submit [--wait | --follow] and attach against an in-process fake
// JobService: the spec loaded (from a file or standard input) and validated
// locally, exit codes by final state, the follow output, and a watch stream
// that breaks.

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/fake_job_service.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

constexpr int64_t kT0 = 1795000000;  // 2026-11-18T11:06:40Z

google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  return t;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kSpec[] =
    "name: tiny\n"
    "model:\n  mlp: {}\n"
    "data:\n  dataset: synthetic\n  batch_size: 64\n"
    "training:\n  steps: 100\n"
    "resources:\n  device: cpu\n";

v1::WatchJobResponse Update(v1::JobState state, int64_t step, const std::string& message = "") {
  v1::WatchJobResponse r;
  v1::Job* job = r.mutable_job();
  job->set_id("j-42");
  job->set_state(state);
  job->set_message(message);
  *job->mutable_submit_time() = At(kT0 - 100);
  *job->mutable_start_time() = At(kT0 - 90);
  if (state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED) {
    *job->mutable_end_time() = At(kT0);
  }
  job->mutable_progress()->set_step(step);
  job->mutable_progress()->set_total_steps(100);
  job->mutable_progress()->set_loss(1.5);
  job->mutable_progress()->set_samples_per_second(640);
  job->mutable_progress()->set_step_time_seconds(0.1);
  return r;
}

v1::JobEvent* AddEvent(v1::WatchJobResponse* r, int64_t sequence, v1::JobEventKind kind, v1::JobState from,
                       v1::JobState to, const std::string& reason) {
  v1::JobEvent* e = r->add_events();
  e->set_sequence(sequence);
  e->set_kind(kind);
  e->set_from_state(from);
  e->set_to_state(to);
  e->set_reason(reason);
  *e->mutable_time() = At(kT0 - 95 + sequence);
  return e;
}

class SubmitTest : public ::testing::Test {
 protected:
  SubmitTest() {
    global_.coordinator = coordinator_.address();
    global_.reconnect_timeout = absl::Seconds(5);
    options_.file = WriteFile("tiny.yaml", kSpec);
    script().submit.mutable_job()->set_id("j-42");
    script().submit.mutable_job()->set_state(v1::JOB_STATE_QUEUED);
  }
  FakeJobService::Script& script() { return coordinator_.service().script(); }
  FakeJobService::Calls calls() { return coordinator_.service().calls(); }
  int Run() { return RunSubmit(*stub_, global_, options_, console_); }

  FakeCoordinator coordinator_;
  std::unique_ptr<v1::JobService::Stub> stub_ = coordinator_.NewStub();
  GlobalOptions global_;
  SubmitOptions options_;
  FakeClock clock_{absl::FromUnixSeconds(kT0)};
  std::ostringstream out_;
  std::ostringstream err_;
  Console console_{out_, err_, false, &clock_};
};

TEST_F(SubmitTest, SendsTheValidatedSpecAndPrintsTheJobId) {
  options_.overrides = {"optimizer.lr=0.01"};
  EXPECT_EQ(Run(), kExitOk);
  EXPECT_EQ(out_.str(), "j-42\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(calls().submit.size(), 1u);
  const v1::SubmitJobRequest sent = calls().submit[0];
  EXPECT_EQ(sent.spec().name(), "tiny");
  EXPECT_EQ(sent.spec().optimizer().lr(), 0.01);
  // As written: the coordinator applies the defaults and keeps both, so that
  // `describe` can say which values were the user's.
  EXPECT_FALSE(sent.spec().resources().has_nodes());
  EXPECT_THAT(sent.overrides(), ::testing::ElementsAre("optimizer.lr=0.01"));
  EXPECT_TRUE(absl::StartsWith(sent.request_id(), "cli-")) << sent.request_id();
  EXPECT_FALSE(sent.validate_only());
  EXPECT_TRUE(calls().watch.empty());
}

TEST_F(SubmitTest, JsonPrintsTheResponseAndKeepsTheRequestId) {
  global_.output = OutputFormat::kJson;
  options_.request_id = "retry-me";
  EXPECT_EQ(Run(), kExitOk);
  EXPECT_EQ(out_.str(), "{\"job\":{\"id\":\"j-42\",\"state\":\"JOB_STATE_QUEUED\"}}\n");
  EXPECT_EQ(calls().submit[0].request_id(), "retry-me");
}

TEST_F(SubmitTest, BadSpecIsOneLineNamingTheFieldAndNothingIsSent) {
  options_.file = WriteFile("bad.yaml", "model:\n  mlp: {}\ndata:\n  dataset: synthetic\nresources:\n  nodes: 0\n");
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: " + options_.file + ": resources.nodes: must be >= 1, got 0\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_TRUE(calls().submit.empty());

  err_.str("");
  options_.file = WriteFile("tiny2.yaml", kSpec);
  options_.overrides = {"optimizer.lr=fast"};
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: optimizer.lr: expected a number, got \"fast\" (in --set \"optimizer.lr=fast\")\n");

  // A well-formed --set that makes a valid file invalid is blamed, not the file.
  err_.str("");
  options_.overrides = {"data.batch_size=32", "training.steps=0"};
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: training.steps: must be >= 1, got 0 (after --set \"training.steps=0\"; " +
                            options_.file + " alone is valid)\n");
  EXPECT_TRUE(calls().submit.empty());
}

TEST_F(SubmitTest, ServerRejectionPassesItsMessage) {
  script().submit_status =
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "resources.ranks_per_node: 16 exceeds the largest node (8 GPUs)");
  EXPECT_EQ(Run(), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: resources.ranks_per_node: 16 exceeds the largest node (8 GPUs) (INVALID_ARGUMENT)\n");
}

TEST_F(SubmitTest, SkipLocalValidationSendsABadSpecForTheCoordinatorToJudge) {
  options_.file = WriteFile("bad.yaml", "model:\n  mlp: {}\ndata:\n  dataset: synthetic\nresources:\n  nodes: 0\n");
  options_.skip_local_validation = true;
  script().submit_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "resources.nodes: must be >= 1, got 0");
  EXPECT_EQ(Run(), kExitError);
  ASSERT_EQ(calls().submit.size(), 1u);
  EXPECT_EQ(calls().submit[0].spec().resources().nodes(), 0);
  EXPECT_EQ(err_.str(), "ringmaster: resources.nodes: must be >= 1, got 0 (INVALID_ARGUMENT)\n");
}

TEST_F(SubmitTest, WaitSucceededExitsZero) {
  script().watch_streams = {{Update(v1::JOB_STATE_QUEUED, 0), Update(v1::JOB_STATE_RUNNING, 50),
                             Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  options_.wait = true;
  EXPECT_EQ(Run(), kExitOk);
  EXPECT_EQ(out_.str(), "j-42\njob j-42 SUCCEEDED after 1m30s at step 100/100 (100%)\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(calls().watch.size(), 1u);
  EXPECT_EQ(calls().watch[0].job_id(), "j-42");
}

TEST_F(SubmitTest, WaitFailedOrCancelledExitsNonZeroWithTheReason) {
  script().watch_streams = {
      {Update(v1::JOB_STATE_RUNNING, 50), Update(v1::JOB_STATE_FAILED, 50, "rank 1 exited with status 3")}};
  options_.wait = true;
  EXPECT_EQ(Run(), kExitJobFailed);
  EXPECT_EQ(out_.str(), "j-42\n");
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 FAILED after 1m30s at step 50/100 (50%): rank 1 exited with status 3\n");

  out_.str("");
  err_.str("");
  script().watch_streams = {{Update(v1::JOB_STATE_CANCELLED, 10, "cancelled by alice")}};
  EXPECT_EQ(Run(), kExitJobFailed);
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 CANCELLED after 1m30s at step 10/100 (10%): cancelled by alice\n");
}

// What no registered node could ever run is not waited on forever.
TEST_F(SubmitTest, WaitAndFollowStopWhenNoNodeCouldEverRunTheJob) {
  v1::WatchJobResponse stuck = Update(v1::JOB_STATE_QUEUED, 0, "waiting");
  stuck.mutable_job()->clear_start_time();
  stuck.mutable_job()->set_unschedulable("needs 1 node with 4 free CPU slots each; only 0 schedulable nodes could "
                                         "ever hold that");
  script().watch_streams = {{stuck}};
  const std::string want =
      "ringmaster: job j-42 cannot start: no registered node could ever run it: needs 1 node with 4 free CPU slots "
      "each; only 0 schedulable nodes could ever hold that; it stays QUEUED until such a node registers "
      "(`ringmaster nodes` lists them; `ringmaster cancel j-42` removes it)\n";
  for (bool follow : {false, true}) {
    err_.str("");
    options_.wait = !follow;
    options_.follow = follow;
    EXPECT_EQ(Run(), kExitJobFailed);
    EXPECT_EQ(err_.str(), want);
  }
  // A job that ran before (a drained node's, requeued) is waited on: it ran.
  stuck.mutable_job()->set_generation(1);
  script().watch_streams = {{stuck, Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  err_.str("");
  EXPECT_EQ(Run(), kExitOk) << err_.str();
}

TEST_F(SubmitTest, FollowShowsEventsProgressAndTheTestResult) {
  v1::WatchJobResponse queued = Update(v1::JOB_STATE_QUEUED, 0, "waiting for 1 node");
  AddEvent(&queued, 1, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED, "");
  v1::WatchJobResponse running = Update(v1::JOB_STATE_RUNNING, 0);
  AddEvent(&running, 2, v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
           "every rank joined");
  v1::WatchJobResponse done = Update(v1::JOB_STATE_SUCCEEDED, 100);
  done.mutable_job()->mutable_progress()->set_eval_step(100);
  done.mutable_job()->mutable_progress()->set_eval_accuracy(0.8765);
  done.mutable_job()->mutable_progress()->set_eval_loss(0.345);
  AddEvent(&done, 3, v1::JOB_EVENT_KIND_SUCCEEDED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED, "");
  script().watch_streams = {{queued, running, Update(v1::JOB_STATE_RUNNING, 50), done}};
  options_.follow = true;
  EXPECT_EQ(Run(), kExitOk);
  EXPECT_EQ(out_.str(),
            "j-42\n"
            "2026-11-18T11:05:06Z  SUBMITTED (UNSPECIFIED -> QUEUED)\n"
            "QUEUED: waiting for 1 node\n"
            "2026-11-18T11:05:07Z  RUNNING (STARTING -> RUNNING): every rank joined\n"
            "step 0/100 (0%)  loss 1.5000  640.0 samples/s  ETA 10s\n"
            "step 50/100 (50%)  loss 1.5000  640.0 samples/s  ETA 5s\n"
            "2026-11-18T11:05:08Z  SUCCEEDED (RUNNING -> SUCCEEDED)\n"
            "job j-42 SUCCEEDED after 1m30s at step 100/100 (100%); test accuracy 87.65%, test loss 0.3450\n");
}

TEST_F(SubmitTest, FollowJsonPrintsEveryUpdate) {
  script().watch_streams = {{Update(v1::JOB_STATE_RUNNING, 50), Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  options_.follow = true;
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(Run(), kExitOk);
  std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << out_.str();
  EXPECT_EQ(lines[0], "{\"job\":{\"id\":\"j-42\",\"state\":\"JOB_STATE_QUEUED\"}}");
  EXPECT_TRUE(absl::StartsWith(lines[1], "{\"job\":{\"id\":\"j-42\",\"state\":\"JOB_STATE_RUNNING\"")) << lines[1];
  EXPECT_TRUE(absl::StartsWith(lines[2], "{\"job\":{\"id\":\"j-42\",\"state\":\"JOB_STATE_SUCCEEDED\"")) << lines[2];
}

TEST_F(SubmitTest, BrokenWatchResumesAfterTheLastEvent) {
  v1::WatchJobResponse running = Update(v1::JOB_STATE_RUNNING, 50);
  AddEvent(&running, 4, v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING, "");
  script().watch_streams = {{running}, {Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  script().watch_statuses = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")};
  *script().get.mutable_job() = running.job();
  options_.wait = true;
  EXPECT_EQ(Run(), kExitOk);
  FakeJobService::Calls c = calls();
  ASSERT_EQ(c.watch.size(), 2u);
  EXPECT_EQ(c.watch[0].after_sequence(), 0);
  EXPECT_EQ(c.watch[1].after_sequence(), 4);
  EXPECT_EQ(c.get.size(), 1u);  // waited for the coordinator before reopening
}

TEST_F(SubmitTest, JobEndingWhileTheWatchWasBrokenIsSeenThroughGetJob) {
  script().watch_streams = {{Update(v1::JOB_STATE_RUNNING, 50)}};
  script().watch_statuses = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")};
  *script().get.mutable_job() = Update(v1::JOB_STATE_FAILED, 60, "node n-1 lost").job();
  options_.wait = true;
  EXPECT_EQ(Run(), kExitJobFailed);
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 FAILED after 1m30s at step 60/100 (60%): node n-1 lost\n");
  EXPECT_EQ(calls().watch.size(), 1u);
}

TEST_F(SubmitTest, DashReadsAYamlSpecFromStandardInputNamedStdin) {
  std::istringstream in(kSpec + std::string("name: tiny\n").size());  // kSpec without its name
  console_.in = &in;
  options_.file = "-";
  options_.overrides = {"optimizer.lr=0.01"};
  EXPECT_EQ(Run(), kExitOk);
  EXPECT_EQ(out_.str(), "j-42\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(calls().submit.size(), 1u);
  const v1::SubmitJobRequest sent = calls().submit[0];
  EXPECT_EQ(sent.spec().name(), "stdin");
  EXPECT_EQ(sent.spec().optimizer().lr(), 0.01);
  EXPECT_FALSE(sent.spec().resources().has_nodes());  // the coordinator applies the defaults
  EXPECT_THAT(sent.overrides(), ::testing::ElementsAre("optimizer.lr=0.01"));
}

TEST_F(SubmitTest, DashReadsJsonWhenTheInputStartsWithABrace) {
  std::istringstream in(
      "\n  {\"name\": \"from-json\", \"model\": {\"mlp\": {}}, \"data\": {\"dataset\": \"synthetic\"},\n"
      "   \"training\": {\"steps\": 10}, \"resources\": {\"device\": \"cpu\"}}\n");
  console_.in = &in;
  options_.file = "-";
  EXPECT_EQ(Run(), kExitOk) << err_.str();
  ASSERT_EQ(calls().submit.size(), 1u);
  EXPECT_EQ(calls().submit[0].spec().name(), "from-json");
  EXPECT_EQ(calls().submit[0].spec().training().steps(), 10);
}

TEST_F(SubmitTest, DashBadSpecNamesStdinAndNothingIsSent) {
  std::istringstream in("model:\n  mlp: {}\ndata:\n  dataset: synthetic\nresources:\n  nodes: 0\n");
  console_.in = &in;
  options_.file = "-";
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: stdin: resources.nodes: must be >= 1, got 0\n");

  err_.str("");
  std::istringstream json("{\"model\": ");
  console_.in = &json;
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_TRUE(absl::StartsWith(err_.str(), "ringmaster: stdin: ")) << err_.str();

  err_.str("");
  console_.in = nullptr;
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: submit -: there is no standard input to read\n");
  EXPECT_TRUE(calls().submit.empty());
}

TEST_F(SubmitTest, AttachFollowsAJobToSuccess) {
  v1::WatchJobResponse running = Update(v1::JOB_STATE_RUNNING, 50);
  AddEvent(&running, 2, v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
           "every rank joined");
  script().watch_streams = {{running, Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  EXPECT_EQ(RunAttach(*stub_, global_, "j-42", console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "2026-11-18T11:05:07Z  RUNNING (STARTING -> RUNNING): every rank joined\n"
            "step 50/100 (50%)  loss 1.5000  640.0 samples/s  ETA 5s\n"
            "job j-42 SUCCEEDED after 1m30s at step 100/100 (100%)\n");
  EXPECT_EQ(err_.str(), "");
  EXPECT_TRUE(calls().submit.empty());
  ASSERT_EQ(calls().watch.size(), 1u);
  EXPECT_EQ(calls().watch[0].job_id(), "j-42");
}

// The first message of a long job's watch carries the newest events only,
// and says that older ones exist.
TEST_F(SubmitTest, AttachSaysWhenEarlierEventsAreNotShown) {
  v1::WatchJobResponse running = Update(v1::JOB_STATE_RUNNING, 50);
  AddEvent(&running, 2, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RUNNING,
           "checkpoint at step 50 committed");
  running.set_older_events_page_token("2");
  script().watch_streams = {{running, Update(v1::JOB_STATE_SUCCEEDED, 100)}};
  EXPECT_EQ(RunAttach(*stub_, global_, "j-42", console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "(earlier events not shown: ringmaster describe j-42)\n"
            "2026-11-18T11:05:07Z  CHECKPOINT_COMMITTED: checkpoint at step 50 committed\n"
            "step 50/100 (50%)  loss 1.5000  640.0 samples/s  ETA 5s\n"
            "job j-42 SUCCEEDED after 1m30s at step 100/100 (100%)\n");
}

TEST_F(SubmitTest, AttachToAJobThatFailsExitsThree) {
  script().watch_streams = {
      {Update(v1::JOB_STATE_RUNNING, 50), Update(v1::JOB_STATE_FAILED, 50, "rank 1 exited with status 3")}};
  EXPECT_EQ(RunAttach(*stub_, global_, "j-42", console_), kExitJobFailed);
  EXPECT_EQ(out_.str(), "step 50/100 (50%)  loss 1.5000  640.0 samples/s  ETA 5s\n");
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 FAILED after 1m30s at step 50/100 (50%): rank 1 exited with status 3\n");

  // yaml: every update as a document.
  out_.str("");
  err_.str("");
  global_.output = OutputFormat::kYaml;
  EXPECT_EQ(RunAttach(*stub_, global_, "j-42", console_), kExitJobFailed);
  std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "---"), 2) << out_.str();
  EXPECT_NE(out_.str().find("  state: JOB_STATE_FAILED\n"), std::string::npos) << out_.str();
}

TEST_F(SubmitTest, AttachToAnUnknownJob) {
  script().watch_statuses = {grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown job")};
  EXPECT_EQ(RunAttach(*stub_, global_, "j-404", console_), kExitError);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "ringmaster: job j-404 not found (NOT_FOUND)\n");
}

TEST_F(SubmitTest, WatchOfAVanishedJob) {
  script().watch_statuses = {grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown job")};
  options_.wait = true;
  EXPECT_EQ(Run(), kExitError);
  EXPECT_EQ(out_.str(), "j-42\n");
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 not found (NOT_FOUND)\n");
}

}  // namespace
}  // namespace ringmaster::client
