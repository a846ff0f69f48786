#ifndef RINGMASTER_ENGINE_DIST_GLOO_PROCESS_GROUP_H_
#define RINGMASTER_ENGINE_DIST_GLOO_PROCESS_GROUP_H_

// GlooProcessGroup: a ProcessGroup of host tensors across processes (and
// machines) over Gloo's TCP transport — the CPU backend's data and pipeline
// parallelism. The ranks meet through a dist::Store (TcpStore, FileStore, the
// coordinator's rendezvous), exchange listening addresses under
// `key_prefix`, and connect a full mesh; Gloo's device thread does the I/O.
//
//   GlooOptions options;
//   options.rank = rank;  options.size = size;
//   options.key_prefix = "job/42/gen/3/gloo";  // unique per job generation
//   ASSIGN_OR_RETURN(std::unique_ptr<GlooProcessGroup> group,
//                    GlooProcessGroup::Create(store, options));
//
// Algorithms: allreduce is gloo::allreduce (ring); reduce-scatter is a ring
// over unbound buffers ((size-1)/size of the data on the wire per rank);
// all-gather, broadcast and barrier are Gloo's. f16/bf16 reductions are
// staged in f32 (widened, reduced in f32, rounded once at the end), so the
// wire carries f32; kAvg divides the f32 sum by size(). Summation order
// follows the ring, so results can differ in the last bits from the
// in-process group's rank-order sum (every rank gets the same bits).
//
// Send copies the tensor, hands header and data to Gloo and returns; the copy
// is released once the peer has taken it (checked when more than a few sends
// are outstanding, and by Barrier, which first completes every pending send).
// Recv first takes the sender's header, so a dtype or size mismatch is
// INVALID_ARGUMENT here rather than a failure inside Gloo. Destroying the
// group drops sends nobody received: call Barrier() first.
//
// Errors: Gloo's exceptions are caught at each call and mapped — a timeout
// to DEADLINE_EXCEEDED, a lost or reset connection to UNAVAILABLE, Gloo
// assertion failures to INTERNAL — with the op and group in the message. After
// an error the group closes its connections (peers blocked on it see
// UNAVAILABLE at once instead of waiting out their timeout) and every later
// call is ABORTED.
//
// Thread-compatible: one thread calls a group at a time; sub-groups (their own
// Gloo contexts on the same device) may run on other threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"
#include "engine/dist/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace ringmaster::engine::dist {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // Deadline of the rendezvous and of every call.
  absl::Duration timeout = absl::Minutes(5);
  // The address this rank listens on and advertises (a name or an IP)...
  std::string hostname = "127.0.0.1";
  // ...or, when set, the network interface to use ("eth0"), instead.
  std::string interface;
  // Prefix of this group's keys in the store; scope it by job and generation.
  std::string key_prefix = "gloo";
  // Base name in errors: "dp" -> "dp[4 ranks]".
  std::string name = "world";
  // Before every collective, all-gather a 24-byte description of the call
  // (operation, dtype, element count, root or reduce op) and fail with
  // INVALID_ARGUMENT on every rank if they disagree. Off by default: it costs
  // one small all-gather per call. Without it, ranks that disagree on sizes
  // make Gloo's I/O thread assert, which aborts the process (a crashed rank,
  // as far as the job is concerned).
  bool check_calls = false;
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Rendezvous through `store` and connect to every other rank. Collective:
  // every rank calls it with the same size, timeout and key_prefix. `store`
  // must outlive the group (NewGroup meets through it again).
  //
  // Side effect: the first call sets SIGPIPE to SIG_IGN if it has the default
  // action — Gloo writes to sockets without MSG_NOSIGNAL, and a peer dying
  // mid-transfer would otherwise kill this process instead of failing the call.
  static absl::StatusOr<std::unique_ptr<GlooProcessGroup>> Create(Store& store,
                                                                  const GlooOptions& options);
  ~GlooProcessGroup() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  const char* backend() const override { return "gloo"; }
  std::string name() const override { return name_; }

  // Sends handed to Gloo and not yet known to be delivered.
  int pending_sends() const { return static_cast<int>(pending_.size()); }

 private:
  struct PendingSend;

  GlooProcessGroup(Store* store, GlooOptions options,
                   std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::Context> context);
  static absl::StatusOr<std::unique_ptr<GlooProcessGroup>> Connect(
      Store& store, const GlooOptions& options, std::shared_ptr<gloo::transport::Device> device);

  absl::Status DoAllReduce(const Tensor& tensor, ReduceOp op) override;
  absl::Status DoReduceScatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  absl::Status DoAllGather(const Tensor& input, const Tensor& output) override;
  absl::Status DoBroadcast(const Tensor& tensor, int root) override;
  absl::Status DoSend(const Tensor& tensor, int dst, int tag) override;
  absl::Status DoRecv(const Tensor& tensor, int src, int tag) override;
  absl::Status DoBarrier() override;
  // Members connect a new Gloo context under key_prefix + "/sub<n>" (n counts
  // this group's NewGroup calls, hence the same on every rank).
  absl::StatusOr<std::unique_ptr<ProcessGroup>> DoNewGroup(const std::vector<int>& ranks, int sub_rank,
                                                           const std::string& name) override;
  absl::Status CheckPlacement(const Tensor& tensor, absl::string_view what) const override;
  // Drops pending sends and closes the connections.
  void OnBroken() override;

  // Runs `body`, which may throw Gloo's exceptions, and turns them into
  // statuses (ProcessGroup adds the operation and breaks the group).
  static absl::Status Run(const std::function<absl::Status()>& body);
  // Waits until at most `keep` sends are pending, oldest first. Throws Gloo's
  // exceptions (call inside Run).
  void CompleteSends(size_t keep);
  // The ring reduce-scatter of f32 `values` (size() chunks of `chunk`); on
  // return chunk rank() holds the sum. Throws Gloo's exceptions.
  absl::Status RingReduceScatter(std::vector<float>& values, size_t chunk);
  int64_t TimeoutMs() const;
  // With options_.check_calls: INVALID_ARGUMENT unless every rank's call
  // matches (op, dtype, numel, extra). Throws Gloo's exceptions.
  absl::Status CheckCall(absl::string_view op, DType dtype, int64_t numel, int64_t extra);

  Store* const store_;
  const GlooOptions options_;
  const std::string name_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<std::unique_ptr<PendingSend>> pending_;  // oldest first
  int subgroups_ = 0;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_GLOO_PROCESS_GROUP_H_
