// jobs, cancel, nodes, checkpoints and logs against an in-process fake
// JobService: exact table, wide, JSON and YAML outputs, requests sent, and the
// one-line errors. describe is in describe_test.cc.

#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "client/commands.h"
#include "client/commands_test_util.h"
#include "client/fake_job_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

using testing::At;
using testing::CommandsTest;
using testing::kT0;
using testing::MakeJob;
using testing::MakeSummary;

TEST_F(CommandsTest, JobsTableFetchesEveryPage) {
  v1::JobSummary running = MakeSummary("j-2", "gpt-small", v1::JOB_STATE_RUNNING);
  running.mutable_spec()->set_priority(5);
  running.set_generation(2);
  running.mutable_placement()->set_world_size(8);
  running.mutable_progress()->set_step(250);
  running.mutable_progress()->set_total_steps(1000);
  v1::JobSummary queued = MakeSummary("j-1", "mlp", v1::JOB_STATE_QUEUED);
  queued.mutable_spec()->mutable_resources()->set_nodes(1);
  queued.mutable_spec()->mutable_resources()->set_ranks_per_node(2);
  *queued.mutable_submit_time() = At(kT0 - 7200);
  script().list_jobs_pages.resize(2);
  *script().list_jobs_pages[0].add_jobs() = running;
  *script().list_jobs_pages[1].add_jobs() = queued;

  EXPECT_EQ(RunJobs(*stub_, global_, {}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "ID   NAME       STATE    QUEUE  PRIORITY  GEN  RANKS  AGE  PROGRESS\n"
            "j-2  gpt-small  RUNNING  -      5         2    8      5m   250/1000 (25%)\n"
            "j-1  mlp        QUEUED   -      0         0    2      2h   -\n");
  EXPECT_EQ(err_.str(), "");
  FakeJobService::Calls c = calls();
  ASSERT_EQ(c.list_jobs.size(), 2u);
  EXPECT_EQ(c.list_jobs[0].page_token(), "");
  EXPECT_EQ(c.list_jobs[1].page_token(), "page-1");
}

TEST_F(CommandsTest, JobsLimitShowsTheNewestAndSaysThereAreMore) {
  script().list_jobs_pages.resize(2);
  *script().list_jobs_pages[0].add_jobs() = MakeSummary("j-4", "d", v1::JOB_STATE_QUEUED);
  *script().list_jobs_pages[0].add_jobs() = MakeSummary("j-3", "c", v1::JOB_STATE_QUEUED);
  *script().list_jobs_pages[1].add_jobs() = MakeSummary("j-2", "b", v1::JOB_STATE_QUEUED);
  *script().list_jobs_pages[1].add_jobs() = MakeSummary("j-1", "a", v1::JOB_STATE_QUEUED);
  JobsOptions options;
  options.limit = 3;
  EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitOk);
  const std::string out = out_.str();
  EXPECT_NE(out.find("j-4"), std::string::npos);
  EXPECT_NE(out.find("j-2"), std::string::npos);
  EXPECT_EQ(out.find("j-1"), std::string::npos) << out;
  EXPECT_NE(out.find("(the 3 newest shown; --limit N for more, --limit 0 for all)"), std::string::npos) << out;
  ASSERT_EQ(calls().list_jobs.size(), 2u);
  EXPECT_EQ(calls().list_jobs[0].page_size(), 3);

  out_.str("");
  options.limit = 0;  // every job, no note
  EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitOk);
  EXPECT_NE(out_.str().find("j-1"), std::string::npos);
  EXPECT_EQ(out_.str().find("newest shown"), std::string::npos);
}

TEST_F(CommandsTest, JobsJsonIsOneProtobufJsonLine) {
  *script().list_jobs_pages[0].add_jobs() = MakeSummary("j-1", "mlp", v1::JOB_STATE_SUCCEEDED);
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(RunJobs(*stub_, global_, {}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"jobs\":[{\"id\":\"j-1\",\"spec\":{\"name\":\"mlp\"},\"state\":\"JOB_STATE_SUCCEEDED\","
            "\"submitTime\":\"2026-11-18T11:01:40Z\"}]}\n");
}

TEST_F(CommandsTest, JobsStateFilter) {
  JobsOptions options;
  options.states = {"running", "JOB_STATE_QUEUED"};
  EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitOk);
  ASSERT_EQ(calls().list_jobs.size(), 1u);
  EXPECT_THAT(calls().list_jobs[0].states(), ElementsAre(v1::JOB_STATE_RUNNING, v1::JOB_STATE_QUEUED));

  options.states = {"sleeping"};
  EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringmaster: --state: unknown job state \"sleeping\" (expected queued, placed, starting, running, "
            "restarting, succeeded, failed or cancelled)\n");
}

