// The coordinator's disk, through its real services: a job logging far past
// its quota keeps its newest lines behind one marker while another job's logs
// are whole; under the disk reserve (a FakeDiskSpace) PushLogs answers
// RESOURCE_EXHAUSTED, a checkpoint commit is accepted, /metrics and the
// health service say disk_low, and logs are accepted again with a marker
// once space is back.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_layout.h"
#include "common/proto_time.h"
#include "coordinator/store/fake_disk_space.h"
#include "coordinator/store/log_store.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "httplib.h"
#include "gtest/gtest.h"
#include "proto/checkpoint_service.grpc.pb.h"

namespace ringmaster::coordinator::testing {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int kServing = 1, kNotServing = 2;  // grpc.health.v1.HealthCheckResponse.ServingStatus

class LogsDiskTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    config_.log_quota_per_job = 64 << 10;
    config_.disk_reserve = DiskReserveOptions{kGiB, 0};
    config_.disk_space = &disk_;
    StopServer();
    StartServer();
    worker_ = NewWorker("node-a", 2);
    job_id_ = StartCpuJob(worker_.get(), &start_);  // generation 1, STARTING, ranks 0 and 1 on node-a
  }
  void TearDown() override {
    worker_.reset();
    CoordinatorFixture::TearDown();
  }

  v1::LogLine Line(const std::string& job_id, int32_t rank, int64_t sequence) {
    v1::LogLine line;
    line.set_job_id(job_id);
    line.set_generation(1);
    line.set_rank(rank);
    line.set_sequence(sequence);
    *line.mutable_time() = ToProtoTime(absl::FromUnixSeconds(1'800'000'000) + absl::Milliseconds(sequence));
    line.set_text(absl::StrFormat("step %d/100000 epoch 0 | loss 2.3456 | 6000 samples/s | lr 1e-05", sequence));
    return line;
  }
  // One PushLogs stream with `chunks`, as `worker` (default: node-a).
  grpc::Status Push(const std::vector<v1::LogChunk>& chunks, FakeWorker* worker = nullptr) {
    if (worker == nullptr) worker = worker_.get();
    auto context = worker->NodeContext();
    context->AddMetadata("ringmaster-node-id", worker->node_id());
    v1::PushLogsResponse response;
    auto writer = nodes_->PushLogs(context.get(), &response);
    for (const v1::LogChunk& chunk : chunks) {
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  // Lines [from, to] of (job, rank), 100 a chunk.
  std::vector<v1::LogChunk> Chunks(const std::string& job_id, int32_t rank, int64_t from, int64_t to) {
    std::vector<v1::LogChunk> chunks;
    for (int64_t seq = from; seq <= to; ++seq) {
      if ((seq - from) % 100 == 0) chunks.emplace_back();
      *chunks.back().add_lines() = Line(job_id, rank, seq);
    }
    return chunks;
  }
  std::vector<v1::LogLine> Read(const std::string& job_id, std::optional<int32_t> rank = std::nullopt) {
    v1::StreamLogsRequest request;
    request.set_job_id(job_id);
    request.set_generation(1);
    if (rank.has_value()) request.set_rank(*rank);
    auto context = Context();
    auto reader = jobs_->StreamLogs(context.get(), request);
    std::vector<v1::LogLine> lines;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) lines.insert(lines.end(), chunk.lines().begin(), chunk.lines().end());
    grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return lines;
  }
  grpc::Status Commit(int64_t step) {
    v1::CommitCheckpointRequest request;
    request.set_job_id(job_id_);
    request.set_generation(1);
    request.set_step(step);
    request.set_path(CheckpointStepDir(start_.checkpoint_dir(), step));
    request.set_rank(0);
    request.set_pipeline_stage(0);
    request.set_pipeline_stages(1);
    v1::CheckpointFile* file = request.add_files();
    file->set_path("model.safetensors");
    file->set_size_bytes(1024);
    file->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
    file->mutable_checksum()->set_hex("0badf00d");
    v1::CommitCheckpointResponse response;
    auto context = worker_->NodeContext();
    return checkpoints_->Commit(context.get(), request, &response);
  }
  std::string Metrics() { return server_->metrics_registry().ExposeText(); }
  // grpc.health.v1.Health/Check of `service` over the generic stub (no
  // client stub ships with libgrpc++): the request is field 1, the service's
  // name; the answer field 1, the status (1 SERVING, 2 NOT_SERVING). -1 if
  // the call failed.
  int HealthStatus(const std::string& service) {
    grpc::GenericStub stub(channel_);
    std::string encoded;
    if (!service.empty()) encoded = absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())), service);
    grpc::Slice slice(encoded);
    grpc::ByteBuffer request(&slice, 1), response;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<grpc::Status> status;
    auto context = Context();
    stub.UnaryCall(context.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = s;
                     cv.notify_all();
                   });
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return status.has_value(); }) || !status->ok()) return -1;
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return -1;
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    if (bytes.empty()) return 0;
    return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : -1;
  }

  FakeDiskSpace disk_{/*free=*/100 * kGiB, /*total=*/200 * kGiB};
  std::unique_ptr<FakeWorker> worker_;
  std::string job_id_;
  v1::StartRanks start_;
};

