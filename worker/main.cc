// ringmaster-worker: the node agent's composition root.
//
// It reads its flags and configuration; the session with the coordinator, the
// process supervisor and the trainer channel are built with issue #5. Until then
// it exits 1 saying so, rather than pretending to serve.
#include <string>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-worker: runs the trainers of this node for the coordinator"};
  ringmaster::CommonFlags common;
  ringmaster::AddCommonFlags(app, &common);
  std::string coordinator = "127.0.0.1:50051";
  int cpu_slots = 0;
  std::string state_dir = "/var/lib/ringmaster/worker";
  app.add_option("--coordinator", coordinator, "Coordinator address (host:port)")->capture_default_str();
  app.add_option("--cpu-slots", cpu_slots, "Offer N CPU ranks instead of GPUs")->check(CLI::NonNegativeNumber);
  app.add_option("--state-dir", state_dir, "Rank logs and scratch space")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, "worker"); !s.ok()) {
    fmt::print(stderr, "ringmaster-worker: {}\n", std::string(s.message()));
    return 2;
  }
  spdlog::error("the worker's session with the coordinator is not built yet (issue #5)");
  return 1;
}