TEST_F(CommandsTest, JobsLabelSelector) {
  JobsOptions options;
  options.labels = {"team=nlp", "tier=prod,env="};
  EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitOk);
  ASSERT_EQ(calls().list_jobs.size(), 1u);
  EXPECT_THAT(calls().list_jobs[0].label_selector(),
              UnorderedElementsAre(Pair("team", "nlp"), Pair("tier", "prod"), Pair("env", "")));

  // Malformed: one line naming -l and the bad part; nothing is sent.
  for (const auto& [labels, error] : std::vector<std::pair<std::string, std::string>>{
           {"team", "ringmaster: -l: expected key=value, got \"team\"\n"},
           {"team=nlp,", "ringmaster: -l: expected key=value, got \"\"\n"},
           {"=nlp", "ringmaster: -l: bad label key \"\" in \"=nlp\" (1 to 63 characters of [A-Za-z0-9._/-])\n"},
           {"a b=c", "ringmaster: -l: bad label key \"a b\" in \"a b=c\" (1 to 63 characters of [A-Za-z0-9._/-])\n"},
           {"team=a,team=b", "ringmaster: -l: label team asked for twice, as \"a\" and \"b\"\n"},
       }) {
    err_.str("");
    options.labels = {labels};
    EXPECT_EQ(RunJobs(*stub_, global_, options, console_), kExitUsage) << labels;
    EXPECT_EQ(err_.str(), error);
  }
  EXPECT_EQ(calls().list_jobs.size(), 1u);
}