TEST_F(LogsDiskTest, AJobPastItsQuotaKeepsItsNewestLinesAndOthersKeepTheirs) {
  std::unique_ptr<FakeWorker> node_b = NewWorker("node-b", 2);
  v1::StartRanks quiet_start;
  const std::string quiet = StartCpuJob(node_b.get(), &quiet_start);
  ASSERT_EQ(quiet_start.job_id(), quiet);
  grpc::Status pushed = Push(Chunks(quiet, 0, 1, 50), node_b.get());
  ASSERT_TRUE(pushed.ok()) << pushed.error_message();
  pushed = Push(Chunks(job_id_, 0, 1, 5000));
  ASSERT_TRUE(pushed.ok()) << pushed.error_message();

  std::vector<v1::LogLine> lines = Read(job_id_);
  ASSERT_GE(lines.size(), 2u);
  const v1::LogLine& marker = lines[0];
  const int64_t shown = static_cast<int64_t>(lines.size()) - 1;
  EXPECT_EQ(marker.dropped_lines() + shown, 5000);
  EXPECT_EQ(marker.text(), absl::StrCat("... ", marker.dropped_lines(), " lines (", marker.dropped_bytes(),
                                        " bytes) dropped: the job's log quota of 64 KiB is full "
                                        "(--log-quota-per-job; the oldest lines go first) ..."));
  EXPECT_EQ(lines.back().sequence(), 5000);
  EXPECT_LE(server_->logs().JobBytes(job_id_), 64 << 10);
  EXPECT_EQ(Read(quiet).size(), 50u);  // the other job: whole, no marker

  const std::string metrics = Metrics();
  EXPECT_NE(metrics.find(absl::StrCat("ringmaster_coordinator_logs_dropped_total{job=\"", job_id_,
                                      "\",reason=\"quota\"} ", marker.dropped_lines(), "\n")),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(absl::StrCat("ringmaster_coordinator_log_bytes{job=\"", job_id_, "\"} ",
                                      server_->logs().JobBytes(job_id_), "\n")),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find(absl::StrCat("ringmaster_coordinator_logs_dropped_total{job=\"", quiet)), std::string::npos);
}

TEST_F(LogsDiskTest, UnderTheReserveLogsAreRefusedAndCommitsAccepted) {
  grpc::Status first = Push(Chunks(job_id_, 0, 1, 3));
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_NE(Metrics().find("ringmaster_coordinator_disk_low 0\n"), std::string::npos);
  EXPECT_EQ(server_->HealthNote(), "");

  disk_.SetFree(300 << 20);  // 300 MiB, under the 1 GiB reserve
  server_->Tick();
  grpc::Status pushed = Push(Chunks(job_id_, 0, 4, 10));
  EXPECT_EQ(pushed.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(pushed.error_message(),
            "the coordinator's disk is low: 300 MiB free on /fake-disk, under its reserve of 1 GiB (--disk-reserve): "
            "new log lines are refused until space is freed");
  EXPECT_EQ(server_->logs().LineCount(job_id_), 3);

  // The database still takes what matters: a checkpoint commit.
  grpc::Status committed = Commit(10);
  EXPECT_TRUE(committed.ok()) << committed.error_message();
  EXPECT_EQ(GetJob(job_id_).last_checkpoint().step(), 10);

  const std::string metrics = Metrics();
  EXPECT_NE(metrics.find("ringmaster_coordinator_disk_low 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(absl::StrCat("ringmaster_coordinator_disk_free_bytes ", 300 << 20, "\n")), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(absl::StrCat("ringmaster_coordinator_disk_reserve_bytes ", kGiB, "\n")), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(absl::StrCat("ringmaster_coordinator_logs_dropped_total{job=\"", job_id_,
                                      "\",reason=\"disk_low\"} 7\n")),
            std::string::npos)
      << metrics;
  // Health: the coordinator serves ("", what probes check); the disk service
  // and the /healthz note say disk_low.
  EXPECT_EQ(server_->HealthNote().rfind("disk_low: ", 0), 0u) << server_->HealthNote();
  httplib::Client http("127.0.0.1", server_->metrics_port());
  httplib::Result healthz = http.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  EXPECT_NE(healthz->body.find("disk_low: "), std::string::npos) << healthz->body;
  EXPECT_EQ(HealthStatus(""), kServing);
  EXPECT_EQ(HealthStatus(CoordinatorServer::kDiskHealthService), kNotServing);

  disk_.SetFree(2 * kGiB);
  server_->Tick();
  EXPECT_EQ(HealthStatus(CoordinatorServer::kDiskHealthService), kServing);
  EXPECT_EQ(server_->HealthNote(), "");
  healthz = http.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->body.find("disk_low"), std::string::npos) << healthz->body;
  ASSERT_TRUE(Push(Chunks(job_id_, 0, 11, 12)).ok());
  std::vector<v1::LogLine> lines = Read(job_id_);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[3].dropped_lines(), 7);
  EXPECT_NE(lines[3].text().find("dropped: the coordinator's disk was under its reserve"), std::string::npos)
      << lines[3].text();
  EXPECT_EQ(lines[4].sequence(), 11);
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
