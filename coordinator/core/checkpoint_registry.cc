#include "coordinator/core/checkpoint_registry.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint_layout.h"
#include "common/status_macros.h"
#include "common/proto_time.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

absl::Status Invalid(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

absl::Status ValidateFile(const v1::CheckpointFile& f, int i) {
  const std::string field = absl::StrCat("files[", i, "]");
  if (f.path().empty()) return Invalid(field + ".path", "must not be empty");
  if (f.path().front() == '/') return Invalid(field + ".path", absl::StrCat("must be relative, got \"", f.path(), "\""));
  for (absl::string_view part : absl::StrSplit(f.path(), '/')) {
    if (part == "..") return Invalid(field + ".path", absl::StrCat("must not contain \"..\", got \"", f.path(), "\""));
  }
  if (f.size_bytes() < 0) return Invalid(field + ".size_bytes", absl::StrCat("must be >= 0, got ", f.size_bytes()));
  size_t want = 0;
  switch (f.checksum().algorithm()) {
    case v1::FileChecksum::SHA256:
      want = 64;
      break;
    case v1::FileChecksum::CRC32:
      want = 8;
      break;
    default:
      return Invalid(field + ".checksum.algorithm", "must be SHA256 or CRC32");
  }
  const std::string& hex = f.checksum().hex();
  if (hex.size() != want) {
    return Invalid(field + ".checksum.hex", absl::StrCat("must be ", want, " hex digits, got ", hex.size()));
  }
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return Invalid(field + ".checksum.hex", "must be lowercase hexadecimal");
    }
  }
  return absl::OkStatus();
}

bool SameFiles(const v1::CheckpointShard& shard, const std::vector<v1::CheckpointFile>& files) {
  if (shard.files_size() != static_cast<int>(files.size())) return false;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(shard.files(static_cast<int>(i)), files[i])) return false;
  }
  return true;
}

// Newest first: step, then generation.
bool Newer(const v1::CheckpointInfo& a, const v1::CheckpointInfo& b) {
  return a.step() != b.step() ? a.step() > b.step() : a.generation() > b.generation();
}

}  // namespace

CheckpointRegistry::CheckpointRegistry(const Clock* clock, Store* store) : clock_(clock), store_(store) {}

absl::Status CheckpointRegistry::Recover() {
  ASSIGN_OR_RETURN(std::vector<StoredCheckpoint> stored, store_->LoadCheckpoints());
  std::lock_guard<std::mutex> lock(mu_);
  for (StoredCheckpoint& c : stored) {
    jobs_[c.info.job_id()][{c.info.generation(), c.info.step()}] = std::move(c);
  }
  return absl::OkStatus();
}

absl::Status CheckpointRegistry::Validate(const ShardCommit& c) {
  if (c.job_id.empty()) return Invalid("job_id", "must not be empty");
  if (c.generation < 1) return Invalid("generation", absl::StrCat("must be >= 1, got ", c.generation));
  if (c.step < 0) return Invalid("step", absl::StrCat("must be >= 0, got ", c.step));
  if (c.path.empty() || c.path.front() != '/') return Invalid("path", absl::StrCat("must be absolute, got \"", c.path, "\""));
  if (c.pipeline_stages < 1) return Invalid("pipeline_stages", absl::StrCat("must be >= 1, got ", c.pipeline_stages));
  if (c.pipeline_stage < 0 || c.pipeline_stage >= c.pipeline_stages) {
    return Invalid("pipeline_stage",
                   absl::StrCat("must be in [0, ", c.pipeline_stages, "), got ", c.pipeline_stage));
  }
  if (c.whole_model && c.pipeline_stage != 0) {
    return Invalid("pipeline_stage", absl::StrCat("a whole-model checkpoint is committed as stage 0, got ",
                                                  c.pipeline_stage));
  }
  // Data-parallel rank 0 of stage s is global rank s (common/rank_layout.h);
  // global rank 0 writes a whole-model checkpoint.
  if (c.rank != c.pipeline_stage) {
    return Invalid("rank", absl::StrCat("only data-parallel rank 0 of stage ", c.pipeline_stage, " (global rank ",
                                        c.pipeline_stage, ") commits its shard, got rank ", c.rank));
  }
  if (c.files.empty()) return Invalid("files", "at least one file is required");
  for (size_t i = 0; i < c.files.size(); ++i) RETURN_IF_ERROR(ValidateFile(c.files[i], static_cast<int>(i)));
  return absl::OkStatus();
}

