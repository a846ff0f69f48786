#ifndef RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
#define RINGMASTER_COORDINATOR_ORDERS_PROTO_H_

// The JobController's start/stop orders as NodeService messages. Pure
// functions; thread-safe. A StartRanks carries only its node's slice of the
// placement (8 ranks on a DGX node, not the whole generation).

#include "coordinator/core/job_controller.h"
#include "proto/node_service.pb.h"

namespace ringmaster::coordinator {

v1::StartRanks StartRanksProto(const StartOrder& order);
v1::StopRanks StopRanksProto(const StopOrder& order);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
