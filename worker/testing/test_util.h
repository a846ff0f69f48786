#ifndef RINGMASTER_WORKER_TESTING_TEST_UTIL_H_
#define RINGMASTER_WORKER_TESTING_TEST_UTIL_H_

// Helpers for the worker's tests: a short temporary directory (Unix socket
// paths must fit in 107 bytes, which Bazel's TEST_TMPDIR may not), scripts,
// files, and waiting for a condition with a bound. Not thread-safe except
// WaitUntil.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::worker::testing {

// A fresh directory under /tmp, removed (with its contents) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `body` as an executable /bin/sh script at `path`; returns path.
std::string WriteScript(const std::string& path, const std::string& body);
void WriteFile(const std::string& path, const std::string& content);
// The file's content, or "" if it cannot be read.
std::string ReadFile(const std::string& path);
// A "KEY=VALUE" list (a spawned process's environment) as a map.
std::map<std::string, std::string> EnvMap(const std::vector<std::string>& env);
bool FileExists(const std::string& path);

// Polls `pred` every few milliseconds until it holds or `timeout` passes;
// returns its last value.
bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(10));

// True while `pid` is a live process (not gone, not a zombie).
bool ProcessAlive(long pid);

// Whether this test can act as other accounts (root, in a user namespace
// that maps more than root: Bazel's sandbox maps only root). False with the
// reason in `why` otherwise.
bool CanActAsOtherAccounts(std::string* why);

}  // namespace ringmaster::worker::testing

#endif  // RINGMASTER_WORKER_TESTING_TEST_UTIL_H_
