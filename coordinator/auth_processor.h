#ifndef RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_
#define RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_

// AuthProcessor: the gRPC adapter of the Authenticator (coordinator/auth.h).
// gRPC runs it on every call before the handler: it reads the method
// (":path"), the authorization and join-token headers and the peer's TLS
// certificate, and either fails the call with the Authenticator's status
// (UNAUTHENTICATED / PERMISSION_DENIED, which is what the client sees) or
// records who the caller is in the call's AuthContext, where handlers read it
// with CallerOf. The credential headers are consumed: handlers never see
// them.
//
// Thread-safe; runs inline on gRPC's threads (it only hashes and, for
// workers, verifies a certificate).

#include <memory>

#include "coordinator/auth.h"
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

// Who the call was authenticated as (an empty Caller for a server without
// an AuthProcessor, as in tests that build services alone).
Caller CallerOf(const grpc::ServerContextBase& context);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_AUTH_PROCESSOR_H_
