#ifndef RINGMASTER_ENGINE_DIST_GLOO_TEST_UTIL_H_
#define RINGMASTER_ENGINE_DIST_GLOO_TEST_UTIL_H_

// Multi-process Gloo tests (tests only): the parent runs a TcpStoreServer,
// forks one child per rank, each child connects a TcpStore client, builds its
// GlooProcessGroup and runs the test body, whose exit code the parent checks.
// Children report failed expectations on stderr (gtest's assertions do not
// cross fork) through ChildCheck.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/dist/child_processes.h"
#include "engine/dist/gloo_process_group.h"
#include "engine/dist/store.h"
#include "engine/dist/tcp_store.h"

namespace ringmaster::engine::dist {

// Counts failed expectations of one child, printing each.
class ChildCheck {
 public:
  explicit ChildCheck(int rank) : rank_(rank) {}
  // Records a failure unless `condition`; returns `condition`.
  bool Expect(bool condition, const std::string& what);
  bool Ok(const absl::Status& status, const std::string& what);
  // Records a failure unless `status` has `code` and contains `substring`.
  bool IsError(const absl::Status& status, absl::StatusCode code, const std::string& substring,
               const std::string& what);
  int failures() const { return failures_; }
  int ExitCode() const { return failures_ == 0 ? 0 : 1; }

 private:
  int rank_;
  int failures_ = 0;
};

struct GlooRankContext {
  int rank;
  GlooProcessGroup& group;
  Store& store;  // the test's store (keys outside the group's prefix are free)
  ChildCheck& check;
};

struct GlooTestOptions {
  int size = 2;
  absl::Duration timeout = absl::Seconds(20);  // of the groups
  absl::Duration limit = absl::Seconds(120);   // of the whole run
  std::string key_prefix = "test";
  bool check_calls = false;
};

// Forks `options.size` ranks running `body` and waits for them; a rank whose
// group cannot be built exits 3. Returns each rank's exit.
std::vector<ChildExit> RunGlooRanks(const GlooTestOptions& options,
                                    const std::function<void(GlooRankContext&)>& body);

// The same with a hook in the parent between the fork and the wait (e.g. to
// kill a child); `store` is the parent's client of the same server.
std::vector<ChildExit> RunGlooRanks(const GlooTestOptions& options,
                                    const std::function<void(GlooRankContext&)>& body,
                                    const std::function<void(ChildProcesses&, Store&)>& parent);

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_GLOO_TEST_UTIL_H_
