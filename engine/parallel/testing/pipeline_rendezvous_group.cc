#include "engine/parallel/testing/pipeline_rendezvous_group.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::engine::parallel::testing {

absl::Status PipelineRendezvousGroup::DoSend(const Tensor& tensor, int dst, int tag) {
  if (tag < 0 || tag >= kAckTagBase)
    return absl::InvalidArgumentError(absl::StrCat("rendezvous send: tag ", tag, " out of range"));
  RETURN_IF_ERROR(inner_.Send(tensor, dst, tag));
  Tensor ack = Tensor::Zeros({1}, DType::kI32);
  return inner_.Recv(ack, dst, kAckTagBase + tag);
}

absl::Status PipelineRendezvousGroup::DoRecv(const Tensor& tensor, int src, int tag) {
  if (tag < 0 || tag >= kAckTagBase)
    return absl::InvalidArgumentError(absl::StrCat("rendezvous recv: tag ", tag, " out of range"));
  RETURN_IF_ERROR(inner_.Recv(tensor, src, tag));
  return inner_.Send(Tensor::Zeros({1}, DType::kI32), src, kAckTagBase + tag);
}

}  // namespace ringmaster::engine::parallel::testing
