#include "coordinator/service/node_identity.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "grpc/grpc_security_constants.h"

namespace ringmaster::coordinator {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& context, const char* name) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : context.FindPropertyValues(name)) out.emplace_back(v.data(), v.size());
  return out;
}

}  // namespace

std::string ClientIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || Values(*auth, GRPC_X509_PEM_CERT_PROPERTY_NAME).empty()) return "";
  std::vector<std::string> subject = Values(*auth, GRPC_X509_SUBJECT_PROPERTY_NAME);
  std::vector<std::string> sans = Values(*auth, GRPC_X509_SAN_PROPERTY_NAME);
  std::sort(sans.begin(), sans.end());
  sans.erase(std::unique(sans.begin(), sans.end()), sans.end());
  std::string identity = absl::StrCat("subject=", subject.empty() ? std::string() : subject.front());
  for (const std::string& san : sans) absl::StrAppend(&identity, " san=", san);
  return identity;
}

NodeProof ProofOf(const grpc::ServerContextBase& context) {
  NodeProof proof;
  const auto& metadata = context.client_metadata();
  auto header = metadata.find(kNodeCredentialHeader);
  if (header != metadata.end()) proof.credential.assign(header->second.data(), header->second.size());
  proof.client_identity = ClientIdentity(context);
  return proof;
}

absl::StatusOr<std::string> CallingNode(const grpc::ServerContextBase& context, const NodeRegistry& nodes) {
  return nodes.AuthenticateNode(ProofOf(context));
}

absl::Status CheckNamedNode(const std::string& caller, const std::string& named, const std::string& field) {
  if (named == caller) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(field, ": ", named.empty() ? std::string("(empty)") : named,
                   " is not the node of this call's credential (", caller, ")"));
}

}  // namespace ringmaster::coordinator
