#include "coordinator/store/sqlite_db.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster::coordinator {

absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return absl::OkStatus();
  std::string msg = absl::StrCat("sqlite: ", what, ": ", sqlite3_errstr(rc));
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && absl::string_view(detail) != sqlite3_errstr(rc)) {
      absl::StrAppend(&msg, " (", detail, ")");
    }
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::AbortedError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::UnavailableError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// ---- SqliteDb ----

absl::StatusOr<SqliteDb> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(rc, db, absl::StrCat("open ", path));
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return SqliteDb(db);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

SqliteDb::~SqliteDb() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::Status SqliteDb::Exec(absl::string_view sql) {
  std::string copy(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, copy.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  return SqliteStatus(rc, db_, copy.size() > 80 ? copy.substr(0, 80) + "..." : copy);
}

absl::StatusOr<SqliteStatement> SqliteDb::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(rc, db_, absl::StrCat("prepare ", sql));
  }
  return SqliteStatement(db_, stmt);
}

absl::StatusOr<int64_t> SqliteDb::QueryInt(absl::string_view sql) {
  absl::StatusOr<SqliteStatement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError(absl::StrCat("sqlite: no row from ", sql));
  return stmt->ColumnInt(0);
}

absl::StatusOr<std::string> SqliteDb::QueryText(absl::string_view sql) {
  absl::StatusOr<SqliteStatement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError(absl::StrCat("sqlite: no row from ", sql));
  return stmt->ColumnText(0);
}

int64_t SqliteDb::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int SqliteDb::Changes() const { return sqlite3_changes(db_); }

// ---- SqliteStatement ----

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : bind_status_(std::move(other.bind_status_)),
      db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    bind_status_ = std::move(other.bind_status_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteStatus(rc, db_, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, absl::string_view text) {
  int rc = sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteStatus(rc, db_, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  // A zero-length blob must still be a blob, not NULL: pass a non-null pointer.
  static const char kEmpty = 0;
  const void* data = bytes.empty() ? &kEmpty : bytes.data();
  int rc = sqlite3_bind_blob(stmt_, index, data, static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteStatus(rc, db_, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteStatus(rc, db_, "bind");
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (!bind_status_.ok()) return bind_status_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(rc, db_, absl::StrCat("step ", sqlite3_sql(stmt_)));
}

absl::Status SqliteStatement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_status_ = absl::OkStatus();
}

int64_t SqliteStatement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }
double SqliteStatement::ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }

std::string SqliteStatement::ColumnText(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), n);
}

std::string SqliteStatement::ColumnBlob(int col) const {
  const void* blob = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return blob == nullptr ? std::string() : std::string(static_cast<const char*>(blob), n);
}

bool SqliteStatement::ColumnIsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

// ---- SqliteTransaction ----

absl::StatusOr<SqliteTransaction> SqliteTransaction::Begin(SqliteDb* db) {
  absl::Status status = db->Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  return SqliteTransaction(db);
}

SqliteTransaction::SqliteTransaction(SqliteTransaction&& other) noexcept
    : db_(other.db_), open_(std::exchange(other.open_, false)) {}

SqliteTransaction::~SqliteTransaction() {
  if (open_) db_->Exec("ROLLBACK").IgnoreError();
}

absl::Status SqliteTransaction::Commit() {
  absl::Status status = db_->Exec("COMMIT");
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace ringmaster::coordinator
