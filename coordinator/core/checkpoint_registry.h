#ifndef RINGMASTER_COORDINATOR_CHECKPOINT_REGISTRY_H_
#define RINGMASTER_COORDINATOR_CHECKPOINT_REGISTRY_H_

// CheckpointRegistry: the checkpoints of every job, as their writers commit
// them, and their retention.
//
// Owns the committed checkpoints (generation, step, path, per-stage shards
// with their files, sizes and checksums), mirrored in the Store. A
// checkpoint is identified by (job, generation, step): a generation that
// repeats a step after a restart writes a new checkpoint. It is written in
// one of two ways, fixed by its first commit:
//   - whole model: global rank 0 gathered every stage and commits one shard
//     (stage 0, whole_model); that commit completes it. This is what
//     ringmaster-trainer does in every layout, so its checkpoints do not
//     depend on the layout that wrote them.
//   - a shard per stage: data-parallel rank 0 of each pipeline stage, i.e.
//     global rank == stage (common/rank_layout.h), commits its stage; the
//     checkpoint is COMPLETE once every stage has committed.
// Only complete checkpoints that no rank found damaged are ever offered for
// resume (Latest). A damaged one (MarkDamaged) stays listed, as damaged, and
// retention leaves its files alone, for inspection.
//
// Retention: when a commit completes a checkpoint, the complete checkpoints
// of the job beyond the newest `keep` (by step, then generation), and the
// incomplete checkpoints of older generations (which can never complete),
// are pruned: never offered again, their directories returned to the
// committing writer for deletion. The shard, the checkpoint, the pruning and
// the job's CHECKPOINT_COMMITTED event are one Store transaction.
//
// Paths: the coordinator decides where each checkpoint lies
// (common/checkpoint_layout.h: <generation dir>/step-NNNNNNNNN, the
// generation directory handed to the job's ranks). A commit of any other
// path, as text (so no "..", ".", doubled or trailing slash), is refused with
// PERMISSION_DENIED before anything is recorded or pruned: no job can record,
// and so have retention delete or a victim resume from, a directory outside
// its own. Retention hands out for deletion only directories of that layout
// for the job (a record an older coordinator accepted otherwise is dropped
// from the list, never deleted).
//
// Fencing (is the commit's generation the job's current one?) is the
// caller's (JobController's) business.
//
// Thread-safe. One internal mutex guards the records and is never held during
// a Store call: a commit or damage report plans its change under it, writes
// the Store without it, then applies. Changes of one job take turns (a job
// being written is marked; the next change of that job waits for it), so
// readers (Latest, List) and other jobs' commits never wait for a write.

#include <cstdint>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/store/store.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

// One writer's commit (CommitCheckpointRequest, as plain C++).
struct ShardCommit {
  std::string job_id;
  int64_t generation = 0;
  int64_t step = 0;
  std::string path;  // absolute checkpoint directory, the same for every stage
  int32_t rank = 0;
  int32_t pipeline_stage = 0;
  int32_t pipeline_stages = 1;
  bool whole_model = false;  // the files hold every stage (pipeline_stage 0, rank 0)
  std::vector<v1::CheckpointFile> files;
  // Seconds the writer took to write its files; <= 0: unknown. The commit
  // that completes a checkpoint puts it on the CHECKPOINT_COMMITTED event.
  double write_seconds = 0;
  // Seconds training was blocked for it (CommitCheckpointRequest.
  // stall_seconds); unset: unknown, write_seconds is the stall.
  std::optional<double> stall_seconds;
};

struct CommitResult {
  v1::CheckpointInfo checkpoint;         // after the commit
  std::vector<std::string> prune_paths;  // set when the checkpoint is complete
  bool completed = false;   // this commit (or the one it retries) completed it
  bool duplicate = false;   // the same shard was already committed: nothing written
  std::optional<v1::JobEvent> event;  // the event as stored, when this commit completed it
};

