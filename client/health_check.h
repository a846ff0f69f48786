#ifndef RINGMASTER_CLIENT_HEALTH_CHECK_H_
#define RINGMASTER_CLIENT_HEALTH_CHECK_H_

// gRPC health checking (grpc.health.v1.Health/Check) of a server's overall
// health (service ""), over the generic stub: libgrpc++ serves the protocol
// (EnableDefaultHealthCheckService) but ships no client stub, and the two
// messages are one optional string and one enum, encoded here by hand.

#include <memory>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace ringmaster::client {

enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// Calls Health/Check with the deadline `timeout`; with wait_for_ready the
// call waits for the connection instead of failing at once. Fills *serving
// on OK.
grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout, bool wait_for_ready,
                         ServingStatus* serving);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_HEALTH_CHECK_H_
