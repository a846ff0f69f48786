#include "engine/dist/process_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::engine::dist {
namespace {

constexpr absl::string_view kAllReduce = "allreduce";
constexpr absl::string_view kReduceScatter = "reduce_scatter";
constexpr absl::string_view kAllGather = "allgather";
constexpr absl::string_view kBroadcast = "broadcast";
constexpr absl::string_view kSend = "send";
constexpr absl::string_view kRecv = "recv";
constexpr absl::string_view kBarrier = "barrier";
constexpr absl::string_view kNewGroup = "new_group";

bool Reducible(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16; }

}  // namespace

std::string GroupName(absl::string_view base, int size) {
  return absl::StrCat(base, "[", size, size == 1 ? " rank]" : " ranks]");
}

std::string OpContext(absl::string_view op, const ProcessGroup& group) {
  return absl::StrCat(op, " on ", group.name(), " rank ", group.rank(), ": ");
}

// ------------------------------------------------------------ the public calls

absl::Status ProcessGroup::AllReduce(const Tensor& tensor, ReduceOp op) {
  absl::Status admitted = AdmitAllReduce(kAllReduce, tensor);
  if (!admitted.ok()) return admitted;
  return Finish(kAllReduce, DoAllReduce(tensor, op));
}

absl::Status ProcessGroup::ReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  absl::Status admitted = AdmitReduceScatter(kReduceScatter, input, output);
  if (!admitted.ok()) return admitted;
  return Finish(kReduceScatter, DoReduceScatter(input, output, op));
}

absl::Status ProcessGroup::AllGather(const Tensor& input, const Tensor& output) {
  absl::Status admitted = AdmitAllGather(kAllGather, input, output);
  if (!admitted.ok()) return admitted;
  return Finish(kAllGather, DoAllGather(input, output));
}

absl::Status ProcessGroup::Broadcast(const Tensor& tensor, int root) {
  absl::Status admitted = AdmitBroadcast(kBroadcast, tensor, root);
  if (!admitted.ok()) return admitted;
  return Finish(kBroadcast, DoBroadcast(tensor, root));
}

absl::Status ProcessGroup::Send(const Tensor& tensor, int dst, int tag) {
  absl::Status admitted = CheckPeer(kSend, dst, "destination", /*self_allowed=*/false);
  if (!admitted.ok()) return admitted;
  admitted = CheckTensor(tensor, "the", /*reduced=*/false);
  if (!admitted.ok()) return Fail(kSend, admitted);
  return Finish(kSend, DoSend(tensor, dst, tag));
}

absl::Status ProcessGroup::Recv(const Tensor& tensor, int src, int tag) {
  absl::Status admitted = CheckPeer(kRecv, src, "source", /*self_allowed=*/false);
  if (!admitted.ok()) return admitted;
  admitted = CheckTensor(tensor, "the", /*reduced=*/false);
  if (!admitted.ok()) return Fail(kRecv, admitted);
  return Finish(kRecv, DoRecv(tensor, src, tag));
}

