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

absl::Status InProcessGroup::Annotate(absl::string_view op, const absl::Status& status) const {
  return OpError(status.code(), op, *this, status.message());
}

absl::Status InProcessGroup::CheckUsable(absl::string_view op) {
  if (!broken_.ok()) {
    return OpError(absl::StatusCode::kAborted, op, *this,
                   absl::StrCat("the group is broken by an earlier error: ", broken_.message()));
  }
  if (world_->Killed(rank_)) {
    broken_ = OpError(absl::StatusCode::kAborted, op, *this, "this rank was killed");
    return broken_;
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::Break(const absl::Status& error) {
  broken_ = error;
  world_->Leave(rank_, std::string(error.message()));
  return error;
}

absl::Status InProcessGroup::Fail(absl::string_view op, const absl::Status& status) {
  return Break(Annotate(op, status));
}

absl::StatusOr<std::shared_ptr<const InProcessWorld::Slot>> InProcessGroup::Join(
    absl::string_view op, InProcessWorld::Contribution mine) {
  const std::string signature = mine.signature;
  Deadline deadline(world_->options().clock, timeout());
  auto slot = world_->Collective(rank_, seq_++, std::move(mine), deadline.at());
  if (!slot.ok()) return Fail(op, slot.status());
  for (int r = 0; r < size(); ++r) {
    const std::string& theirs = (*slot)->in[r]->signature;
    if (theirs != signature) {
      return Fail(op, absl::InvalidArgumentError(absl::StrCat(
                          "ranks disagree: rank ", rank_, " called ", signature, ", rank ", r,
                          " called ", theirs)));
    }
  }
  return slot;
}

absl::Status InProcessGroup::AllReduce(const Tensor& tensor, ReduceOp op) {
  constexpr absl::string_view kOp = "allreduce";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckReducible(kOp, *this, tensor, "the");
  if (!valid.ok()) return Break(valid);
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("allreduce ", TensorSignature(tensor), " ", ReduceOpName(op));
  mine.values = StageF32(tensor);
  ASSIGN_OR_RETURN(auto slot, Join(kOp, std::move(mine)));
  std::vector<float> result = ReduceInRankOrder(*slot, 0, tensor.numel(), op);
  CopyFromF32(result.data(), tensor);
  return absl::OkStatus();
}

absl::Status InProcessGroup::ReduceScatter(const Tensor& input, const Tensor& output,
                                           ReduceOp op) {
  constexpr absl::string_view kOp = "reduce_scatter";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckReducible(kOp, *this, input, "input");
  if (valid.ok()) valid = CheckReducible(kOp, *this, output, "output");
  if (valid.ok()) valid = CheckChunked(kOp, *this, input, output);
  if (!valid.ok()) return Break(valid);
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("reduce_scatter ", TensorSignature(input), " ", ReduceOpName(op));
  mine.values = StageF32(input);
  ASSIGN_OR_RETURN(auto slot, Join(kOp, std::move(mine)));
  const size_t chunk = output.numel();
  std::vector<float> result = ReduceInRankOrder(*slot, rank_ * chunk, chunk, op);
  CopyFromF32(result.data(), output);
  return absl::OkStatus();
}

absl::Status InProcessGroup::AllGather(const Tensor& input, const Tensor& output) {
  constexpr absl::string_view kOp = "allgather";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckHostTensor(kOp, *this, input, "input");
  if (valid.ok()) valid = CheckHostTensor(kOp, *this, output, "output");
  if (valid.ok()) valid = CheckChunked(kOp, *this, output, input);
  if (!valid.ok()) return Break(valid);
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("allgather ", TensorSignature(input));
  mine.bytes = RawBytes(input);
  ASSIGN_OR_RETURN(auto slot, Join(kOp, std::move(mine)));
  char* out = static_cast<char*>(output.raw());
  for (int r = 0; r < size(); ++r) {
    const std::string& bytes = slot->in[r]->bytes;
    std::memcpy(out + r * input.bytes(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::Broadcast(const Tensor& tensor, int root) {
  constexpr absl::string_view kOp = "broadcast";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckHostTensor(kOp, *this, tensor, "the");
  if (valid.ok()) valid = CheckPeer(kOp, *this, root, "root");
  if (!valid.ok()) return Break(valid);
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("broadcast ", TensorSignature(tensor), " from root ", root);
  if (rank_ == root) mine.bytes = RawBytes(tensor);
  ASSIGN_OR_RETURN(auto slot, Join(kOp, std::move(mine)));
  if (rank_ != root) {
    const std::string& bytes = slot->in[root]->bytes;
    std::memcpy(tensor.raw(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::Send(const Tensor& tensor, int dst, int tag) {
  constexpr absl::string_view kOp = "send";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckHostTensor(kOp, *this, tensor, "the");
  if (valid.ok()) valid = CheckOtherRank(kOp, *this, dst, "destination");
  if (!valid.ok()) return Break(valid);
  absl::Status posted = world_->Post(rank_, dst, tag, RawBytes(tensor), TensorSignature(tensor));
  if (!posted.ok()) return Fail(kOp, posted);
  return absl::OkStatus();
}

absl::Status InProcessGroup::Recv(const Tensor& tensor, int src, int tag) {
  constexpr absl::string_view kOp = "recv";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckHostTensor(kOp, *this, tensor, "the");
  if (valid.ok()) valid = CheckOtherRank(kOp, *this, src, "source");
  if (!valid.ok()) return Break(valid);
  Deadline deadline(world_->options().clock, timeout());
  auto message = world_->Take(src, rank_, tag, deadline.at());
  if (!message.ok()) return Fail(kOp, message.status());
  if (message->signature != TensorSignature(tensor)) {
    return Fail(kOp, absl::InvalidArgumentError(absl::StrCat(
                         "rank ", src, " sent ", message->signature, " with tag ", tag,
                         ", this rank expects ", TensorSignature(tensor))));
  }
  std::memcpy(tensor.raw(), message->bytes.data(), message->bytes.size());
  return absl::OkStatus();
}

absl::Status InProcessGroup::Barrier() {
  constexpr absl::string_view kOp = "barrier";
  RETURN_IF_ERROR(CheckUsable(kOp));
  InProcessWorld::Contribution mine;
  mine.signature = "barrier";
  return Join(kOp, std::move(mine)).status();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> InProcessGroup::NewGroup(
    const std::vector<int>& ranks, const std::string& name) {
  constexpr absl::string_view kOp = "new_group";
  RETURN_IF_ERROR(CheckUsable(kOp));
  absl::Status valid = CheckSubgroupRanks(*this, ranks);
  if (!valid.ok()) return Break(valid);
  InProcessWorld::Contribution mine;
  mine.signature = absl::StrCat("new_group ", name, " [", absl::StrJoin(ranks, ", "), "]");
  ASSIGN_OR_RETURN(auto slot, Join(kOp, std::move(mine)));
  int sub_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank_) sub_rank = static_cast<int>(i);
  }
  InProcessOptions options = world_->options();
  options.name = name;
  std::shared_ptr<InProcessWorld> child =
      world_->ChildWorld(*slot, static_cast<int>(ranks.size()), std::move(options));
  if (sub_rank < 0) return std::unique_ptr<ProcessGroup>();
  return std::unique_ptr<ProcessGroup>(child->Group(sub_rank));
}

}  // namespace ringmaster::engine::dist
