// node_probe: one node-facing call as a process that is not the node's worker
// would send it, printing "<CODE> <message>" of the call (the first call that
// failed, when it needs several). tests/node_identity_test.sh uses it for the
// attacks on node identity (issue #27, item 3).
//
//   node_probe TARGET CALL [--job J] [--generation G] [--rank R]
//              [--as-node ID] [--register NAME] [--takeover]
//              [--credential-file F] [--join-token-file F] [--secret S]
//              [--checkpoint-root ROOT] [--text T]
//
//   CALL: exit           NodeService.ReportRankExit (exit code 78: unrecoverable)
//         start-failure  a Session message: StartRanksResult{unrecoverable}
//         progress       a Session message: RankProgress (step 999999)
//         push-logs      NodeService.PushLogs: one line (--text)
//         commit         CheckpointService.Commit of <root>/<job>/gen-<g>/step-999999
//         rendezvous     RendezvousService.KvSet (--secret: the generation's)
//         register       NodeService.Register naming --as-node (a takeover)
//
//   --as-node ID       the node id the calls name (default: the one --register got)
//   --register NAME    first registers a node NAME of its own (no slots); its
//                      credential (RegisterNodeResponse.credential, where the
//                      coordinator issues one) then goes with every call
//   --takeover         session calls: first register naming --as-node, as its
//                      worker would, and open that session
//   --credential-file  present this file's first line as the node credential
//
// Session calls end with a heartbeat and wait for its lease (or the stream's
// end), so the message was handled before the stream closes; the stream's
// status is printed. The credential field and header are found by name, so the
// probe builds against any version of the protos.
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/node_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace {

namespace v1 = ringmaster::v1;

constexpr char kCredentialHeader[] = "x-ringmaster-node-credential";

std::string CodeName(grpc::StatusCode code) {
  static const std::map<int, std::string> names = {
      {0, "OK"}, {1, "CANCELLED"}, {2, "UNKNOWN"}, {3, "INVALID_ARGUMENT"}, {4, "DEADLINE_EXCEEDED"},
      {5, "NOT_FOUND"}, {6, "ALREADY_EXISTS"}, {7, "PERMISSION_DENIED"}, {8, "RESOURCE_EXHAUSTED"},
      {9, "FAILED_PRECONDITION"}, {10, "ABORTED"}, {11, "OUT_OF_RANGE"}, {12, "UNIMPLEMENTED"}, {13, "INTERNAL"},
      {14, "UNAVAILABLE"}, {15, "DATA_LOSS"}, {16, "UNAUTHENTICATED"}};
  auto it = names.find(static_cast<int>(code));
  return it == names.end() ? absl::StrCat("CODE_", static_cast<int>(code)) : it->second;
}

int Print(const grpc::Status& status) {
  std::cout << CodeName(status.error_code()) << " " << status.error_message() << "\n";
  return 0;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A string field of `message` by name; empty where the field does not exist.
std::string FieldByName(const google::protobuf::Message& message, const std::string& name) {
  const google::protobuf::FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING) return "";
  return message.GetReflection()->GetString(message, field);
}

struct Probe {
  std::map<std::string, std::string> flags;
  std::shared_ptr<grpc::Channel> channel;
  std::string credential;  // sent with every call when set
  std::string node_id;     // what the calls name
  int64_t session_id = 0;  // from --register / --takeover

  std::string Flag(const std::string& name, const std::string& fallback = "") const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
  int64_t Int(const std::string& name, int64_t fallback) const {
    int64_t v = fallback;
    if (flags.count(name) > 0 && !absl::SimpleAtoi(Flag(name), &v)) {
      std::cerr << "--" << name << ": not an integer\n";
      std::exit(2);
    }
    return v;
  }
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10)) const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    if (!credential.empty()) context->AddMetadata(kCredentialHeader, credential);
    return context;
  }

  // Register: a node of its own (name) or, with name empty, the node
  // `node_id` names with its hostname unknown (a takeover).
  grpc::Status Register(const std::string& name) {
    v1::RegisterNodeRequest request;
    request.mutable_node()->set_node_id(name.empty() ? node_id : "");
    request.mutable_node()->set_hostname(name.empty() ? "takeover" : name);
    request.mutable_node()->set_address(name.empty() ? "127.0.0.2" : "127.0.0.3");
    request.mutable_node()->set_cpu_slots(0);
    v1::RegisterNodeResponse response;
    grpc::Status status = v1::NodeService::NewStub(channel)->Register(Context().get(), request, &response);
    if (!status.ok()) return status;
    if (node_id.empty() || !name.empty()) {
      if (flags.count("as-node") == 0) node_id = response.node_id();
    }
    session_id = response.session_id();
    const std::string issued = FieldByName(response, "credential");
    if (!issued.empty()) credential = issued;
    return status;
  }

  grpc::Status SessionCall(const v1::WorkerMessage& message) {
    auto context = Context();
    auto stream = v1::NodeService::NewStub(channel)->Session(context.get());
    v1::WorkerMessage open;
    open.mutable_open()->set_node_id(node_id);
    open.mutable_open()->set_session_id(session_id);
    v1::WorkerMessage heartbeat;
    *heartbeat.mutable_heartbeat()->mutable_time() = ringmaster::ToProtoTime(absl::Now());
    if (stream->Write(open) && stream->Write(message) && stream->Write(heartbeat)) {
      v1::CoordinatorMessage reply;
      while (stream->Read(&reply)) {
        if (reply.has_lease()) break;  // the message before the heartbeat was handled
      }
    }
    stream->WritesDone();
    v1::CoordinatorMessage rest;
    while (stream->Read(&rest)) {
    }
    return stream->Finish();
  }

  grpc::Status Run(const std::string& call) {
    const std::string job = Flag("job");
    const int64_t generation = Int("generation", 1);
    const int32_t rank = static_cast<int32_t>(Int("rank", 0));
    if (call == "register") return Register("");
    if (call == "exit") {
      v1::ReportRankExitRequest request;
      request.set_node_id(node_id);
      request.set_job_id(job);
      request.set_generation(generation);
      request.set_global_rank(rank);
      request.set_exit_code(78);
      request.set_stderr_tail("INJECTED by node_probe");
      v1::ReportRankExitResponse response;
      return v1::NodeService::NewStub(channel)->ReportRankExit(Context().get(), request, &response);
    }
    if (call == "start-failure" || call == "progress") {
      if (flags.count("takeover") > 0) {
        if (grpc::Status s = Register(""); !s.ok()) return s;
      }
      v1::WorkerMessage message;
      if (call == "start-failure") {
        v1::StartRanksResult* result = message.mutable_start_result();
        result->set_job_id(job);
        result->set_generation(generation);
        result->set_error("INJECTED by node_probe: data.path is outside this node's data roots");
        result->set_unrecoverable(true);
      } else {
        v1::RankProgress* progress = message.mutable_progress();
        progress->set_job_id(job);
        progress->set_generation(generation);
        progress->set_global_rank(rank);
        progress->mutable_metrics()->set_step(999999);
        progress->mutable_metrics()->set_loss(0.0);
      }
      return SessionCall(message);
    }
    if (call == "push-logs") {
      auto context = Context();
      context->AddMetadata("ringmaster-node-id", node_id);
      v1::PushLogsResponse response;
      auto writer = v1::NodeService::NewStub(channel)->PushLogs(context.get(), &response);
      v1::LogChunk chunk;
      v1::LogLine* line = chunk.add_lines();
      line->set_job_id(job);
      line->set_generation(generation);
      line->set_rank(rank);
      line->set_stream(v1::LOG_STREAM_STDOUT);
      line->set_sequence(Int("sequence", 1000000));
      *line->mutable_time() = ringmaster::ToProtoTime(absl::Now());
      line->set_text(Flag("text", "INJECTED by node_probe"));
      writer->Write(chunk);
      writer->WritesDone();
      return writer->Finish();
    }
    if (call == "commit") {
      v1::CommitCheckpointRequest request;
      request.set_job_id(job);
      request.set_generation(generation);
      request.set_step(999999);
      request.set_path(absl::StrCat(Flag("checkpoint-root"), "/", job, "/gen-", generation, "/step-999999"));
      request.set_rank(rank);
      request.set_pipeline_stage(0);
      request.set_pipeline_stages(1);
      request.set_whole_model(true);
      v1::CheckpointFile* file = request.add_files();
      file->set_path("model.safetensors");
      file->set_size_bytes(8);
      v1::CommitCheckpointResponse response;
      return v1::CheckpointService::NewStub(channel)->Commit(Context().get(), request, &response);
    }
    if (call == "rendezvous") {
      v1::KvSetRequest request;
      request.mutable_scope()->set_job_id(job);
      request.mutable_scope()->set_generation(generation);
      request.mutable_scope()->set_rank(rank);
      request.mutable_scope()->set_secret(Flag("secret"));
      request.set_key("INJECTED");
      request.set_value("by node_probe");
      v1::KvSetResponse response;
      return v1::RendezvousService::NewStub(channel)->KvSet(Context().get(), request, &response);
    }
    std::cerr << "unknown call " << call << "\n";
    std::exit(2);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: node_probe TARGET exit|start-failure|progress|push-logs|commit|rendezvous|register "
                 "[--FLAG VALUE ...]\n";
    return 2;
  }
  Probe probe;
  for (int i = 3; i < argc; ++i) {
    std::string name = argv[i];
    if (name.rfind("--", 0) != 0) {
      std::cerr << "unexpected argument " << name << "\n";
      return 2;
    }
    name = name.substr(2);
    if (name == "takeover") {
      probe.flags[name] = "1";
    } else if (i + 1 < argc) {
      probe.flags[name] = argv[++i];
    } else {
      std::cerr << "--" << name << " needs a value\n";
      return 2;
    }
  }
  ringmaster::Headers headers;
  if (!probe.Flag("join-token-file").empty()) {
    headers.emplace_back(ringmaster::kJoinTokenHeader, FirstLine(probe.Flag("join-token-file")));
  }
  probe.channel = ringmaster::MakeChannel(argv[1], grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
                                          headers);
  if (!probe.Flag("credential-file").empty()) probe.credential = FirstLine(probe.Flag("credential-file"));
  probe.node_id = probe.Flag("as-node");
  if (!probe.Flag("register").empty()) {
    if (grpc::Status s = probe.Register(probe.Flag("register")); !s.ok()) return Print(s);
  }
  return Print(probe.Run(argv[2]));
}
