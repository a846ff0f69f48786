#ifndef RINGMASTER_COORDINATOR_NODE_IDENTITY_H_
#define RINGMASTER_COORDINATOR_NODE_IDENTITY_H_

// Which node a call comes from, for the node-facing services (NodeService,
// RendezvousService, CheckpointService). The AuthProcessor has already
// admitted the caller as a worker (join token, client certificate); this says
// WHICH node it is: the node credential header ("x-ringmaster-node-credential",
// RegisterNodeResponse.credential) and, over TLS, the identity of the client
// certificate, as NodeRegistry::AuthenticateNode maps them to a node id. The
// handlers then check that what the call is about (a rank of a generation of
// a job) was placed on that node (JobLifecycle::CheckPlacedOn).
//
// Thread-safe (no state).

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/core/node_registry.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::coordinator {

// The identity of the call's client certificate as NodeInfo.client_identity
// records it: "subject=<DN>", then " san=<name>" for each subject alternative
// name in sorted order; empty without one (no TLS).
std::string ClientIdentity(const grpc::ServerContextBase& context);

// The credential header and the client certificate's identity of the call.
NodeProof ProofOf(const grpc::ServerContextBase& context);

// The node the call comes from (NodeRegistry::AuthenticateNode):
// UNAUTHENTICATED without a valid credential, PERMISSION_DENIED with another
// client certificate than the node's.
absl::StatusOr<std::string> CallingNode(const grpc::ServerContextBase& context, const NodeRegistry& nodes);

// PERMISSION_DENIED unless `named` (the node id a request names, `field` its
// name) is `caller`.
absl::Status CheckNamedNode(const std::string& caller, const std::string& named, const std::string& field);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_IDENTITY_H_
