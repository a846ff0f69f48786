// Store: accounting. Each placement row records its user, queue, slots and
// the time its generation stopped holding it (store_schema.cc, version 6);
// usage is summed from those rows in one query.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/store.h"

namespace ringmaster::coordinator {
namespace {

const char* GroupColumn(UsageGroup by) {
  switch (by) {
    case UsageGroup::kQueue:
      return "queue";
    case UsageGroup::kJob:
      return "job_id";
    case UsageGroup::kUser:
      break;
  }
  return "user";
}

}  // namespace

absl::Status Store::EndPlacementsLocked(const std::string& job_id, int64_t ended_us) {
  ASSIGN_OR_RETURN(SqliteStatement end,
                   db_.Prepare("UPDATE placements SET ended_us = MAX(?, created_us) "
                               "WHERE job_id = ? AND ended_us IS NULL"));
  end.Bind(1, ended_us).Bind(2, job_id);
  return end.Run();
}

absl::StatusOr<std::vector<UsageTotal>> Store::LoadUsage(const UsageQuery& query) {
  // ?1 since, ?2 now, ?3 user (microseconds). A placement counts when it
  // began by `now` and was held after `since` (or began within the window:
  // one that ended as it began still counts as a placement).
  const std::string column = GroupColumn(query.by);
  const std::string sql = absl::StrCat(
      "SELECT ", column, ", TOTAL(gpus * span) / 1e6, TOTAL(cpu_slots * span) / 1e6, COUNT(*) FROM ("
      "  SELECT ", column, ", gpus, cpu_slots,"
      "    MAX(0, MIN(COALESCE(ended_us, ?2), ?2) - MAX(created_us, ?1)) AS span"
      "  FROM placements"
      "  WHERE created_us <= ?2 AND (ended_us IS NULL OR ended_us > ?1 OR created_us >= ?1)"
      "    AND (?3 = '' OR user = ?3))"
      " GROUP BY 1 ORDER BY 1");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt, db_.Prepare(sql));
  stmt.Bind(1, absl::ToUnixMicros(query.since)).Bind(2, absl::ToUnixMicros(query.now)).Bind(3, query.user);
  std::vector<UsageTotal> totals;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    UsageTotal& t = totals.emplace_back();
    t.key = stmt.ColumnText(0);
    t.gpu_seconds = stmt.ColumnDouble(1);
    t.cpu_slot_seconds = stmt.ColumnDouble(2);
    t.placements = stmt.ColumnInt(3);
  }
  return totals;
}

absl::StatusOr<std::vector<PlacementHold>> Store::LoadPlacementHolds(absl::Time since) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   db_.Prepare("SELECT queue, created_us, ended_us, gpus, cpu_slots FROM placements "
                               "WHERE ended_us IS NULL OR ended_us >= ?"));
  stmt.Bind(1, absl::ToUnixMicros(since));
  std::vector<PlacementHold> holds;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    PlacementHold& h = holds.emplace_back();
    h.queue = stmt.ColumnText(0);
    h.start = absl::FromUnixMicros(stmt.ColumnInt(1));
    if (!stmt.ColumnIsNull(2)) h.end = absl::FromUnixMicros(stmt.ColumnInt(2));
    h.gpus = stmt.ColumnInt(3);
    h.cpu_slots = stmt.ColumnInt(4);
  }
  return holds;
}

}  // namespace ringmaster::coordinator
