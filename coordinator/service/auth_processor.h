#ifndef RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_
#define RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_

// AuthProcessor: the gRPC adapter of the Authenticator (coordinator/auth.h).
// gRPC runs it on every call before the handler: it reads the method
// (":path"), the authorization and join-token headers and the peer's TLS
// certificate, and either fails the call with the Authenticator's status
// (UNAUTHENTICATED / PERMISSION_DENIED, which is what the client sees) or
// records who the caller is in the connection's AuthContext, keyed by the
// hash of the call's authorization header, where handlers read it with
// CallerOf (per call: two users' calls on one connection stay apart). The
// join token header is consumed: handlers never see it.
//
// Thread-safe; runs inline on gRPC's threads (it only hashes and, for
// workers, verifies a certificate).

#include <memory>

#include "coordinator/core/auth.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_metadata_processor.h"

namespace ringmaster::coordinator {

class AuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  // `authenticator` must outlive the server.
  explicit AuthProcessor(const Authenticator* authenticator) : authenticator_(authenticator) {}

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  const Authenticator* const authenticator_;
};

// The user the call was authenticated as (user and admin; an empty Caller
// for a call without a bearer token, users not authenticated, or a server
// without an AuthProcessor).
Caller CallerOf(const grpc::ServerContextBase& context);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_
