#ifndef RINGMASTER_COORDINATOR_SQLITE_DB_H_
#define RINGMASTER_COORDINATOR_SQLITE_DB_H_

// A small RAII layer over the SQLite C API: a connection, prepared statements
// and transactions, with every SQLite error turned into an absl::Status whose
// code tells the caller what to do:
//   SQLITE_BUSY / SQLITE_LOCKED        -> ABORTED (retry the transaction)
//   SQLITE_CANTOPEN / SQLITE_IOERR     -> UNAVAILABLE (retry later)
//   SQLITE_FULL                        -> RESOURCE_EXHAUSTED
//   SQLITE_CORRUPT / SQLITE_NOTADB     -> DATA_LOSS
//   SQLITE_CONSTRAINT                  -> ALREADY_EXISTS
//   anything else                      -> INTERNAL
//
// Not thread-safe: one SqliteDb and its statements belong to one thread at a
// time (Store serializes access with its own mutex).

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::coordinator {

// Maps a SQLite result code (and the connection's message) to a Status.
absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view what);

class SqliteStatement;

class SqliteDb {
 public:
  // Opens (creating if needed) the database file at `path`; ":memory:" for
  // an in-memory database.
  static absl::StatusOr<SqliteDb> Open(const std::string& path);

  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  // Runs one or more statements that return no rows.
  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<SqliteStatement> Prepare(absl::string_view sql);
  // Runs a query returning one integer (e.g. "PRAGMA user_version").
  absl::StatusOr<int64_t> QueryInt(absl::string_view sql);
  // Runs a query returning one text value.
  absl::StatusOr<std::string> QueryText(absl::string_view sql);

  int64_t LastInsertRowId() const;
  int Changes() const;
  sqlite3* raw() const { return db_; }

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
};

// A prepared statement. Bind parameters are 1-based, columns 0-based.
class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, absl::string_view text);
  SqliteStatement& BindBlob(int index, absl::string_view bytes);
  SqliteStatement& BindNull(int index);

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion, expecting no rows.
  absl::Status Run();
  // Resets the statement so that it can run again with new bindings.
  void Reset();

  int64_t ColumnInt(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;
  std::string ColumnBlob(int col) const;
  bool ColumnIsNull(int col) const;

 private:
  friend class SqliteDb;
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  // The first binding error, reported by Step/Run.
  absl::Status bind_status_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so a busy
// database fails here, before any work, with ABORTED); ROLLBACK on
// destruction unless Commit() succeeded.
class SqliteTransaction {
 public:
  static absl::StatusOr<SqliteTransaction> Begin(SqliteDb* db);
  SqliteTransaction(SqliteTransaction&& other) noexcept;
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  ~SqliteTransaction();

  absl::Status Commit();

 private:
  explicit SqliteTransaction(SqliteDb* db) : db_(db) {}
  SqliteDb* db_;
  bool open_ = true;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_SQLITE_DB_H_