TEST_F(CommandsTest, JobsWideAddsQueueOwnerAndSortedLabels) {
  v1::JobSummary job = MakeSummary("j-2", "gpt-small", v1::JOB_STATE_RUNNING);
  job.set_owner("alice");
  (*job.mutable_spec()->mutable_labels())["team"] = "nlp";
  (*job.mutable_spec()->mutable_labels())["env"] = "dev";
  (*job.mutable_spec()->mutable_labels())["env.region"] = "eu";
  job.mutable_spec()->set_queue("nlp");
  *script().list_jobs_pages[0].add_jobs() = job;
  v1::JobSummary queued = MakeSummary("j-1", "mlp", v1::JOB_STATE_QUEUED);
  queued.set_queue_position(3);
  *script().list_jobs_pages[0].add_jobs() = queued;
  // A summary of a job stored before the spec's limits lists only some labels.
  v1::JobSummary old = MakeSummary("j-0", "huge", v1::JOB_STATE_QUEUED);
  (*old.mutable_spec()->mutable_labels())["k000000"] = "v";
  old.set_abridged(true);
  old.set_queue_position(4);
  *script().list_jobs_pages[0].add_jobs() = old;
  global_.output = OutputFormat::kWide;
  EXPECT_EQ(RunJobs(*stub_, global_, {}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "ID   NAME       STATE    QUEUE  PRIORITY  GEN  RANKS  AGE  PROGRESS  POSITION  OWNER  LABELS\n"
            "j-2  gpt-small  RUNNING  nlp    0         0    -      5m   -         -         alice  env=dev,env.region=eu,team=nlp\n"
            "j-1  mlp        QUEUED   -      0         0    -      5m   -         #3        -      -\n"
            "j-0  huge       QUEUED   -      0         0    -      5m   -         #4        -      k000000=v,...\n");
  // Commands without a wide form print their table.
  out_.str("");
  EXPECT_EQ(RunCheckpoints(*stub_, global_, {"j-2", false}, console_), kExitOk);
  EXPECT_EQ(out_.str(), "STEP  GEN  STATUS  STAGES  SIZE  COMMITTED  PATH\n");
}

TEST_F(CommandsTest, JobsYamlIsOneDocument) {
  v1::JobSummary job = MakeSummary("j-1", "mlp", v1::JOB_STATE_SUCCEEDED);
  job.set_generation(3);
  (*job.mutable_spec()->mutable_labels())["flag"] = "true";
  *script().list_jobs_pages[0].add_jobs() = job;
  global_.output = OutputFormat::kYaml;
  EXPECT_EQ(RunJobs(*stub_, global_, {}, console_), kExitOk);
  // As the JSON reads: int64 and timestamps stay strings, and so does "true".
  EXPECT_EQ(out_.str(),
            "---\n"
            "jobs:\n"
            "  - id: j-1\n"
            "    spec:\n"
            "      name: mlp\n"
            "      labels:\n"
            "        flag: \"true\"\n"
            "    state: JOB_STATE_SUCCEEDED\n"
            "    generation: \"3\"\n"
            "    submitTime: \"2026-11-18T11:01:40Z\"\n");
}

TEST_F(CommandsTest, CancelSendsTheReasonAndSaysWhatHappened) {
  *script().cancel.mutable_job() = MakeJob("j-42", "mlp", v1::JOB_STATE_RUNNING);
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-42"}, "cancelled by alice: wrong lr"}, console_), kExitOk);
  script().cancel.mutable_job()->set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-42"}, ""}, console_), kExitOk);
  script().cancel.mutable_job()->set_state(v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-42"}, ""}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "j-42 cancelling (RUNNING; its ranks are being stopped)\n"
            "j-42 cancelled\n"
            "j-42 already SUCCEEDED\n");
  ASSERT_EQ(calls().cancel.size(), 3u);
  EXPECT_EQ(calls().cancel[0].job_id(), "j-42");
  EXPECT_EQ(calls().cancel[0].reason(), "cancelled by alice: wrong lr");
}

TEST_F(CommandsTest, CancelSeveralTriesEveryJobAndFailsIfOneFailed) {
  *script().cancel.mutable_job() = MakeJob("j-1", "mlp", v1::JOB_STATE_CANCELLED);
  script().cancel_statuses["j-404"] = grpc::Status(grpc::StatusCode::NOT_FOUND, "no job \"j-404\"");
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-1", "j-404", "j-3"}, "cancelled by alice"}, console_), kExitError);
  EXPECT_EQ(out_.str(), "j-1 cancelled\nj-3 cancelled\n");
  EXPECT_EQ(err_.str(), "ringmaster: job j-404 not found (NOT_FOUND)\n");
  FakeJobService::Calls c = calls();
  ASSERT_EQ(c.cancel.size(), 3u);
  EXPECT_EQ(c.cancel[1].job_id(), "j-404");
  EXPECT_EQ(c.cancel[2].job_id(), "j-3");
  EXPECT_EQ(c.cancel[2].reason(), "cancelled by alice");

  // Every job cancelled: exit 0; yaml: one document each.
  out_.str("");
  global_.output = OutputFormat::kYaml;
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-1", "j-3"}, ""}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "---\njob:\n  id: j-1\n  spec:\n    name: mlp\n  state: JOB_STATE_CANCELLED\n"
            "  submitTime: \"2026-11-18T11:01:40Z\"\n"
            "---\njob:\n  id: j-1\n  spec:\n    name: mlp\n  state: JOB_STATE_CANCELLED\n"
            "  submitTime: \"2026-11-18T11:01:40Z\"\n");
}

