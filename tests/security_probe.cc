// security_probe: one NodeService.Register or JobService.ListJobs call with
// the credentials given, printing "<CODE> <message>" (tests/security_test.sh
// uses it for the cases the worker and CLI binaries cannot produce: a TLS
// client without a certificate, exact status codes).
//
//   security_probe TARGET CALL CA [CERT KEY|- -] [JOIN_TOKEN_FILE|-] [BEARER_TOKEN_FILE|-]
//   CALL: register | list-jobs
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "common/grpc_security.h"
#include "common/tls.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/node_service.grpc.pb.h"

namespace {

std::string Arg(int argc, char** argv, int i) { return i < argc && std::string(argv[i]) != "-" ? argv[i] : ""; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: security_probe TARGET register|list-jobs CA [CERT KEY] [JOIN_TOKEN_FILE] [BEARER_FILE]\n";
    return 2;
  }
  const std::string target = argv[1], call = argv[2];
  ringmaster::TlsFiles files{Arg(argc, argv, 3), Arg(argc, argv, 4), Arg(argc, argv, 5)};
  absl::StatusOr<ringmaster::TlsMaterial> tls = ringmaster::LoadTlsMaterial(files, false);
  if (!tls.ok()) {
    std::cerr << tls.status() << "\n";
    return 2;
  }
  ringmaster::Headers headers;
  for (auto [index, header, prefix] : {std::make_tuple(6, ringmaster::kJoinTokenHeader, ""),
                                       std::make_tuple(7, ringmaster::kAuthorizationHeader, "Bearer ")}) {
    const std::string path = Arg(argc, argv, index);
    if (path.empty()) continue;
    absl::StatusOr<std::string> token = ringmaster::ReadSecretFile(path, "token");
    if (!token.ok()) {
      std::cerr << token.status() << "\n";
      return 2;
    }
    headers.emplace_back(header, prefix + *token);
  }
  auto channel = ringmaster::MakeChannel(target, ringmaster::MakeChannelCredentials(&*tls), grpc::ChannelArguments(),
                                         headers);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status status;
  if (call == "register") {
    ringmaster::v1::RegisterNodeRequest request;
    request.mutable_node()->set_hostname("probe");
    request.mutable_node()->set_address("127.0.0.1");
    request.mutable_node()->set_cpu_slots(1);
    ringmaster::v1::RegisterNodeResponse response;
    status = ringmaster::v1::NodeService::NewStub(channel)->Register(&context, request, &response);
  } else {
    ringmaster::v1::ListJobsRequest request;
    ringmaster::v1::ListJobsResponse response;
    status = ringmaster::v1::JobService::NewStub(channel)->ListJobs(&context, request, &response);
  }
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << " "
            << status.error_message() << "\n";
  return 0;
}
