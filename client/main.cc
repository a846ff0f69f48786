// ringmaster: the command-line client of the coordinator.
//
// The command set of ARCHITECTURE.md section 7 is declared here with its help
// text; the commands that talk to the coordinator's JobService are wired up
// with issue #5 and until then exit 1 saying so.
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"

namespace {

struct Command {
  const char* name;
  const char* help;
};

constexpr Command kCommands[] = {
    {"submit", "Submit a job spec (YAML or JSON): submit FILE [--set k=v] [--wait|--follow]"},
    {"jobs", "List jobs"},
    {"describe", "Show a job's spec, placement, ranks and timeline: describe JOB"},
    {"logs", "Print a job's logs: logs JOB [-f] [--rank N]"},
    {"cancel", "Cancel a job: cancel JOB"},
    {"nodes", "List nodes"},
    {"checkpoints", "List a job's committed checkpoints: checkpoints JOB"},
    {"plan", "Memory per GPU and time to train for a spec: plan FILE"},
    {"local", "Run a coordinator and a worker on this machine: local up|down|status"},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringmaster: submit, watch and cancel training jobs"};
  ringmaster::CommonFlags common;
  ringmaster::AddCommonFlags(app, &common);
  std::string coordinator = "127.0.0.1:50051";
  std::string output = "table";
  app.add_option("--coordinator", coordinator, "Coordinator address (host:port)")->capture_default_str();
  app.add_option("--output", output, "Output format: table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.require_subcommand(1);
  std::vector<std::string> rest;
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    sub->allow_extras();
    sub->callback([name = c.name] {
      fmt::print(stderr, "ringmaster {}: not available yet: needs the coordinator's JobService (issue #5)\n", name);
      throw CLI::RuntimeError(1);
    });
  }
  CLI11_PARSE(app, argc, argv);
  return 0;
}
