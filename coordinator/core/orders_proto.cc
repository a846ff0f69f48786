#include "coordinator/core/orders_proto.h"

#include "common/proto_time.h"

namespace ringmaster::coordinator {
v1::StartRanks StartRanksProto(const StartOrder& order) {
  v1::StartRanks out;
  out.set_job_id(order.job_id);
  out.set_generation(order.generation);
  *out.mutable_spec() = order.spec;
  *out.mutable_placement() = order.placement;
  for (int32_t rank : order.global_ranks) out.add_global_ranks(rank);
  if (order.resume_from.has_value()) *out.mutable_resume_from() = *order.resume_from;
  out.set_checkpoint_dir(order.checkpoint_dir);
  for (const std::string& root : order.checkpoint_roots) out.add_checkpoint_roots(root);
  if (order.rendezvous_deadline != absl::InfiniteFuture()) {  // a program job's: none
    *out.mutable_rendezvous_deadline() = ToProtoTime(order.rendezvous_deadline);
  }
  out.set_rendezvous_secret(order.rendezvous_secret);
  out.set_owner(order.owner);
  if (order.auto_interval.mtbf_seconds() > 0) *out.mutable_auto_interval() = order.auto_interval;
  return out;
}

v1::StopRanks StopRanksProto(const StopOrder& order) {
  v1::StopRanks out;
  out.set_job_id(order.job_id);
  out.set_generation(order.generation);
  for (int32_t rank : order.global_ranks) out.add_global_ranks(rank);
  *out.mutable_grace_period() = ToProtoDuration(order.grace_period);
  out.set_reason(order.reason);
  out.set_dump_state(order.dump_state);
  out.set_restarting(order.restarting);
  return out;
}

}  // namespace ringmaster::coordinator
