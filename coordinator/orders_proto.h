#ifndef RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
#define RINGMASTER_COORDINATOR_ORDERS_PROTO_H_

// The JobController's start/stop orders as NodeService messages. Pure
// functions; thread-safe.
//
// A StartRanks carries the whole generation's placement (~330 KB on the wire
// for 4096 ranks), and a dispatch makes one per node. Copying it as a message
// into each of them cost 512 x 4096 RankAssignment copies (seconds, ~600 MB
// at 512 nodes: bench/RESULTS.md), so the placement goes in serialized, once
// per shared placement: as the bytes of field `placement` in the message's
// unknown fields, which serialize verbatim. On the wire (and for the worker)
// it is the same StartRanks; in this process, `placement()` of the returned
// message is empty.

#include "coordinator/job_controller.h"
#include "proto/node_service.pb.h"

namespace ringmaster::coordinator {

v1::StartRanks StartRanksProto(const StartOrder& order);
v1::StopRanks StopRanksProto(const StopOrder& order);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_ORDERS_PROTO_H_
