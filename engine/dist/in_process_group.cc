#include "engine/dist/in_process_group.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "engine/dist/collective_util.h"

namespace ringmaster::engine::dist {
namespace {

std::string TensorSignature(const Tensor& tensor) {
  return absl::StrCat(DTypeName(tensor.dtype()), "[", tensor.numel(), "]");
}

std::string RawBytes(const Tensor& tensor) {
  return std::string(static_cast<const char*>(tensor.raw()), tensor.bytes());
}

std::vector<float> StageF32(const Tensor& tensor) {
  std::vector<float> values(tensor.numel());
  CopyToF32(tensor, values.data());
  return values;
}

// Sums chunk [begin, begin + n) of every rank's values in rank order, then
// divides by the rank count for kAvg.
std::vector<float> ReduceInRankOrder(const InProcessWorld::Slot& slot, size_t begin, size_t n,
                                     ReduceOp op) {
  std::vector<float> acc(slot.in[0]->values.begin() + begin,
                         slot.in[0]->values.begin() + begin + n);
  for (size_t r = 1; r < slot.in.size(); ++r) {
    AddF32(acc.data(), acc.data(), slot.in[r]->values.data() + begin, n);
  }
  if (op == ReduceOp::kAvg) DivideF32(acc.data(), n, static_cast<float>(slot.in.size()));
  return acc;
}

}  // namespace

InProcessGroup::InProcessGroup(std::shared_ptr<InProcessWorld> world, int rank)
    : ProcessGroup(world->options().timeout),
      world_(std::move(world)),
      rank_(rank),
      name_(GroupName(world_->options().name, world_->size())) {}

absl::Status InProcessGroup::CheckPlacement(const Tensor& tensor, absl::string_view what) const {
  return CheckHostPlacement(tensor, what);
}

void InProcessGroup::OnBroken() {
  world_->Leave(rank_, std::string(broken_status().message()));
}

absl::Status InProcessGroup::CheckAlive() const {
  if (world_->Killed(rank_)) return absl::AbortedError("this rank was killed");
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const InProcessWorld::Slot>> InProcessGroup::Join(
    InProcessWorld::Contribution mine) {
  RETURN_IF_ERROR(CheckAlive());
  const std::string signature = mine.signature;
  Deadline deadline(world_->options().clock, timeout());
  auto slot = world_->Collective(rank_, seq_++, std::move(mine), deadline.at());
  if (!slot.ok()) return slot.status();
  for (int r = 0; r < size(); ++r) {
    const std::string& theirs = (*slot)->in[r]->signature;
    if (theirs != signature) {
      return absl::InvalidArgumentError(absl::StrCat("ranks disagree: rank ", rank_, " called ", signature,
                                                     ", rank ", r, " called ", theirs));
    }
  }
  return slot;
}

absl::Status InProcessGroup::DoAllReduce(const Tensor& tensor, ReduceOp op) {
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("allreduce ", TensorSignature(tensor), " ", ReduceOpName(op));
  mine.values = StageF32(tensor);
  ASSIGN_OR_RETURN(auto slot, Join(std::move(mine)));
  std::vector<float> result = ReduceInRankOrder(*slot, 0, tensor.numel(), op);
  CopyFromF32(result.data(), tensor);
  return absl::OkStatus();
}

absl::Status InProcessGroup::DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("reduce_scatter ", TensorSignature(input), " ", ReduceOpName(op));
  mine.values = StageF32(input);
  ASSIGN_OR_RETURN(auto slot, Join(std::move(mine)));
  const size_t chunk = output.numel();
  std::vector<float> result = ReduceInRankOrder(*slot, rank_ * chunk, chunk, op);
  CopyFromF32(result.data(), output);
  return absl::OkStatus();
}

absl::Status InProcessGroup::DoAllGather(const Tensor& input, const Tensor& output) {
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("allgather ", TensorSignature(input));
  mine.bytes = RawBytes(input);
  ASSIGN_OR_RETURN(auto slot, Join(std::move(mine)));
  char* out = static_cast<char*>(output.raw());
  for (int r = 0; r < size(); ++r) {
    const std::string& bytes = slot->in[r]->bytes;
    std::memcpy(out + r * input.bytes(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::DoBroadcast(const Tensor& tensor, int root) {
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("broadcast ", TensorSignature(tensor), " from root ", root);
  if (rank_ == root) mine.bytes = RawBytes(tensor);
  ASSIGN_OR_RETURN(auto slot, Join(std::move(mine)));
  if (rank_ != root) {
    const std::string& bytes = slot->in[root]->bytes;
    std::memcpy(tensor.raw(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::DoSend(const Tensor& tensor, int dst, int tag) {
  RETURN_IF_ERROR(CheckAlive());
  return world_->Post(rank_, dst, tag, RawBytes(tensor), TensorSignature(tensor));
}

absl::Status InProcessGroup::DoRecv(const Tensor& tensor, int src, int tag) {
  RETURN_IF_ERROR(CheckAlive());
  Deadline deadline(world_->options().clock, timeout());
  ASSIGN_OR_RETURN(InProcessWorld::Message message, world_->Take(src, rank_, tag, deadline.at()));
  if (message.signature != TensorSignature(tensor)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", src, " sent ", message.signature, " with tag ", tag,
                                                   ", this rank expects ", TensorSignature(tensor)));
  }
  std::memcpy(tensor.raw(), message.bytes.data(), message.bytes.size());
  return absl::OkStatus();
}

absl::Status InProcessGroup::DoBarrier() {
  InProcessWorld::Contribution mine;
  mine.signature = "barrier";
  return Join(std::move(mine)).status();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> InProcessGroup::DoNewGroup(const std::vector<int>& ranks,
                                                                         int sub_rank, const std::string& name) {
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("new_group ", name, " [", absl::StrJoin(ranks, ", "), "]");
  ASSIGN_OR_RETURN(auto slot, Join(std::move(mine)));
  InProcessOptions options = world_->options();
  options.name = name;
  std::shared_ptr<InProcessWorld> child =
      world_->ChildWorld(*slot, static_cast<int>(ranks.size()), std::move(options));
  if (sub_rank < 0) return std::unique_ptr<ProcessGroup>();
  return std::unique_ptr<ProcessGroup>(child->Group(sub_rank));
}

}  // namespace ringmaster::engine::dist
