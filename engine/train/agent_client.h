#ifndef RINGMASTER_ENGINE_TRAIN_AGENT_CLIENT_H_
#define RINGMASTER_ENGINE_TRAIN_AGENT_CLIENT_H_

// AgentClient: a trainer's line to the worker that started it (the worker's
// agent socket, ARCHITECTURE.md section 5): step metrics up, checkpoint commits
// up, and the coordinator's requests (stop; checkpoint now) down.
//
// Its rank context (proto/rank_context.proto) names the worker's socket
// (agent, e.g. unix:/var/lib/ringmaster/worker/agent.sock), the job, the
// generation and the rank. Without an agent there is no worker (a
// standalone run) and Connect returns nullptr.
//
// ReportStep never blocks the training step: it keeps the latest metrics and a
// sender thread forwards them at most every `interval`. CommitCheckpoint is a
// blocking call (rank 0's checkpoint writer thread, after a checkpoint is
// written, while the training thread goes on). Thread-safe.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/train/trainer.h"
#include "proto/agent_service.grpc.pb.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/rank_context.pb.h"

namespace ringmaster::engine {

class AgentClient {
 public:
  // nullptr when the context names no agent (no worker started this rank).
  static std::unique_ptr<AgentClient> Connect(const v1::RankContext& context, absl::Duration interval);
  ~AgentClient();

  void ReportStep(const StepReport& step);
  void ReportEval(const EvalReport& eval);
  // Two-phase commit of checkpoint `path` (a step directory with its
  // MANIFEST.json), written by this rank for pipeline stage `stage` of
  // `stages`: verifies every file against the manifest (re-read from disk),
  // then records it with the coordinator, which counts the checkpoint only
  // once every stage's shard is recorded (retried, blocking, for up to 5
  // minutes while the coordinator is unreachable). Then removes the checkpoint
  // directories the coordinator pruned (siblings of `path` only). The write
  // time sent (CommitCheckpointRequest.write_seconds) is the time since the
  // last ReportStep or ReportEval: the trainer writes a checkpoint right after
  // reporting its step (and evaluation), then commits it.
  absl::Status CommitCheckpoint(int64_t step, const std::string& path, int stage, int stages);
  // The same for a whole-model checkpoint (this rank gathered every one of
  // the job's `stages` pipeline stages): one commit completes it. The times
  // sent are the checkpoint's own (its background write, and the training
  // stall: CommitCheckpointRequest.write_seconds, stall_seconds).
  absl::Status CommitWholeModel(const CheckpointReport& checkpoint, int stages);
  // Tells the coordinator that the committed checkpoint this rank was to
  // resume from cannot be read back (`damage` says why), so that the next
  // generation resumes from another. Retried like a commit.
  absl::Status ReportDamaged(const v1::CheckpointInfo& checkpoint, const std::string& damage);
  // This rank's generation ended while the process lives (its world broke,
  // or it was told to stop): asks the worker to carry it on in the job's
  // next generation (AgentService.Rejoin). The next generation's rank context
  // path, or why not (the rank then exits as it would have). Waits at most
  // `wait`; the worker answers sooner.
  absl::StatusOr<std::string> AwaitRejoin(absl::Duration wait);
  // The coordinator answered a report with "stop" (cancelled, or the
  // generation is over).
  bool stop_requested() const;
  // The coordinator answered a report with "checkpoint now" (a node of the
  // job is being drained). Stays true.
  bool checkpoint_requested() const;

  const std::string& job() const { return job_; }
  int64_t generation() const { return generation_; }

 private:
  AgentClient(std::string target, const std::string& secret, std::string job, int64_t generation, int rank,
              absl::Duration interval, std::vector<std::string> checkpoint_roots);
  void SendLoop();
  // `timed` null: the write time is the time since the last report, and
  // the stall is not known.
  absl::Status Commit(v1::CommitCheckpointRequest request, const std::string& path, const CheckpointReport* timed);
  // Runs `call` until it is answered, retrying (training paused) for up to
  // kCommitPatience while the coordinator cannot be reached.
  absl::Status RetryUnavailable(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& call);

  const std::string job_;
  const int64_t generation_;
  const int rank_;
  const absl::Duration interval_;
  // RankContext.checkpoint_roots: what a commit verifies and what it prunes
  // are opened beneath them, never through a link.
  const std::vector<std::string> checkpoint_roots_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
  std::unique_ptr<v1::CheckpointService::Stub> checkpoints_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<v1::StepMetrics> pending_;  // guarded by mu_
  std::optional<v1::StepMetrics> latest_;   // guarded by mu_: the last step reported
  v1::StepMetrics last_eval_;               // guarded by mu_ (eval fields only)
  bool stop_requested_ = false;             // guarded by mu_
  bool checkpoint_requested_ = false;       // guarded by mu_
  absl::Time handed_back_ = absl::InfinitePast();  // guarded by mu_: last ReportStep/ReportEval
  bool shutdown_ = false;                   // guarded by mu_
  std::thread sender_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_AGENT_CLIENT_H_
