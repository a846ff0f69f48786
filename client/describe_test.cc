// describe against an in-process fake JobService: the job, its spec, every
// setting with its value and source, placement and timeline, exactly; and a
// job that is not there.

#include <string>

#include "absl/strings/str_cat.h"

#include "client/commands.h"
#include "client/commands_test_util.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

using testing::At;
using testing::CommandsTest;
using testing::kT0;
using testing::MakeJob;

TEST_F(CommandsTest, DescribeShowsSpecPlacementAndTimeline) {
  v1::Job job = MakeJob("j-42", "fashion-mnist-mlp", v1::JOB_STATE_RUNNING);
  job.set_generation(2);
  job.set_restarts(1);
  job.set_reason("Running");
  *job.mutable_start_time() = At(kT0 - 240);
  v1::JobSpec* spec = job.mutable_spec();
  spec->mutable_model()->mutable_mlp()->add_hidden_sizes(256);
  spec->mutable_model()->mutable_mlp()->add_hidden_sizes(128);
  spec->mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  spec->mutable_data()->set_batch_size(128);
  spec->mutable_training()->set_epochs(5);
  spec->mutable_optimizer()->set_type(v1::OptimizerSpec::ADAMW);
  spec->mutable_optimizer()->set_lr(0.001);
  spec->mutable_precision()->set_compute(v1::PrecisionSpec::FP32);
  spec->mutable_parallelism()->set_data(2);
  spec->mutable_parallelism()->set_pipeline(1);
  spec->mutable_resources()->set_nodes(1);
  spec->mutable_resources()->set_ranks_per_node(2);
  spec->mutable_resources()->set_device(v1::ResourceSpec::CPU);
  spec->mutable_resources()->set_cpus_per_rank(2);
  spec->mutable_restart()->set_max_restarts(2);
  // As sent (the --set already applied), and as it runs: with the defaults.
  *job.mutable_submitted()->mutable_spec() = *spec;
  job.mutable_submitted()->add_overrides("resources.cpus_per_rank=2");
  ApplyDefaults(spec);
  v1::Placement* placement = job.mutable_placement();
  placement->set_generation(2);
  placement->set_world_size(2);
  placement->set_data_parallel_size(2);
  placement->set_pipeline_parallel_size(1);
  placement->set_nodes(1);
  placement->set_ranks_per_node(2);
  for (int rank = 0; rank < 2; ++rank) {
    v1::RankAssignment* r = placement->add_ranks();
    r->set_global_rank(rank);
    r->set_local_rank(rank);
    r->set_node_id("n-1");
    r->set_hostname("box");
    r->set_data_rank(rank);
  }
  v1::GetJobResponse& response = script().get;
  *response.mutable_job() = job;
  v1::JobEvent* submitted = response.add_events();
  *submitted->mutable_time() = At(kT0 - 300);
  submitted->set_kind(v1::JOB_EVENT_KIND_SUBMITTED);
  submitted->set_to_state(v1::JOB_STATE_QUEUED);
  v1::JobEvent* exited = response.add_events();
  *exited->mutable_time() = At(kT0 - 250);
  exited->set_kind(v1::JOB_EVENT_KIND_RANK_EXITED);
  exited->set_from_state(v1::JOB_STATE_RUNNING);
  exited->set_to_state(v1::JOB_STATE_RESTARTING);
  exited->set_generation(1);
  exited->set_reason("rank 1 on n-1 exited with signal 9");

  EXPECT_EQ(RunDescribe(*stub_, global_, "j-42", console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "Job:            j-42\n"
            "Name:           fashion-mnist-mlp\n"
            "State:          RUNNING (Running)\n"
            "Priority:       0\n"
            "Generation:     2 (1 restarts)\n"
            "Submitted:      2026-11-18T11:01:40Z (5m ago)\n"
            "Started:        2026-11-18T11:02:40Z\n"
            "Ended:          -\n"
            "\n"
            "Spec:\n"
            "  Model:        mlp, hidden [256, 128]\n"
            "  Data:         SYNTHETIC, batch 128\n"
            "  Training:     5 epochs\n"
            "  Optimizer:    ADAMW, lr 0.001\n"
            "  Precision:    FP32\n"
            "  Parallelism:  data 2 x pipeline 1\n"
            "  Resources:    1 node(s) x 2 rank(s), CPU, 2 cpu(s)/rank\n"
            "  Restarts:     at most 2\n"
            "\n"
            "Settings:\n"
            "SETTING                           VALUE              SOURCE\n"
            "name                              fashion-mnist-mlp  spec\n"
            "model.mlp.hidden_sizes            [256, 128]         spec\n"
            "data.dataset                      SYNTHETIC          spec\n"
            "data.path                         \"\"                 default\n"
            "data.batch_size                   128                spec\n"
            "data.seed                         0                  default\n"
            "data.holdout_fraction             0                  default\n"
            "data.synthetic_samples            65536              default\n"
            "training.epochs                   5                  spec\n"
            "training.eval_interval_steps      0                  default\n"
            "training.log_interval_steps       10                 default\n"
            "optimizer.type                    ADAMW              spec\n"
            "optimizer.lr                      0.001              spec\n"
            "optimizer.weight_decay            0.01               default\n"
            "optimizer.betas                   [0.9, 0.999]       default\n"
            "optimizer.eps                     1e-08              default\n"
            "optimizer.grad_clip_norm          0                  default\n"
            "lr_schedule.type                  CONSTANT           default\n"
            "lr_schedule.warmup_steps          0                  default\n"
            "lr_schedule.scaling_rule          NONE               default\n"
            "precision.compute                 FP32               spec\n"
            "parallelism.data                  2                  spec\n"
            "parallelism.pipeline              1                  spec\n"
            "parallelism.micro_batches         1                  default\n"
            "parallelism.schedule              ONE_F_ONE_B        default\n"
            "parallelism.bucket_size_mb        25                 default\n"
            "parallelism.zero1                 false              default\n"
            "parallelism.gradient_compression  NONE               default\n"
            "resources.nodes                   1                  spec\n"
            "resources.ranks_per_node          2                  spec\n"
            "resources.device                  CPU                spec\n"
            "resources.cpus_per_rank           2                  --set\n"
            "resources.cuda_graphs             \"\"                 default\n"
            "checkpoint.interval               auto               default\n"
            "checkpoint.keep                   3                  default\n"
            "checkpoint.directory              \"\"                 default\n"
            "restart.max_restarts              2                  spec\n"
            "restart.progress_timeout_seconds  600                default\n"
            "restart.move_stragglers           false              default\n"
            "priority                          0                  default\n"
            "seed                              0                  default\n"
            "queue                             \"\"                 default\n"
            "\n"
            "Placement: generation 2, 2 ranks on 1 node(s) x 2, data 2 x pipeline 1\n"
            "RANK  NODE  HOSTNAME  LOCAL  NODE_RANK  DATA  STAGE  GPU\n"
            "0     n-1   box       0      0          0     0      -\n"
            "1     n-1   box       1      0          1     0      -\n"
            "\n"
            "Events:\n"
            "TIME                  GEN  EVENT        STATE                  REASON\n"
            "2026-11-18T11:01:40Z  0    SUBMITTED    UNSPECIFIED -> QUEUED  -\n"
            "2026-11-18T11:02:30Z  1    RANK_EXITED  RUNNING -> RESTARTING  rank 1 on n-1 exited with signal 9\n");
  ASSERT_EQ(calls().get.size(), 1u);
  EXPECT_TRUE(calls().get[0].include_events());
}

TEST_F(CommandsTest, DescribeSaysWhenWhereSettingsCameFromIsUnknown) {
  v1::Job job = MakeJob("j-7", "old", v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->mutable_model()->mutable_mlp();
  job.mutable_spec()->mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  ApplyDefaults(job.mutable_spec());  // no Job.submitted: submitted to an older coordinator
  *script().get.mutable_job() = job;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-7", console_), kExitOk);
  const std::string out = out_.str();
  EXPECT_THAT(out, ::testing::HasSubstr("\nSettings: (where each came from was not recorded: the job predates it)\n"
                                        "SETTING "));
  EXPECT_THAT(out, ::testing::ContainsRegex("\nresources.device +CUDA +-\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("\nmodel.mlp.hidden_sizes +\\[256, 128\\] +-\n"));
}

v1::JobEvent Commit(int64_t sequence, int64_t folded = 0) {
  v1::JobEvent e;
  e.set_sequence(sequence);
  *e.mutable_time() = At(kT0 - 100 + sequence);
  e.set_kind(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED);
  e.set_from_state(v1::JOB_STATE_RUNNING);
  e.set_to_state(v1::JOB_STATE_RUNNING);
  e.set_generation(1);
  e.set_reason(absl::StrCat("step ", sequence));
  e.set_folded(folded);
  return e;
}

// The timeline comes in pages, newest first: describe reads them all and
// shows them oldest first, with what the coordinator folded counted; -o json
// prints them as one response.
TEST_F(CommandsTest, DescribeReadsEveryPageOfTheTimelineAndShowsFoldedEvents) {
  v1::Job job = MakeJob("j-9", "long", v1::JOB_STATE_RUNNING);
  v1::GetJobResponse& newest = script().get;
  *newest.mutable_job() = job;
  *newest.add_events() = Commit(9000, /*folded=*/8967);
  *newest.add_events() = Commit(9001);
  newest.set_events_next_page_token("9000");
  v1::GetJobResponse& older = script().get_pages["9000"];
  *older.mutable_job() = job;
  *older.add_events() = Commit(1);
  older.mutable_events(0)->set_kind(v1::JOB_EVENT_KIND_SUBMITTED);
  *older.add_events() = Commit(2);

  EXPECT_EQ(RunDescribe(*stub_, global_, "j-9", console_), kExitOk);
  const std::string out = out_.str();
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "Events:\n"
                       "TIME                  GEN  EVENT                 STATE    REASON\n"
                       "2026-11-18T11:05:01Z  1    SUBMITTED             RUNNING  step 1\n"
                       "2026-11-18T11:05:02Z  1    CHECKPOINT_COMMITTED  RUNNING  step 2\n"
                       "...                        CHECKPOINT_COMMITTED           8967 more, folded\n"
                       "2026-11-18T13:35:00Z  1    CHECKPOINT_COMMITTED  RUNNING  step 9000\n"
                       "2026-11-18T13:35:01Z  1    CHECKPOINT_COMMITTED  RUNNING  step 9001\n"));
  FakeJobService::Calls c = calls();
  ASSERT_EQ(c.get.size(), 2u);
  EXPECT_EQ(c.get[0].events_page_token(), "");
  EXPECT_EQ(c.get[1].events_page_token(), "9000");

  out_.str("");
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-9", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("\"reason\":\"step 1\""));
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("\"folded\":\"8967\""));
  EXPECT_THAT(out_.str(), ::testing::Not(::testing::HasSubstr("eventsNextPageToken")));
  EXPECT_LT(out_.str().find("step 1"), out_.str().find("step 9001"));
}

