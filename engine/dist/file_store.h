#ifndef RINGMASTER_ENGINE_DIST_FILE_STORE_H_
#define RINGMASTER_ENGINE_DIST_FILE_STORE_H_

// FileStore: a dist::Store in a directory that every participant can reach
// (one node, or a shared filesystem with working flock and rename).
//
//  * One file per key, named from the key's bytes (hex; long keys are
//    shortened with a hash), holding the value's bytes.
//  * Set writes a temporary file in the same directory and renames it over
//    the key's file, so a reader sees either the old or the new value whole.
//  * Get/Wait poll for the files with exponential backoff (1 ms doubling to
//    50 ms) until the deadline, sleeping on the injected Clock.
//  * Add holds an exclusive flock on the key's lock file around its
//    read-modify-write; counters are stored as decimal text ("12"), so Get
//    returns them as such.
//
// Thread-safe, and safe across processes sharing the directory. Nothing is
// fsynced: the store is for rendezvous, not durability.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "engine/dist/store.h"

namespace ringmaster::engine::dist {

class FileStore : public Store {
 public:
  // Uses (creating if needed, with parents) `directory`. `clock` (not owned;
  // default Clock::Real()) paces the polling and the deadlines.
  static absl::StatusOr<std::unique_ptr<FileStore>> Create(const std::string& directory,
                                                           Clock* clock = nullptr);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  const std::string& directory() const { return directory_; }

 private:
  FileStore(std::string directory, Clock* clock) : directory_(std::move(directory)), clock_(clock) {}

  // The file that holds `key`'s value.
  std::string PathOf(const std::string& key) const;
  // The value of `key`, NOT_FOUND if unset.
  absl::StatusOr<std::string> Read(const std::string& key) const;
  // Atomically replaces `key`'s file with `value`.
  absl::Status Write(const std::string& key, const std::string& value);

  const std::string directory_;
  Clock* const clock_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_FILE_STORE_H_
