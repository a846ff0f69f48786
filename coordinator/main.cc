// ringmaster-coordinator: the composition root of the coordinator.
//
// Today it serves gRPC health checking and reflection on its listen address and
// shuts down cleanly on SIGINT/SIGTERM. The job, node, rendezvous and
// checkpoint services are added here as they are built (issue #5).
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "common/signals.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  ringmaster::BlockShutdownSignals();
  CLI::App app{"ringmaster-coordinator: queues, schedules and supervises training jobs"};
  ringmaster::CommonFlags common;
  ringmaster::AddCommonFlags(app, &common);
  std::string listen = "127.0.0.1:50051";
  app.add_option("--listen", listen, "gRPC listen address (host:port)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, "coordinator"); !s.ok()) {
    fmt::print(stderr, "ringmaster-coordinator: {}\n", std::string(s.message()));
    return 2;
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    spdlog::error("cannot listen on {}", listen);
    return 1;
  }
  spdlog::info("ringmaster-coordinator {} listening on {} (port {})", ringmaster::kVersion, listen, bound_port);
  int sig = ringmaster::WaitForShutdownSignal();
  spdlog::info("signal {}: shutting down", sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}
