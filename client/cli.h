#ifndef RINGMASTER_CLIENT_CLI_H_
#define RINGMASTER_CLIENT_CLI_H_

// What every `ringmaster` command receives: the global options, where to
// write, and the time. Commands are functions
//
//   int RunX(v1::JobService::StubInterface& stub, const GlobalOptions& global,
//            const XOptions& options, Console& console);
//
// returning an exit code, so that tests drive them against an in-process fake
// JobService and read what they wrote, without spawning processes. main.cc
// (the composition root) parses flags and the environment, builds the
// channel and calls them.

#include <istream>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster::client {

// Exit codes (the same for every command).
inline constexpr int kExitOk = 0;
// The request failed: coordinator unreachable, job not found, rejected, ...
inline constexpr int kExitError = 1;
// Bad command line or job spec (nothing was sent).
inline constexpr int kExitUsage = 2;
// submit --wait/--follow, attach: the job ended FAILED or CANCELLED.
inline constexpr int kExitJobFailed = 3;

// -o/--output. Every command takes every format: wide is the table where a
// command has no wider one; json and yaml print each response whole.
enum class OutputFormat {
  kTable,  // aligned columns and labelled fields for people
  kWide,   // the table with more columns (jobs: OWNER, LABELS)
  kJson,   // each response as one line of protobuf JSON (JSON Lines)
  kYaml,   // each response as a YAML document (its protobuf JSON), each after a `---` line
  kCsv,    // the table as CSV (RFC 4180) where a command offers it (usage); others print their table
};

struct GlobalOptions {
  // gRPC target of the coordinator's JobService.
  std::string coordinator = "127.0.0.1:50051";
  OutputFormat output = OutputFormat::kTable;
  // Deadline of every unary call.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How long a broken WatchJob stream (coordinator restarting) is retried
  // before giving up.
  absl::Duration reconnect_timeout = absl::Seconds(60);
};

// Where a command reads and writes. `out` gets results (tables, JSON, ids,
// log lines); `err` gets the one-line error of a failed command.
struct Console {
  std::ostream& out;
  std::ostream& err;
  // `out` is a terminal: progress lines are rewritten in place.
  bool out_is_tty = false;
  // Ages ("3m") and ETAs are computed against it.
  const Clock* clock = Clock::Real();
  // Standard input (`submit -` reads the spec from it); nullptr: none.
  std::istream* in = nullptr;
};

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_CLI_H_
