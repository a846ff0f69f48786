#ifndef RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
#define RINGMASTER_COORDINATOR_ORDERS_PROTO_H_

// The JobController's start/stop orders as NodeService messages. Pure
// functions; thread-safe.

#include "coordinator/job_controller.h"
#include "proto/node_service.pb.h"

namespace ringmaster::coordinator {

v1::StartRanks StartRanksProto(const StartOrder& order);
v1::StopRanks StopRanksProto(const StopOrder& order);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