absl::Status ProcessGroup::Barrier() {
  absl::Status usable = Usable(kBarrier);
  if (!usable.ok()) return usable;
  return Finish(kBarrier, DoBarrier());
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::NewGroup(const std::vector<int>& ranks,
                                                                     const std::string& name) {
  absl::Status usable = Usable(kNewGroup);
  if (!usable.ok()) return usable;
  if (ranks.empty()) return Fail(kNewGroup, absl::InvalidArgumentError("empty rank list"));
  for (size_t i = 0; i < ranks.size(); ++i) {
    const bool in_range = ranks[i] >= 0 && ranks[i] < size();
    const bool increasing = i == 0 || ranks[i] > ranks[i - 1];
    if (!in_range || !increasing) {
      return Fail(kNewGroup, absl::InvalidArgumentError(absl::StrCat(
                                 "ranks [", absl::StrJoin(ranks, ", "),
                                 "] must be strictly increasing ranks of the group")));
    }
  }
  const auto it = std::find(ranks.begin(), ranks.end(), rank());
  const int sub_rank = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = DoNewGroup(ranks, sub_rank, name);
  if (!group.ok()) return Finish(kNewGroup, group.status());
  return group;
}

// ------------------------------------------------------------------ the checks

absl::Status ProcessGroup::AdmitAllReduce(absl::string_view op, const Tensor& tensor) {
  absl::Status status = Usable(op);
  if (!status.ok()) return status;
  status = CheckTensor(tensor, "the", /*reduced=*/true);
  return status.ok() ? status : Fail(op, status);
}

absl::Status ProcessGroup::AdmitReduceScatter(absl::string_view op, const Tensor& input,
                                              const Tensor& output) {
  absl::Status status = Usable(op);
  if (!status.ok()) return status;
  status = CheckTensor(input, "input", /*reduced=*/true);
  if (status.ok()) status = CheckTensor(output, "output", /*reduced=*/true);
  if (status.ok()) status = CheckChunked(input, output);
  return status.ok() ? status : Fail(op, status);
}

absl::Status ProcessGroup::AdmitAllGather(absl::string_view op, const Tensor& input, const Tensor& output) {
  absl::Status status = Usable(op);
  if (!status.ok()) return status;
  status = CheckTensor(input, "input", /*reduced=*/false);
  if (status.ok()) status = CheckTensor(output, "output", /*reduced=*/false);
  if (status.ok()) status = CheckChunked(output, input);
  return status.ok() ? status : Fail(op, status);
}

absl::Status ProcessGroup::AdmitBroadcast(absl::string_view op, const Tensor& tensor, int root) {
  absl::Status status = CheckPeer(op, root, "root", /*self_allowed=*/true);
  if (!status.ok()) return status;
  status = CheckTensor(tensor, "the", /*reduced=*/false);
  return status.ok() ? status : Fail(op, status);
}

absl::Status ProcessGroup::CheckPeer(absl::string_view op, int peer, absl::string_view what,
                                     bool self_allowed) {
  absl::Status status = Usable(op);
  if (!status.ok()) return status;
  if (peer < 0 || peer >= size()) {
    return Fail(op, absl::InvalidArgumentError(absl::StrCat(what, " ", peer, " is not a rank of the group (0..",
                                                            size() - 1, ")")));
  }
  if (!self_allowed && peer == rank()) {
    return Fail(op, absl::InvalidArgumentError(absl::StrCat(what, " ", peer, " is this rank itself")));
  }
  return absl::OkStatus();
}

absl::Status ProcessGroup::CheckTensor(const Tensor& tensor, absl::string_view what, bool reduced) const {
  if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrCat(what, " tensor is undefined"));
  absl::Status placed = CheckPlacement(tensor, what);
  if (!placed.ok()) return placed;
  if (reduced && !Reducible(tensor.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " tensor has dtype ", DTypeName(tensor.dtype()),
                                                   "; reductions take f32, f16 or bf16"));
  }
  return absl::OkStatus();
}

absl::Status ProcessGroup::CheckChunked(const Tensor& whole, const Tensor& chunk) const {
  if (whole.dtype() != chunk.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtypes differ: ", DTypeName(whole.dtype()), " vs ", DTypeName(chunk.dtype())));
  }
  if (whole.numel() != chunk.numel() * size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", size(), " x ", chunk.numel(), " = ", chunk.numel() * size(), " elements in the ", size(),
        "-chunk tensor ", ShapeString(whole.shape()), ", got ", whole.numel()));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- broken state

absl::Status ProcessGroup::Usable(absl::string_view op) const {
  if (broken_.ok()) return absl::OkStatus();
  return absl::AbortedError(
      absl::StrCat(OpContext(op, *this), "the group is broken by an earlier error: ", broken_.message()));
}

absl::Status ProcessGroup::Fail(absl::string_view op, const absl::Status& status) {
  const std::string context = OpContext(op, *this);
  absl::Status failed = absl::StartsWith(status.message(), context)
                            ? status  // a wrapped group's error: it names this call already
                            : absl::Status(status.code(), absl::StrCat(context, status.message()));
  if (broken_.ok()) {
    broken_ = failed;
    OnBroken();
  }
  return failed;
}

absl::Status ProcessGroup::Finish(absl::string_view op, const absl::Status& status) {
  if (status.ok() || broken()) return status;
  return Fail(op, status);
}

}  // namespace ringmaster::engine::dist
