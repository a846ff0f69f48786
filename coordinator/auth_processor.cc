#include "coordinator/auth_processor.h"

#include <string>

#include "common/grpc_security.h"
#include "coordinator/grpc_status.h"
#include "grpc/grpc_security_constants.h"

namespace ringmaster::coordinator {
namespace {

constexpr char kUserProperty[] = "ringmaster.user";
constexpr char kAdminProperty[] = "ringmaster.admin";
constexpr char kWorkerProperty[] = "ringmaster.worker";

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
  for (const char* key : {kAuthorizationHeader, kJoinTokenHeader}) {
    if (auth_metadata.count(key) > 0) consumed_auth_metadata->emplace(key, Header(auth_metadata, key));
  }
  if (!caller->user.empty()) context->AddProperty(kUserProperty, caller->user);
  if (caller->admin) context->AddProperty(kAdminProperty, "1");
  if (caller->worker) context->AddProperty(kWorkerProperty, "1");
  return grpc::Status::OK;
}

Caller CallerOf(const grpc::ServerContextBase& context) {
  Caller caller;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return caller;
  caller.user = Property(*auth, kUserProperty);
  caller.admin = Property(*auth, kAdminProperty) == "1";
  caller.worker = Property(*auth, kWorkerProperty) == "1";
  return caller;
}

}  // namespace ringmaster::coordinator