class CheckpointRegistry {
 public:
  CheckpointRegistry(const Clock* clock, Store* store);

  // Loads every checkpoint from the store. Call once, before anything else.
  absl::Status Recover();

  // INVALID_ARGUMENT, naming the field, for: a relative path, step < 0,
  // pipeline_stages < 1, a stage outside [0, pipeline_stages), a writer that
  // is not its stage's data-parallel rank 0, no files, a file path that is
  // empty, absolute or holds "..", a negative size, a checksum without
  // algorithm or of the wrong length or not lowercase hex.
  static absl::Status Validate(const ShardCommit& commit);

  // PERMISSION_DENIED, naming the path and the one expected, unless
  // commit.path is exactly CheckpointStepDir(generation_dir, commit.step).
  static absl::Status CheckPath(const ShardCommit& commit, const std::string& generation_dir);

  // Whether `path` is a checkpoint directory of the coordinator's layout for
  // this job, generation and step: normalised, ending in
  // /<job_id>/gen-<generation>/step-NNNNNNNNN.
  static bool IsLayoutPath(const std::string& path, const std::string& job_id, int64_t generation, int64_t step);

  // Records one stage's shard. `generation_dir` is where the coordinator put
  // the commit's generation (JobLifecycle::CheckpointDir); CheckPath first.
  // Idempotent: the same shard again returns the same result (prune_paths
  // included) with duplicate = true. ALREADY_EXISTS for a different shard of
  // a stage already committed; INVALID_ARGUMENT when the path or
  // pipeline_stages differ from the checkpoint's other shards;
  // FAILED_PRECONDITION for a checkpoint already pruned. `keep` is
  // CheckpointPolicy.keep (>= 1). `event_if_complete` is appended to the
  // job's timeline if this commit completes the checkpoint, and
  // `goodput_if_complete` (the job's account after that event) stored with it.
  absl::StatusOr<CommitResult> Commit(const ShardCommit& commit, const std::string& generation_dir, int32_t keep,
                                      std::optional<v1::JobEvent> event_if_complete,
                                      std::optional<v1::GoodputBreakdown> goodput_if_complete = std::nullopt);

  // Marks a checkpoint damaged (why: `damage`) so that it is never offered
  // again; `event` is appended to the job's timeline with it. Idempotent:
  // marking it again changes nothing and returns false; true when this call
  // marked it. NOT_FOUND for an unknown or pruned checkpoint.
  absl::StatusOr<bool> MarkDamaged(const std::string& job_id, int64_t generation, int64_t step,
                                   const std::string& damage, v1::JobEvent event);

  // The newest complete, undamaged, unpruned checkpoint; NOT_FOUND if none.
  absl::StatusOr<v1::CheckpointInfo> Latest(const std::string& job_id) const;
  // Unpruned checkpoints (damaged ones included, with their damage), newest
  // (step, then generation) first.
  std::vector<v1::CheckpointInfo> List(const std::string& job_id, bool include_incomplete) const;
  // Drops the job's records from memory (after Store::DeleteJobs; retention).
  void Forget(const std::string& job_id);

 private:
  using Key = std::pair<int64_t, int64_t>;  // (generation, step)

  std::vector<std::string> PrunedByLocked(const std::string& job_id, const Key& key) const;

  const Clock* clock_;
  Store* store_;

  // Waits until no change of `job_id` is being written, then marks it as
  // being written; EndWrite clears the mark. With mu_ held.
  void BeginWriteLocked(std::unique_lock<std::mutex>& lock, const std::string& job_id);
  void EndWriteLocked(const std::string& job_id);

  mutable std::mutex mu_;
  std::condition_variable written_;                           // a job's write ended
  std::map<std::string, std::map<Key, StoredCheckpoint>> jobs_;  // guarded by mu_
  std::set<std::string> writing_;                             // jobs whose change is being written
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CHECKPOINT_REGISTRY_H_
