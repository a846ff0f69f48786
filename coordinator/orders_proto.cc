#include "coordinator/orders_proto.h"

#include <memory>
#include <mutex>
#include <string>

#include "common/proto_time.h"
#include "google/protobuf/unknown_field_set.h"

namespace ringmaster::coordinator {
namespace {

// The serialized form of the placement last asked for: the orders of one
// dispatch share one placement, so it is serialized once for all of them.
std::shared_ptr<const std::string> PlacementBytes(const std::shared_ptr<const v1::Placement>& placement) {
  static std::mutex mu;
  static std::weak_ptr<const v1::Placement> last;
  static std::shared_ptr<const std::string> bytes;
  std::lock_guard<std::mutex> lock(mu);
  if (last.lock() != placement || bytes == nullptr) {
    bytes = std::make_shared<const std::string>(placement->SerializeAsString());
    last = placement;
  }
  return bytes;
}

}  // namespace

v1::StartRanks StartRanksProto(const StartOrder& order) {
  v1::StartRanks out;
  out.set_job_id(order.job_id);
  out.set_generation(order.generation);
  *out.mutable_spec() = order.spec;
  out.GetReflection()->MutableUnknownFields(&out)->AddLengthDelimited(
      v1::StartRanks::kPlacementFieldNumber, *PlacementBytes(order.placement));
  for (int32_t rank : order.global_ranks) out.add_global_ranks(rank);
  if (order.resume_from.has_value()) *out.mutable_resume_from() = *order.resume_from;
  out.set_checkpoint_dir(order.checkpoint_dir);
  *out.mutable_rendezvous_deadline() = ToProtoTime(order.rendezvous_deadline);
  out.set_rendezvous_secret(order.rendezvous_secret);
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
  return out;
}

}  // namespace ringmaster::coordinator