absl::Status CheckpointRegistry::CheckPath(const ShardCommit& c, const std::string& generation_dir) {
  const std::string expected = CheckpointStepDir(generation_dir, c.step);
  if (c.path == expected) return absl::OkStatus();
  bool unnormalised = absl::StrContains(c.path, "//") || absl::EndsWith(c.path, "/");
  for (absl::string_view part : absl::StrSplit(c.path, '/')) unnormalised |= part == "." || part == "..";
  return absl::PermissionDeniedError(absl::StrCat(
      "path: \"", c.path, "\" is not where the coordinator put this checkpoint: step ", c.step, " of job ", c.job_id,
      " (generation ", c.generation, ") goes to \"", expected, "\"",
      unnormalised ? " (a path with \"..\", \".\" or doubled slashes is never accepted)" : ""));
}

bool CheckpointRegistry::IsLayoutPath(const std::string& path, const std::string& job_id, int64_t generation,
                                      int64_t step) {
  const std::string tail = absl::StrCat("/", job_id, "/gen-", generation, "/", CheckpointStepName(step));
  if (path.size() <= tail.size() || !absl::EndsWith(path, tail) || path.front() != '/') return false;
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

std::vector<std::string> CheckpointRegistry::PrunedByLocked(const std::string& job_id, const Key& key) const {
  std::vector<std::string> paths;
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return paths;
  for (const auto& [k, c] : job->second) {
    if (c.pruned && c.pruned_by_generation == key.first && c.pruned_by_step == key.second &&
        IsLayoutPath(c.info.path(), job_id, k.first, k.second)) {
      paths.push_back(c.info.path());
    }
  }
  return paths;
}

absl::StatusOr<CommitResult> CheckpointRegistry::Commit(const ShardCommit& commit, const std::string& generation_dir,
                                                        int32_t keep, std::optional<v1::JobEvent> event_if_complete,
                                                        std::optional<v1::GoodputBreakdown> goodput_if_complete) {
  RETURN_IF_ERROR(Validate(commit));
  RETURN_IF_ERROR(CheckPath(commit, generation_dir));
  if (keep < 1) return Invalid("keep", absl::StrCat("must be >= 1, got ", keep));
  std::unique_lock<std::mutex> lock(mu_);
  BeginWriteLocked(lock, commit.job_id);
  struct EndWrite {
    CheckpointRegistry* registry;
    const std::string& job_id;
    ~EndWrite() { registry->EndWriteLocked(job_id); }  // mu_ is held again by then
  } end_write{this, commit.job_id};
  std::map<Key, StoredCheckpoint>& checkpoints = jobs_[commit.job_id];
  const Key key{commit.generation, commit.step};
  auto it = checkpoints.find(key);
  const std::string what = absl::StrCat("checkpoint of job ", commit.job_id, " at step ", commit.step,
                                        " (generation ", commit.generation, ")");
  StoredCheckpoint next;
  if (it != checkpoints.end()) {
    const StoredCheckpoint& existing = it->second;
    if (existing.pruned) return absl::FailedPreconditionError(absl::StrCat(what, " was pruned"));
    if (existing.info.path() != commit.path) {
      return Invalid("path", absl::StrCat("the ", what, " is at \"", existing.info.path(), "\", got \"",
                                          commit.path, "\""));
    }
    if (existing.info.pipeline_stages() != commit.pipeline_stages) {
      return Invalid("pipeline_stages", absl::StrCat("the ", what, " has ", existing.info.pipeline_stages(),
                                                     " stages, got ", commit.pipeline_stages));
    }
    if (existing.info.whole_model() != commit.whole_model) {
      return Invalid("whole_model", absl::StrCat("the ", what, " is ",
                                                 existing.info.whole_model() ? "a whole-model checkpoint"
                                                                             : "committed a shard per stage",
                                                 ", got a commit that is ",
                                                 commit.whole_model ? "whole-model" : "one stage's shard"));
    }
    for (const v1::CheckpointShard& shard : existing.info.shards()) {
      if (shard.pipeline_stage() != commit.pipeline_stage) continue;
      if (!SameFiles(shard, commit.files)) {
        return absl::AlreadyExistsError(absl::StrCat("stage ", commit.pipeline_stage, " of the ", what,
                                                     " was already committed with other files"));
      }
      CommitResult dup;
      dup.checkpoint = existing.info;
      dup.duplicate = true;
      dup.completed = existing.info.complete();
      if (dup.completed) dup.prune_paths = PrunedByLocked(commit.job_id, key);
      return dup;
    }
    next = existing;
  } else {
    next.info.set_job_id(commit.job_id);
    next.info.set_generation(commit.generation);
    next.info.set_step(commit.step);
    next.info.set_path(commit.path);
    next.info.set_pipeline_stages(commit.pipeline_stages);
    next.info.set_whole_model(commit.whole_model);
  }

  const google::protobuf::Timestamp now = ToProtoTime(clock_->Now());
  v1::CheckpointShard shard;
  shard.set_pipeline_stage(commit.pipeline_stage);
  shard.set_rank(commit.rank);
  for (const v1::CheckpointFile& f : commit.files) *shard.add_files() = f;
  *shard.mutable_commit_time() = now;
  *next.info.add_shards() = shard;
  std::sort(next.info.mutable_shards()->begin(), next.info.mutable_shards()->end(),
            [](const v1::CheckpointShard& a, const v1::CheckpointShard& b) { return a.pipeline_stage() < b.pipeline_stage(); });
  int64_t total = 0;
  for (const v1::CheckpointShard& s : next.info.shards()) {
    for (const v1::CheckpointFile& f : s.files()) total += f.size_bytes();
  }
  next.info.set_total_bytes(total);
  *next.info.mutable_commit_time() = now;
  next.info.set_complete(next.info.whole_model() || next.info.shards_size() == next.info.pipeline_stages());

  CheckpointWrite write;
  write.info = next.info;
  write.shard = shard;
  if (next.info.complete()) {
    std::vector<const StoredCheckpoint*> complete = {&next};
    for (const auto& [k, c] : checkpoints) {
      if (c.pruned || k == key) continue;
      if (!c.info.damage().empty()) {
        continue;  // kept for inspection; never resumed from again
      } else if (c.info.complete()) {
        complete.push_back(&c);
      } else if (k.first < commit.generation) {
        write.prune.push_back({commit.job_id, k.first, k.second});  // can never complete
      }
    }
    std::sort(complete.begin(), complete.end(),
              [](const StoredCheckpoint* a, const StoredCheckpoint* b) { return Newer(a->info, b->info); });
    for (size_t i = static_cast<size_t>(keep); i < complete.size(); ++i) {
      const v1::CheckpointInfo& old = complete[i]->info;
      // The new checkpoint itself is never pruned by its own commit: a
      // step older than `keep` newer ones is still kept until a newer commit.
      if (complete[i] == &next) continue;
      write.prune.push_back({commit.job_id, old.generation(), old.step()});
    }
    write.event = std::move(event_if_complete);
    if (write.event.has_value()) write.goodput = std::move(goodput_if_complete);
  }
  // Only directories of this job's layout are handed out for deletion.
  std::vector<std::string> prune_paths;
  for (const CheckpointKey& p : write.prune) {
    const std::string& path = checkpoints.at({p.generation, p.step}).info.path();
    if (IsLayoutPath(path, commit.job_id, p.generation, p.step)) {
      prune_paths.push_back(path);
    } else {
      spdlog::warn("job {}: pruned checkpoint record {} lies outside the job's checkpoint layout; its files are left "
                   "alone", commit.job_id, path);
    }
  }
  // The job's records cannot change meanwhile (it is marked as being
  // written), and `checkpoints` stays valid (map nodes are stable).
  lock.unlock();
  absl::StatusOr<std::optional<v1::JobEvent>> stored_event = store_->CommitCheckpoint(write);
  lock.lock();
  if (!stored_event.ok()) return stored_event.status();

  for (const CheckpointKey& p : write.prune) {
    StoredCheckpoint& c = checkpoints.at({p.generation, p.step});
    c.pruned = true;
    c.pruned_by_generation = commit.generation;
    c.pruned_by_step = commit.step;
  }
  checkpoints[key] = next;
  CommitResult result;
  result.checkpoint = next.info;
  result.completed = next.info.complete();
  result.prune_paths = std::move(prune_paths);
  result.event = *std::move(stored_event);
  return result;
}

void CheckpointRegistry::BeginWriteLocked(std::unique_lock<std::mutex>& lock, const std::string& job_id) {
  written_.wait(lock, [&] { return writing_.count(job_id) == 0; });
  writing_.insert(job_id);
}

void CheckpointRegistry::EndWriteLocked(const std::string& job_id) {
  writing_.erase(job_id);
  written_.notify_all();
}

absl::StatusOr<bool> CheckpointRegistry::MarkDamaged(const std::string& job_id, int64_t generation, int64_t step,
                                                     const std::string& damage, v1::JobEvent event) {
  std::unique_lock<std::mutex> lock(mu_);
  BeginWriteLocked(lock, job_id);
  struct EndWrite {
    CheckpointRegistry* registry;
    const std::string& job_id;
    ~EndWrite() { registry->EndWriteLocked(job_id); }
  } end_write{this, job_id};
  StoredCheckpoint* found = nullptr;
  if (auto job = jobs_.find(job_id); job != jobs_.end()) {
    auto it = job->second.find({generation, step});
    if (it != job->second.end() && !it->second.pruned) found = &it->second;
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no checkpoint at step ", step, " of generation ",
                                            generation));
  }
  StoredCheckpoint& c = *found;
  if (!c.info.damage().empty()) return false;
  const std::string why = damage.empty() ? "damaged (no reason given)" : damage;
  const google::protobuf::Timestamp now = ToProtoTime(clock_->Now());
  lock.unlock();
  absl::Status stored = store_->MarkCheckpointDamaged({job_id, generation, step}, why, now, std::move(event)).status();
  lock.lock();
  RETURN_IF_ERROR(stored);
  c.info.set_damage(why);
  *c.info.mutable_damage_time() = now;
  return true;
}

absl::StatusOr<v1::CheckpointInfo> CheckpointRegistry::Latest(const std::string& job_id) const {
  for (v1::CheckpointInfo& c : List(job_id, /*include_incomplete=*/false)) {
    if (c.damage().empty()) return std::move(c);
  }
  return absl::NotFoundError(absl::StrCat("job ", job_id, " has no complete, undamaged checkpoint"));
}

std::vector<v1::CheckpointInfo> CheckpointRegistry::List(const std::string& job_id, bool include_incomplete) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::CheckpointInfo> out;
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return out;
  for (const auto& [k, c] : job->second) {
    if (c.pruned || (!include_incomplete && !c.info.complete())) continue;
    out.push_back(c.info);
  }
  std::sort(out.begin(), out.end(), Newer);
  return out;
}

void CheckpointRegistry::Forget(const std::string& job_id) {
  std::unique_lock<std::mutex> lock(mu_);
  written_.wait(lock, [&] { return writing_.count(job_id) == 0; });  // a write holds a reference into jobs_
  jobs_.erase(job_id);
}

}  // namespace ringmaster::coordinator
