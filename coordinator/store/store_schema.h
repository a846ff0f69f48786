#ifndef RINGMASTER_COORDINATOR_STORE_SCHEMA_H_
#define RINGMASTER_COORDINATOR_STORE_SCHEMA_H_

// The coordinator database's schema and its versioned migrations.
//
// The table schema_version holds one row: the number of the last migration
// applied. Migration N (N = 1, 2, ...) moves the schema from version N-1 to
// N; each runs in its own transaction together with the version bump, so a
// crash leaves the database at N-1 or N, never in between. A database whose
// version is newer than the binary knows is refused (FAILED_PRECONDITION):
// an older coordinator must not write to a schema it does not understand.
//
// Migrations are append-only: once released, a migration's SQL never changes;
// schema changes are new migrations at the end of StoreMigrations().

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/sqlite_db.h"

namespace ringmaster::coordinator {

struct Migration {
  int version;               // 1-based; migrations[i].version == i + 1
  absl::string_view summary;  // one line, for logs
  absl::string_view sql;      // one or more statements
};

// The migrations of this binary, in order.
const std::vector<Migration>& StoreMigrations();

// The schema version of `db`: 0 for a fresh database (no schema_version
// table).
absl::StatusOr<int> SchemaVersion(SqliteDb* db);

// Applies every migration in `migrations` whose version is above the
// database's, in order, each in its own transaction. FAILED_PRECONDITION if
// the database is newer than the last migration; a failing migration is
// rolled back and its error returned (annotated with its version).
absl::Status Migrate(SqliteDb* db, const std::vector<Migration>& migrations);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_STORE_SCHEMA_H_
