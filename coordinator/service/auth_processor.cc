#include "coordinator/service/auth_processor.h"

#include <string>

#include "common/grpc_security.h"
#include "common/tls.h"
#include "common/grpc_status.h"
#include "grpc/grpc_security_constants.h"

namespace ringmaster::coordinator {
namespace {

// gRPC 1.51 keeps one AuthContext per connection, and properties added to
// it accumulate over the connection's calls. So the caller's identity is
// recorded per credential: "<prefix>.<sha256 of the authorization header>",
// and a handler looks up the header its own call carried.
constexpr char kUserProperty[] = "ringmaster.user.";
constexpr char kAdminProperty[] = "ringmaster.admin.";

std::string Header(const grpc::AuthMetadataProcessor::InputMetadata& metadata, const char* key) {
  auto it = metadata.find(key);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

std::string Property(const grpc::AuthContext& context, const char* name) {
  std::vector<grpc::string_ref> values = context.FindPropertyValues(name);
  return values.empty() ? std::string() : std::string(values.back().data(), values.back().size());
}

}  // namespace

grpc::Status AuthProcessor::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                                    OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  CallCredentials call;
  call.method = Header(auth_metadata, ":path");
  call.authorization = Header(auth_metadata, kAuthorizationHeader);
  call.join_token = Header(auth_metadata, kJoinTokenHeader);
  // The leaf first, then whatever chain the peer sent (intermediates).
  call.client_cert_pem = Property(*context, GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (!call.client_cert_pem.empty()) call.client_cert_pem += Property(*context, GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME);
  absl::StatusOr<Caller> caller = authenticator_->Authenticate(call);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // The authorization header stays (CallerOf reads it); handlers never log metadata.
  if (!call.join_token.empty()) consumed_auth_metadata->emplace(kJoinTokenHeader, call.join_token);
  if (caller->user.empty()) return grpc::Status::OK;
  const std::string key = Sha256Hex(call.authorization);
  if (Property(*context, (kUserProperty + key).c_str()).empty()) {  // once per credential and connection
    context->AddProperty(kUserProperty + key, caller->user);
    if (caller->admin) context->AddProperty(kAdminProperty + key, "1");
  }
  return grpc::Status::OK;
}

Caller CallerOf(const grpc::ServerContextBase& context) {
  Caller caller;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return caller;
  const auto& metadata = context.client_metadata();
  auto header = metadata.find(kAuthorizationHeader);
  if (header == metadata.end()) return caller;
  const std::string key = Sha256Hex(absl::string_view(header->second.data(), header->second.size()));
  caller.user = Property(*auth, (kUserProperty + key).c_str());
  caller.admin = !caller.user.empty() && Property(*auth, (kAdminProperty + key).c_str()) == "1";
  return caller;
}

}  // namespace ringmaster::coordinator