TEST_F(CommandsTest, DescribeSaysWhenAJobIsAbridged) {
  v1::Job job = MakeJob("j-1", "huge", v1::JOB_STATE_QUEUED);
  job.set_abridged(true);
  *script().get.mutable_job() = job;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-1", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("Abridged:       stored before the spec's limits and too large to "
                                               "show whole: its labels, node selectors and env are cut to their "
                                               "limits\n"));
}

TEST_F(CommandsTest, DescribeShowsWhereTheTimeWent) {
  v1::Job job = MakeJob("j-7", "gpt", v1::JOB_STATE_RUNNING);
  v1::GoodputBreakdown* g = job.mutable_goodput();
  *g->mutable_first_placement_time() = At(kT0 - 200);
  g->set_queued_seconds(10);
  g->set_starting_seconds(5);
  g->set_training_seconds(158);
  g->set_checkpoint_stall_seconds(2);
  g->set_recomputed_seconds(30);
  g->set_restart_seconds(5);
  g->set_goodput(0.79);
  *script().get.mutable_job() = job;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-7", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("Goodput:        79.0% of the time since placed\n"
                                               "Time:           training 158s, checkpoint stall 2s, recomputed 30s, "
                                               "restart 5s, starting 5s, queued 10s\n"));
}

TEST_F(CommandsTest, DescribeShowsTheCheckpointIntervalAndWhy) {
  v1::Job job = MakeJob("j-9", "gpt", v1::JOB_STATE_RUNNING);
  job.mutable_checkpoint_interval()->set_seconds(12.4);
  job.mutable_checkpoint_interval()->set_why("auto: sqrt(2 x 4ms stall x 5h20m MTBF) = 12.4s; MTBF: the prior");
  *script().get.mutable_job() = job;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-9", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("Checkpoints:    every 12.4s (auto: sqrt(2 x 4ms stall x 5h20m MTBF) = "
                                               "12.4s; MTBF: the prior)\n"));
  job.mutable_checkpoint_interval()->Clear();
  job.mutable_checkpoint_interval()->set_steps(250);
  job.mutable_checkpoint_interval()->set_why("checkpoint.interval_steps 250 (the spec)");
  *script().get.mutable_job() = job;
  out_.str("");
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-9", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("Checkpoints:    every 250 steps (checkpoint.interval_steps 250 (the "
                                               "spec))\n"));
}

TEST_F(CommandsTest, DescribeSaysAQueuedJobHasNoGoodputYet) {
  v1::Job job = MakeJob("j-8", "gpt", v1::JOB_STATE_QUEUED);
  job.mutable_goodput()->set_queued_seconds(42);
  *script().get.mutable_job() = job;
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-8", console_), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::HasSubstr("Goodput:        - (queued 42s, not placed yet)\n"));
}

TEST_F(CommandsTest, NotFoundNamesTheJob) {
  script().get_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "no job \"j-42\"");
  EXPECT_EQ(RunDescribe(*stub_, global_, "j-42", console_), kExitError);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "ringmaster: job j-42 not found (NOT_FOUND)\n");
}

}  // namespace
}  // namespace ringmaster::client
