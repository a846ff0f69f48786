// checkpoint_probe: one CheckpointService.Commit of a whole-model checkpoint
// (rank 0, stage 0 of 1) with the fields given, as a hostile process would
// send it, printing "<CODE> <message>" and then "prune <path>" for each
// directory the answer says to delete. tests/checkpoint_paths_test.sh uses
// it for forged commits: through a worker's agent socket (unix:PATH, as a
// trainer reaches it) or straight to a local coordinator (HOST:PORT).
//
//   checkpoint_probe TARGET JOB GENERATION STEP PATH MANIFEST [CREDENTIAL_FILE [JOIN_TOKEN_FILE]]
//   MANIFEST: a checkpoint's MANIFEST.json; its files are the commit's files.
//   CREDENTIAL_FILE: its first line goes as the node credential (a process
//   that has a node's credential, e.g. its worker's, compromised); "-": none.
//   JOIN_TOKEN_FILE: its first line goes as the cluster's join token, for a
//   coordinator that requires one (tests/hostile_user_test.sh).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/grpc_security.h"
#include "engine/checkpoint/checkpoint_files.h"
#include "proto/checkpoint_service.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc < 7 || argc > 9) {
    std::cerr << "usage: checkpoint_probe TARGET JOB GENERATION STEP PATH MANIFEST [CREDENTIAL_FILE [JOIN_TOKEN_FILE]]\n";
    return 2;
  }
  const std::string target = argv[1];
  int64_t generation = 0, step = 0;
  if (!absl::SimpleAtoi(argv[3], &generation) || !absl::SimpleAtoi(argv[4], &step)) {
    std::cerr << "GENERATION and STEP must be integers\n";
    return 2;
  }
  std::ifstream in(argv[6], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ringmaster::engine::Manifest> manifest = ringmaster::engine::ParseManifest(text.str(), argv[6]);
  if (!in || !manifest.ok()) {
    std::cerr << "cannot read " << argv[6] << ": " << manifest.status() << "\n";
    return 2;
  }
  ringmaster::v1::CommitCheckpointRequest request;
  request.set_job_id(argv[2]);
  request.set_generation(generation);
  request.set_step(step);
  request.set_path(argv[5]);
  request.set_rank(0);
  request.set_pipeline_stage(0);
  request.set_pipeline_stages(1);
  request.set_whole_model(true);
  for (const ringmaster::engine::ManifestEntry& entry : manifest->files) {
    ringmaster::v1::CheckpointFile* file = request.add_files();
    file->set_path(entry.name);
    file->set_size_bytes(entry.size);
    file->mutable_checksum()->set_algorithm(ringmaster::v1::FileChecksum::SHA256);
    file->mutable_checksum()->set_hex(entry.sha256);
  }
  // The agent socket is plaintext (a Unix socket of the worker's user); a
  // loopback coordinator without TLS takes local credentials.
  auto credentials = absl::StartsWith(target, "unix:") ? grpc::InsecureChannelCredentials()
                                                       : ringmaster::MakeChannelCredentials(nullptr);
  ringmaster::Headers headers;
  // argv[7]: the node credential; argv[8]: the join token.
  for (int i = 7; i < argc; ++i) {
    if (std::string(argv[i]) == "-") continue;
    std::ifstream file(argv[i]);
    std::string line;
    if (!std::getline(file, line)) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 2;
    }
    // common/grpc_security.h kNodeCredentialHeader, spelled out so that the
    // probe also builds against a tree from before node credentials.
    headers.emplace_back(i == 7 ? "x-ringmaster-node-credential" : ringmaster::kJoinTokenHeader, line);
  }
  auto channel = ringmaster::MakeChannel(target, credentials, grpc::ChannelArguments(), headers);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ringmaster::v1::CommitCheckpointResponse response;
  grpc::Status status = ringmaster::v1::CheckpointService::NewStub(channel)->Commit(&context, request, &response);
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << " "
            << status.error_message() << "\n";
  for (const std::string& path : response.prune_paths()) std::cout << "prune " << path << "\n";
  return 0;
}
