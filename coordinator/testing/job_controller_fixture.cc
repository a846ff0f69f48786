#include "coordinator/testing/job_controller_fixture.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint_layout.h"

namespace ringmaster::coordinator::testing {

void JobControllerFixture::SetUp() {
  path_ = NewTempDir("controller") + "/rm.db";
  options_.rendezvous_timeout = absl::Minutes(5);
  options_.stop_grace_period = absl::Seconds(30);
  options_.checkpoint_root = "/ckpt";
  Start();
}

void JobControllerFixture::TearDown() {
  controller_.reset();
  rendezvous_.reset();
  checkpoints_.reset();
  nodes_.reset();
  store_.reset();
}

void JobControllerFixture::Start() {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path_});
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = std::move(*store);
  nodes_ = std::make_unique<NodeRegistry>(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(5), 3});
  ASSERT_TRUE(nodes_->Recover().ok());
  checkpoints_ = std::make_unique<CheckpointRegistry>(&clock_, store_.get());
  ASSERT_TRUE(checkpoints_->Recover().ok());
  rendezvous_ = std::make_unique<Rendezvous>(&clock_);
  controller_ = std::make_unique<JobController>(&clock_, store_.get(), nodes_.get(), checkpoints_.get(),
                                                rendezvous_.get(), options_);
  rendezvous_->SetListener(&controller_->lifecycle());
  controller_->AddListener(&listener_);
  absl::Status recovered = controller_->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered;
}

void JobControllerFixture::Restart() {
  TearDown();
  sessions_.clear();
  listener_.Clear();
  Start();
}

std::string JobControllerFixture::AddNode(const std::string& hostname, int gpus, int cpu_slots,
                                          std::vector<std::pair<std::string, std::string>> labels,
                                          const std::vector<RunningRank>& running) {
  v1::NodeInfo node = MakeNode(hostname, gpus, cpu_slots, std::move(labels));
  absl::StatusOr<NodeRegistrationResult> r = controller_->reconciler().RegisterNode(node, running);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  sessions_[r->registration.node_id] = r->registration.session_id;
  return r->registration.node_id;
}

void JobControllerFixture::AdvanceWithHeartbeats(absl::Duration d, const std::set<std::string>& silent) {
  // Heartbeat every interval (5 s) along the way, so that only `silent`
  // nodes miss theirs.
  const absl::Duration step = absl::Seconds(5);
  while (d > absl::ZeroDuration()) {
    const absl::Duration now_step = std::min(d, step);
    clock_.Advance(now_step);
    d -= now_step;
    for (const auto& [id, session] : sessions_) {
      if (silent.count(id) == 0) nodes_->Heartbeat(id, session).IgnoreError();
    }
  }
}

std::string JobControllerFixture::MustSubmit(const v1::JobSpec& spec, const std::string& request_id) {
  absl::StatusOr<v1::Job> job = controller_->Submit(spec, {request_id, "alice", false});
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? job->id() : "";
}

v1::Job JobControllerFixture::MustGet(const std::string& job_id) {
  absl::StatusOr<v1::Job> job = controller_->views().GetJob(job_id);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : v1::Job();
}

std::vector<v1::JobEvent> JobControllerFixture::Events(const std::string& job_id) {
  absl::StatusOr<std::vector<v1::JobEvent>> events = controller_->lifecycle().GetEvents(job_id, 0);
  EXPECT_TRUE(events.ok()) << events.status();
  return events.ok() ? *events : std::vector<v1::JobEvent>{};
}

std::vector<StartOrder> JobControllerFixture::Assignments(const std::string& node_id) {
  std::vector<StartOrder> orders;
  controller_->reconciler().AssignmentsForNode(node_id,
                                               [&](const std::vector<StartOrder>& snapshot) { orders = snapshot; });
  return orders;
}

std::string JobControllerFixture::Timeline(const std::string& job_id) {
  std::vector<std::string> parts;
  for (const v1::JobEvent& e : Events(job_id)) {
    std::string kind = v1::JobEventKind_Name(e.kind()).substr(std::string("JOB_EVENT_KIND_").size());
    std::string to = v1::JobState_Name(e.to_state()).substr(std::string("JOB_STATE_").size());
    parts.push_back(absl::StrCat(kind, ":", to));
  }
  return absl::StrJoin(parts, " ");
}

void JobControllerFixture::JoinAll(const std::string& job_id) {
  v1::Job job = MustGet(job_id);
  for (int32_t r = 0; r < job.placement().world_size(); ++r) {
    absl::Status s = rendezvous_->CheckIn({job_id, job.generation(), r});
    EXPECT_TRUE(s.ok()) << s;
  }
}

void JobControllerFixture::Exit(const std::string& job_id, int32_t rank, int exit_code,
                                const std::string& stderr_tail, bool stopped_by_worker, int64_t generation) {
  v1::Job job = MustGet(job_id);
  if (generation < 0) generation = job.generation();
  absl::StatusOr<v1::Placement> p = store_->LoadPlacement(job_id, generation);
  ASSERT_TRUE(p.ok()) << p.status();
  RankExit exit;
  exit.node_id = p->ranks(rank).node_id();
  exit.job_id = job_id;
  exit.generation = generation;
  exit.global_rank = rank;
  exit.exit_code = exit_code;
  exit.stopped_by_worker = stopped_by_worker;
  exit.stderr_tail = stderr_tail;
  absl::Status s = controller_->lifecycle().ReportRankExit(exit);
  EXPECT_TRUE(s.ok()) << s;
}

void JobControllerFixture::ExitAll(const std::string& job_id, int exit_code, bool stopped_by_worker) {
  v1::Job job = MustGet(job_id);
  for (int32_t r = 0; r < job.placement().world_size(); ++r) Exit(job_id, r, exit_code, "", stopped_by_worker);
}

void JobControllerFixture::RunToRunning(const std::string& job_id) {
  controller_->ScheduleNow();
  ASSERT_EQ(State(job_id), v1::JOB_STATE_STARTING) << MustGet(job_id).message();
  JoinAll(job_id);
  ASSERT_EQ(State(job_id), v1::JOB_STATE_RUNNING);
}

ShardCommit JobControllerFixture::CheckpointCommit(const std::string& job_id, int64_t step, int64_t generation) {
  ShardCommit c;
  c.job_id = job_id;
  c.generation = generation < 0 ? MustGet(job_id).generation() : generation;
  c.step = step;
  // Where the coordinator put the generation (its root is /ckpt): any other
  // path is refused.
  c.path = CheckpointStepDir(CheckpointGenerationDir("/ckpt", job_id, c.generation), step);
  c.files.resize(1);
  c.files[0].set_path("model.safetensors");
  c.files[0].set_size_bytes(100);
  c.files[0].mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  c.files[0].mutable_checksum()->set_hex("12345678");
  return c;
}

}  // namespace ringmaster::coordinator::testing