TEST_F(CommandsTest, NodesTable) {
  v1::NodeInfo* a = script().list_nodes.add_nodes();
  a->set_node_id("n-1");
  a->set_hostname("gpu-a");
  a->set_address("10.0.0.1:7000");
  a->set_state(v1::NODE_STATE_READY);
  for (int i = 0; i < 8; ++i) a->add_gpus()->set_index(i);
  a->set_free_gpus(4);
  a->set_cpu_slots(64);
  a->set_free_cpu_slots(60);
  (*a->mutable_labels())["rack"] = "a3";
  (*a->mutable_labels())["zone"] = "z1";
  a->add_allocations()->set_job_id("j-2");
  a->set_worker_version("0.1.0");
  v1::NodeInfo* b = script().list_nodes.add_nodes();
  b->set_node_id("n-2");
  b->set_hostname("cpu-b");
  b->set_state(v1::NODE_STATE_LOST);
  b->set_cpu_slots(4);
  v1::NodeInfo* c = script().list_nodes.add_nodes();
  c->set_node_id("n-3");
  c->set_hostname("gpu-c");
  c->set_state(v1::NODE_STATE_CORDONED);
  c->set_cordoned_by("alice");
  c->set_cordon_reason("bad DIMM");
  c->set_draining(true);
  v1::NodeInfo* d = script().list_nodes.add_nodes();
  d->set_node_id("n-4");
  d->set_hostname("gpu-d");
  d->set_state(v1::NODE_STATE_LOST);
  d->set_cordoned_by("worker");
  v1::NodeInfo* e = script().list_nodes.add_nodes();
  e->set_node_id("n-5");
  e->set_hostname("gpu-e");
  e->set_state(v1::NODE_STATE_NOT_READY);
  e->set_not_ready_reason("health check /etc/rm/ib.sh: mlx5_0 down");
  e->set_draining(true);
  EXPECT_EQ(RunNodes(*stub_, global_, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "ID   HOSTNAME  ADDRESS        STATE               GPUS  CPUS   JOBS  CORDONED         LABELS           "
            "VERSION  HEALTH\n"
            "n-1  gpu-a     10.0.0.1:7000  READY               4/8   60/64  j-2   -                rack=a3,zone=z1  "
            "0.1.0    ok\n"
            "n-2  cpu-b     -              LOST                0/0   0/4    -     -                -                "
            "-        -\n"
            "n-3  gpu-c     -              DRAINING            0/0   0/0    -     alice: bad DIMM  -                "
            "-        ok\n"
            "n-4  gpu-d     -              LOST,CORDONED       0/0   0/0    -     worker           -                "
            "-        -\n"
            "n-5  gpu-e     -              NOT_READY,DRAINING  0/0   0/0    -     -                -                "
            "-        health check /etc/rm/ib.sh: mlx5_0 down\n");
}

TEST_F(CommandsTest, CordonAndUncordonSayWhatChanged) {
  v1::NodeInfo& node = *script().cordon.mutable_node();
  node.set_node_id("n-3");
  node.set_hostname("gpu-c");
  node.add_allocations()->set_job_id("j-7");
  NodeCommandOptions options;
  options.node = "gpu-c";
  options.reason = "flaky NVLink";
  EXPECT_EQ(RunCordon(*stub_, global_, options, /*uncordon=*/false, console_), kExitOk);
  EXPECT_EQ(out_.str(), "node gpu-c (n-3) cordoned: no new jobs; 1 job(s) keep running there (ringmaster nodes drain "
                        "gpu-c moves them)\n");
  EXPECT_EQ(RunCordon(*stub_, global_, options, /*uncordon=*/true, console_), kExitOk);
  ASSERT_EQ(calls().cordon.size(), 2u);
  EXPECT_EQ(calls().cordon[0].node(), "gpu-c");
  EXPECT_EQ(calls().cordon[0].reason(), "flaky NVLink");
  EXPECT_FALSE(calls().cordon[0].uncordon());
  EXPECT_TRUE(calls().cordon[1].uncordon());
  script().cordon_status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "only an admin may cordon nodes");
  EXPECT_EQ(RunCordon(*stub_, global_, options, false, console_), kExitError);
  EXPECT_NE(err_.str().find("only an admin may cordon nodes"), std::string::npos) << err_.str();
}

