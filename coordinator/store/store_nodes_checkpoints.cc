// Store: nodes and checkpoints (see store.h).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/proto_time.h"
#include "coordinator/store/store.h"

namespace ringmaster::coordinator {
namespace {

// The NodeInfo fields the store keeps (no lease, no allocations, no counts).
v1::NodeInfo StoredNodeFields(const v1::NodeInfo& node) {
  v1::NodeInfo out;
  out.set_node_id(node.node_id());
  out.set_hostname(node.hostname());
  out.set_address(node.address());
  *out.mutable_gpus() = node.gpus();
  out.set_cpu_slots(node.cpu_slots());
  *out.mutable_labels() = node.labels();
  *out.mutable_data_roots() = node.data_roots();
  out.set_state(node.state());
  *out.mutable_register_time() = node.register_time();
  out.set_worker_version(node.worker_version());
  out.set_cordoned_by(node.cordoned_by());
  out.set_cordon_reason(node.cordon_reason());
  out.set_draining(node.draining());
  out.set_client_identity(node.client_identity());
  out.set_credential_sha256(node.credential_sha256());
  return out;
}

}  // namespace

absl::StatusOr<std::string> Store::PutNode(const v1::NodeInfo& node) {
  ASSIGN_OR_RETURN(std::vector<std::string> ids, PutNodes({node}));
  return ids.front();
}

absl::StatusOr<std::vector<std::string>> Store::PutNodes(const std::vector<v1::NodeInfo>& nodes) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  std::vector<std::string> ids;
  for (const v1::NodeInfo& node : nodes) {
    ASSIGN_OR_RETURN(std::string id, PutNodeLocked(node));
    ids.push_back(std::move(id));
  }
  RETURN_IF_ERROR(txn.Commit());
  return ids;
}

absl::StatusOr<std::string> Store::PutNodeLocked(const v1::NodeInfo& node) {
  std::string node_id = node.node_id();
  bool known = false;
  if (!node_id.empty()) {
    ASSIGN_OR_RETURN(SqliteStatement find, db_.Prepare("SELECT 1 FROM nodes WHERE node_id = ?"));
    find.Bind(1, node_id);
    ASSIGN_OR_RETURN(known, find.Step());
  }
  if (!known) {
    ASSIGN_OR_RETURN(SqliteStatement insert,
                     db_.Prepare("INSERT INTO nodes (hostname, address, info, state, register_time_us) "
                                 "VALUES ('', '', x'', 0, 0)"));
    RETURN_IF_ERROR(insert.Run());
    const int64_t seq = db_.LastInsertRowId();
    node_id = absl::StrCat("n-", seq);
    ASSIGN_OR_RETURN(SqliteStatement set_id, db_.Prepare("UPDATE nodes SET node_id = ? WHERE seq = ?"));
    set_id.Bind(1, node_id).Bind(2, seq);
    RETURN_IF_ERROR(set_id.Run());
  }
  v1::NodeInfo stored = StoredNodeFields(node);
  stored.set_node_id(node_id);
  ASSIGN_OR_RETURN(SqliteStatement update,
                   db_.Prepare("UPDATE nodes SET hostname = ?, address = ?, info = ?, state = ?, "
                               "register_time_us = ? WHERE node_id = ?"));
  update.Bind(1, stored.hostname())
      .Bind(2, stored.address())
      .BindBlob(3, stored.SerializeAsString())
      .Bind(4, static_cast<int64_t>(stored.state()))
      .Bind(5, ToMicros(stored.register_time()))
      .Bind(6, node_id);
  RETURN_IF_ERROR(update.Run());
  return node_id;
}

absl::StatusOr<std::vector<v1::NodeInfo>> Store::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare("SELECT node_id, info FROM nodes WHERE node_id IS NOT NULL ORDER BY seq"));
  std::vector<v1::NodeInfo> nodes;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    v1::NodeInfo& node = nodes.emplace_back();
    if (!node.ParseFromString(stmt.ColumnBlob(1))) {
      return absl::DataLossError(absl::StrCat("store: node ", stmt.ColumnText(0), ": unreadable info"));
    }
    node.set_node_id(stmt.ColumnText(0));
  }
  return nodes;
}

