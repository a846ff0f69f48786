#ifndef RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_RENDEZVOUS_GROUP_H_
#define RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_RENDEZVOUS_GROUP_H_

// PipelineRendezvousGroup (tests only): a ProcessGroup whose Send returns only
// once the peer's matching Recv has taken the message — the strictest
// semantics the ProcessGroup contract allows ("Send ... may complete before
// the Recv"; NCCL-like transports do not). Built on a buffered group: Recv
// answers every message with an acknowledgement that Send waits for. Pipeline
// tests run on it to show that the schedules do not rely on buffering.
// Collectives and NewGroup pass through. Thread-compatible, like the inner group.

#include <memory>
#include <string>
#include <vector>

#include "engine/dist/process_group.h"

namespace ringmaster::engine::parallel::testing {

class PipelineRendezvousGroup final : public dist::ProcessGroup {
 public:
  // `inner` must outlive this group and deliver sends without waiting (InProcessGroup).
  explicit PipelineRendezvousGroup(dist::ProcessGroup& inner) : ProcessGroup(inner.timeout()), inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* backend() const override { return inner_.backend(); }
  std::string name() const override { return inner_.name(); }

  // Tags at or above this are the acknowledgements'.
  static constexpr int kAckTagBase = 1 << 28;

 private:
  // Collectives and NewGroup are forwarded whole (the inner group checks,
  // annotates and breaks as well); Send waits for Recv's acknowledgement.
  absl::Status DoAllReduce(const Tensor& tensor, dist::ReduceOp op) override { return inner_.AllReduce(tensor, op); }
  absl::Status DoReduceScatter(const Tensor& input, const Tensor& output, dist::ReduceOp op) override {
    return inner_.ReduceScatter(input, output, op);
  }
  absl::Status DoAllGather(const Tensor& input, const Tensor& output) override {
    return inner_.AllGather(input, output);
  }
  absl::Status DoBroadcast(const Tensor& tensor, int root) override { return inner_.Broadcast(tensor, root); }
  absl::Status DoSend(const Tensor& tensor, int dst, int tag) override;
  absl::Status DoRecv(const Tensor& tensor, int src, int tag) override;
  absl::Status DoBarrier() override { return inner_.Barrier(); }
  absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> DoNewGroup(const std::vector<int>& ranks, int /*sub_rank*/,
                                                                 const std::string& name) override {
    return inner_.NewGroup(ranks, name);
  }
  absl::Status CheckPlacement(const Tensor&, absl::string_view) const override { return absl::OkStatus(); }

  dist::ProcessGroup& inner_;
};

}  // namespace ringmaster::engine::parallel::testing

#endif  // RINGMASTER_ENGINE_PARALLEL_TESTING_PIPELINE_RENDEZVOUS_GROUP_H_