TEST_F(CommandsTest, DrainWaitsUntilTheNodeIsEmpty) {
  v1::NodeInfo& draining = *script().drain.mutable_node();
  draining.set_node_id("n-3");
  draining.set_hostname("gpu-c");
  draining.set_draining(true);
  draining.add_allocations()->set_job_id("j-7");
  script().drain.add_job_ids("j-7");
  // What ListNodes says next: the job moved, the drain is over.
  v1::NodeInfo* after = script().list_nodes.add_nodes();
  after->set_node_id("n-3");
  after->set_hostname("gpu-c");
  after->set_state(v1::NODE_STATE_CORDONED);
  NodeCommandOptions options;
  options.node = "n-3";
  EXPECT_EQ(RunDrain(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "draining node gpu-c (n-3): cordoned; 1 job(s) checkpoint and move: j-7\n"
            "  j-7 moved off gpu-c\n"
            "node gpu-c (n-3) drained: nothing runs there; it stays cordoned (ringmaster nodes uncordon gpu-c to use "
            "it again)\n");
  // Still draining when the time is up: an error, saying what is left.
  after->set_draining(true);
  after->add_allocations()->set_job_id("j-7");
  options.timeout = absl::Milliseconds(500);
  EXPECT_EQ(RunDrain(*stub_, global_, options, console_), kExitError);
  EXPECT_NE(err_.str().find("node gpu-c (n-3) is still draining after 500ms; jobs there: j-7"), std::string::npos)
      << err_.str();
  // --no-wait returns at once.
  options.wait = false;
  const int lists = calls().list_nodes;
  EXPECT_EQ(RunDrain(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(calls().list_nodes, lists);
}

TEST_F(CommandsTest, CheckpointsTableAndJson) {
  v1::CheckpointInfo* c = script().checkpoints.add_checkpoints();
  c->set_job_id("j-42");
  c->set_generation(1);
  c->set_step(500);
  c->set_path("/ckpt/j-42/step-500");
  c->set_pipeline_stages(1);
  c->add_shards();
  c->set_complete(true);
  c->set_total_bytes(int64_t{3} << 20);
  *c->mutable_commit_time() = At(kT0 - 60);
  // A newer, whole-model checkpoint of a 2-stage job that a rank found damaged.
  v1::CheckpointInfo* bad = script().checkpoints.add_checkpoints();
  *bad = *c;
  bad->set_step(600);
  bad->set_path("/ckpt/j-42/step-600");
  bad->set_pipeline_stages(2);
  bad->set_whole_model(true);
  bad->set_damage("model.safetensors: SHA-256 differs from the manifest's");
  EXPECT_EQ(RunCheckpoints(*stub_, global_, {"j-42", false}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "STEP  GEN  STATUS  STAGES  SIZE     COMMITTED             PATH\n"
            "500   1    good    1/1     3.0 MiB  2026-11-18T11:05:40Z  /ckpt/j-42/step-500\n"
            "600   1    BAD     all 2   3.0 MiB  2026-11-18T11:05:40Z  /ckpt/j-42/step-600\n"
            "step 600 (generation 1) is damaged, never resumed from: model.safetensors: SHA-256 differs from the "
            "manifest's\n");
  out_.str("");
  script().checkpoints.mutable_checkpoints()->RemoveLast();
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(RunCheckpoints(*stub_, global_, {"j-42", true}, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"checkpoints\":[{\"jobId\":\"j-42\",\"generation\":\"1\",\"step\":\"500\",\"path\":"
            "\"/ckpt/j-42/step-500\",\"pipelineStages\":1,\"shards\":[{}],\"complete\":true,\"totalBytes\":"
            "\"3145728\",\"commitTime\":\"2026-11-18T11:05:40Z\"}]}\n");
  EXPECT_TRUE(calls().checkpoints[1].include_incomplete());
}

v1::LogLine* AddLine(v1::LogChunk* chunk, int rank, int64_t seconds, const std::string& text) {
  v1::LogLine* line = chunk->add_lines();
  line->set_rank(rank);
  *line->mutable_time() = At(seconds);
  line->set_text(text);
  return line;
}

TEST_F(CommandsTest, LogsArePrefixedWithTheRankAndMergedByTime) {
  v1::LogChunk first;
  AddLine(&first, 1, kT0 + 2, "rank one, second");
  AddLine(&first, 1, kT0 + 3, "rank one, third");
  AddLine(&first, 0, kT0 + 1, "rank zero, first");
  AddLine(&first, 0, kT0 + 3, "rank zero, also third");
  v1::LogChunk second;
  AddLine(&second, 0, kT0 + 4, "step 10 loss 0.5");
  script().log_chunks = {first, second};
  LogsOptions options;
  options.job_id = "j-42";
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "[rank 0] rank zero, first\n"
            "[rank 1] rank one, second\n"
            "[rank 1] rank one, third\n"
            "[rank 0] rank zero, also third\n"
            "[rank 0] step 10 loss 0.5\n");
  v1::StreamLogsRequest sent = calls().logs[0];
  EXPECT_FALSE(sent.has_rank());
  EXPECT_FALSE(sent.follow());
}

// A job of 2 nodes x 2 ranks in its `generation`.
void SetLogsJob(v1::GetJobResponse* get, int64_t generation, v1::JobState state) {
  get->mutable_job()->set_id("j-42");
  get->mutable_job()->set_generation(generation);
  get->mutable_job()->set_state(state);
  get->mutable_job()->mutable_spec()->mutable_resources()->set_nodes(2);
  get->mutable_job()->mutable_spec()->mutable_resources()->set_ranks_per_node(2);
}

TEST_F(CommandsTest, LogsOfARankOrGenerationTheJobNeverHadFail) {
  SetLogsJob(&script().get, 2, v1::JOB_STATE_SUCCEEDED);
  LogsOptions options;
  options.job_id = "j-42";
  options.rank = 4;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: --rank 4: job j-42 has 4 ranks (0 to 3)\n");
  err_.str("");
  options.rank = 3;
  options.generation = 9;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: --generation 9: job j-42 has generations 1 to 2\n");
  EXPECT_TRUE(calls().logs.empty());
  // Following a running job: its next generation may still come.
  SetLogsJob(&script().get, 2, v1::JOB_STATE_RUNNING);
  options.generation = 3;
  options.follow = true;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(calls().logs.size(), 1u);
}

TEST_F(CommandsTest, LogsFollowOneRank) {
  SetLogsJob(&script().get, 1, v1::JOB_STATE_RUNNING);
  v1::LogChunk chunk;
  AddLine(&chunk, 3, kT0, "hello");
  script().log_chunks = {chunk};
  LogsOptions options;
  options.job_id = "j-42";
  options.follow = true;
  options.rank = 3;
  options.tail_lines = 20;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(), "[rank 3] hello\n");
  v1::StreamLogsRequest sent = calls().logs[0];
  EXPECT_EQ(sent.job_id(), "j-42");
  EXPECT_EQ(sent.rank(), 3);
  EXPECT_TRUE(sent.follow());
  EXPECT_EQ(sent.tail_lines(), 20);
}

TEST_F(CommandsTest, LogsSinceTimestampsAndGeneration) {
  v1::LogChunk old;
  AddLine(&old, 0, kT0 - 700, "before the window");
  v1::LogChunk mixed;
  AddLine(&mixed, 0, kT0 - 601, "just before");
  AddLine(&mixed, 0, kT0 - 60, "step 10");
  AddLine(&mixed, 1, kT0 - 30, "step 10 too")->mutable_time()->set_nanos(500000000);
  script().log_chunks = {old, mixed};
  SetLogsJob(&script().get, 2, v1::JOB_STATE_RUNNING);
  LogsOptions options;
  options.job_id = "j-42";
  options.since = absl::Minutes(10);
  options.timestamps = true;
  options.generation = 2;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "2026-11-18T11:05:40Z [rank 0] step 10\n"
            "2026-11-18T11:06:10.500Z [rank 1] step 10 too\n");
  EXPECT_EQ(calls().logs[0].generation(), 2);

  // json: the chunks without the older lines; a chunk left empty is not printed.
  out_.str("");
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"lines\":[{\"time\":\"2026-11-18T11:05:40Z\",\"text\":\"step 10\"},"
            "{\"rank\":1,\"time\":\"2026-11-18T11:06:10.500Z\",\"text\":\"step 10 too\"}]}\n");
}

TEST_F(CommandsTest, LogsOfAnUnknownJob) {
  script().logs_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
  LogsOptions options;
  options.job_id = "j-404";
  EXPECT_EQ(RunLogs(*stub_, global_, options, console_), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: job j-404 not found (NOT_FOUND)\n");
}

TEST_F(CommandsTest, UnreachableCoordinator) {
  const std::string closed = ClosedAddress();
  auto stub = v1::JobService::NewStub(grpc::CreateChannel(closed, grpc::InsecureChannelCredentials()));
  global_.coordinator = closed;
  EXPECT_EQ(RunNodes(*stub, global_, console_), kExitError);
  EXPECT_EQ(RunJobs(*stub, global_, {}, console_), kExitError);
  const std::string line = "ringmaster: cannot reach the coordinator at " + closed +
                           " (connection refused); start one with `ringmaster local up`\n";
  EXPECT_EQ(err_.str(), line + line);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CommandsTest, OtherErrorsPassTheServerMessage) {
  script().list_nodes_status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
  EXPECT_EQ(RunNodes(*stub_, global_, console_), kExitError);
  script().cancel_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job j-1 is being cancelled");
  EXPECT_EQ(RunCancel(*stub_, global_, {{"j-1"}, ""}, console_), kExitError);
  script().list_jobs_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "store busy");
  EXPECT_EQ(RunJobs(*stub_, global_, {}, console_), kExitError);
  script().checkpoints_status = grpc::Status(grpc::StatusCode::INTERNAL, "disk on fire");
  EXPECT_EQ(RunCheckpoints(*stub_, global_, {"j-1", false}, console_), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: the coordinator at " + coordinator_.address() +
                            " does not implement ListNodes\n"
                            "ringmaster: job j-1 is being cancelled (FAILED_PRECONDITION)\n"
                            "ringmaster: the coordinator at " +
                            coordinator_.address() +
                            " is unavailable: store busy (try again)\n"
                            "ringmaster: ListCheckpoints: disk on fire (INTERNAL)\n");
}

}  // namespace
}  // namespace ringmaster::client