absl::StatusOr<std::optional<v1::JobEvent>> Store::CommitCheckpoint(const CheckpointWrite& write) {
  std::lock_guard<std::mutex> lock(mu_);
  const v1::CheckpointInfo& info = write.info;
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  ASSIGN_OR_RETURN(
      SqliteStatement upsert,
      db_.Prepare("INSERT INTO checkpoints (job_id, generation, step, path, pipeline_stages, complete, "
                  "total_bytes, commit_time_us, whole_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (job_id, generation, step) DO UPDATE SET complete = excluded.complete, "
                  "total_bytes = excluded.total_bytes, commit_time_us = excluded.commit_time_us"));
  upsert.Bind(1, info.job_id())
      .Bind(2, info.generation())
      .Bind(3, info.step())
      .Bind(4, info.path())
      .Bind(5, static_cast<int64_t>(info.pipeline_stages()))
      .Bind(6, static_cast<int64_t>(info.complete() ? 1 : 0))
      .Bind(7, info.total_bytes())
      .Bind(8, ToMicros(info.commit_time()))
      .Bind(9, static_cast<int64_t>(info.whole_model() ? 1 : 0));
  RETURN_IF_ERROR(upsert.Run());

  ASSIGN_OR_RETURN(SqliteStatement shard,
                   db_.Prepare("INSERT INTO checkpoint_shards (job_id, generation, step, pipeline_stage, "
                               "rank, shard, commit_time_us) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  shard.Bind(1, info.job_id())
      .Bind(2, info.generation())
      .Bind(3, info.step())
      .Bind(4, static_cast<int64_t>(write.shard.pipeline_stage()))
      .Bind(5, static_cast<int64_t>(write.shard.rank()))
      .BindBlob(6, write.shard.SerializeAsString())
      .Bind(7, ToMicros(write.shard.commit_time()));
  RETURN_IF_ERROR(shard.Run());

  ASSIGN_OR_RETURN(SqliteStatement prune,
                   db_.Prepare("UPDATE checkpoints SET pruned = 1, pruned_by_generation = ?, "
                               "pruned_by_step = ? WHERE job_id = ? AND generation = ? AND step = ?"));
  for (const CheckpointKey& key : write.prune) {
    prune.Reset();
    prune.Bind(1, info.generation()).Bind(2, info.step()).Bind(3, key.job_id).Bind(4, key.generation).Bind(
        5, key.step);
    RETURN_IF_ERROR(prune.Run());
  }
  std::optional<v1::JobEvent> event;
  if (write.event.has_value()) {
    ASSIGN_OR_RETURN(std::vector<v1::JobEvent> stored, AppendEventsLocked(info.job_id(), {*write.event}));
    event = stored.front();
    if (write.goodput.has_value()) {
      ASSIGN_OR_RETURN(SqliteStatement goodput, db_.Prepare("UPDATE jobs SET goodput = ? WHERE id = ?"));
      goodput.BindBlob(1, write.goodput->SerializeAsString()).Bind(2, info.job_id());
      RETURN_IF_ERROR(goodput.Run());
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return event;
}

absl::StatusOr<std::vector<StoredCheckpoint>> Store::LoadCheckpoints() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare("SELECT job_id, generation, step, path, pipeline_stages, complete, total_bytes, "
                               "commit_time_us, pruned, pruned_by_generation, pruned_by_step, whole_model, "
                               "damage, damage_time_us FROM checkpoints ORDER BY job_id, generation, step"));
  std::vector<StoredCheckpoint> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    StoredCheckpoint& c = out.emplace_back();
    c.info.set_job_id(stmt.ColumnText(0));
    c.info.set_generation(stmt.ColumnInt(1));
    c.info.set_step(stmt.ColumnInt(2));
    c.info.set_path(stmt.ColumnText(3));
    c.info.set_pipeline_stages(static_cast<int32_t>(stmt.ColumnInt(4)));
    c.info.set_complete(stmt.ColumnInt(5) != 0);
    c.info.set_total_bytes(stmt.ColumnInt(6));
    *c.info.mutable_commit_time() = FromMicros(stmt.ColumnInt(7));
    c.pruned = stmt.ColumnInt(8) != 0;
    c.pruned_by_generation = stmt.ColumnIsNull(9) ? 0 : stmt.ColumnInt(9);
    c.pruned_by_step = stmt.ColumnIsNull(10) ? 0 : stmt.ColumnInt(10);
    c.info.set_whole_model(stmt.ColumnInt(11) != 0);
    c.info.set_damage(stmt.ColumnText(12));
    if (!c.info.damage().empty()) *c.info.mutable_damage_time() = FromMicros(stmt.ColumnInt(13));
  }
  ASSIGN_OR_RETURN(SqliteStatement shards,
                   db_.Prepare("SELECT job_id, generation, step, shard FROM checkpoint_shards "
                               "WHERE job_id = ? AND generation = ? AND step = ? ORDER BY pipeline_stage"));
  for (StoredCheckpoint& c : out) {
    shards.Reset();
    shards.Bind(1, c.info.job_id()).Bind(2, c.info.generation()).Bind(3, c.info.step());
    while (true) {
      ASSIGN_OR_RETURN(bool row, shards.Step());
      if (!row) break;
      if (!c.info.add_shards()->ParseFromString(shards.ColumnBlob(3))) {
        return absl::DataLossError(absl::StrCat("store: checkpoint of job ", c.info.job_id(), " step ",
                                                c.info.step(), ": unreadable shard"));
      }
    }
  }
  return out;
}

absl::StatusOr<v1::JobEvent> Store::MarkCheckpointDamaged(const CheckpointKey& key, const std::string& damage,
                                                          const google::protobuf::Timestamp& time,
                                                          v1::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::Begin(&db_));
  ASSIGN_OR_RETURN(SqliteStatement update,
                   db_.Prepare("UPDATE checkpoints SET damage = ?, damage_time_us = ? "
                               "WHERE job_id = ? AND generation = ? AND step = ?"));
  update.Bind(1, damage).Bind(2, ToMicros(time)).Bind(3, key.job_id).Bind(4, key.generation).Bind(5, key.step);
  RETURN_IF_ERROR(update.Run());
  if (db_.Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("store: no checkpoint of job ", key.job_id, " at step ", key.step,
                                            " of generation ", key.generation));
  }
  ASSIGN_OR_RETURN(std::vector<v1::JobEvent> stored, AppendEventsLocked(key.job_id, {std::move(event)}));
  RETURN_IF_ERROR(txn.Commit());
  return stored.front();
}

}  // namespace ringmaster::coordinator
