#ifndef RINGMASTER_ENGINE_DIST_IN_PROCESS_GROUP_H_
#define RINGMASTER_ENGINE_DIST_IN_PROCESS_GROUP_H_

// InProcessGroup: one rank of a ProcessGroup whose ranks are threads of this
// process, meeting in a shared InProcessWorld. Real semantics, for unit tests
// of everything built on ProcessGroup (data and pipeline parallelism):
//
//   auto world = InProcessWorld::Create(4, {"dp", absl::Seconds(5)});
//   // thread r:
//   std::unique_ptr<InProcessGroup> group = world->Group(r);
//   RETURN_IF_ERROR(group->AllReduce(grad, ReduceOp::kAvg));
//
// Reductions accumulate in f32 in rank order — ((x0 + x1) + x2) + x3 — so every
// rank gets the same bits as a sequential sum; kAvg divides that sum by size();
// f16/bf16 inputs are widened to f32 and the result rounded once. Collectives
// check that every rank called the same operation with the same dtype, shape,
// reduce op and root (INVALID_ARGUMENT naming the mismatch on every rank).
// Send copies the tensor into the destination's mailbox and returns at once;
// Recv takes the oldest message with its (src, tag) and checks dtype and
// element count. Errors and the broken state follow process_group.h.
//
// Thread-compatible: one thread uses a group at a time (its rank's thread);
// groups of the same world are used concurrently, which is the point.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/tensor.h"
#include "engine/dist/in_process_world.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::dist {

class InProcessGroup : public ProcessGroup {
 public:
  ~InProcessGroup() override = default;

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  const char* backend() const override { return "inprocess"; }
  std::string name() const override { return name_; }

  const std::shared_ptr<InProcessWorld>& world() const { return world_; }

 private:
  friend class InProcessWorld;
  InProcessGroup(std::shared_ptr<InProcessWorld> world, int rank);

  absl::Status DoAllReduce(const Tensor& tensor, ReduceOp op) override;
  absl::Status DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  absl::Status DoAllGather(const Tensor& input, const Tensor& output) override;
  absl::Status DoBroadcast(const Tensor& tensor, int root) override;
  absl::Status DoSend(const Tensor& tensor, int dst, int tag) override;
  absl::Status DoRecv(const Tensor& tensor, int src, int tag) override;
  absl::Status DoBarrier() override;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> DoNewGroup(const std::vector<int>& ranks, int sub_rank,
                                                           const std::string& name) override;
  absl::Status CheckPlacement(const Tensor& tensor, absl::string_view what) const override;
  // This rank leaves the world, so that peers waiting for it fail at once.
  void OnBroken() override;

  // ABORTED if this rank was killed (InProcessWorld::Kill).
  absl::Status CheckAlive() const;
  // Runs collective number seq_ with `mine`; on success checks that every
  // rank's signature matches this one's.
  absl::StatusOr<std::shared_ptr<const InProcessWorld::Slot>> Join(InProcessWorld::Contribution mine);

  std::shared_ptr<InProcessWorld> world_;
  const int rank_;
  const std::string name_;
  uint64_t seq_ = 0;  // collectives this rank has joined
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_IN_PROCESS_GROUP_H_
