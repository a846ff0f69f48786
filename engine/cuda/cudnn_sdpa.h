#ifndef RINGMASTER_ENGINE_CUDA_CUDNN_SDPA_H_
#define RINGMASTER_ENGINE_CUDA_CUDNN_SDPA_H_

// Causal scaled-dot-product attention, forward and backward, fp16 and bf16,
// on tensor cores through cuDNN's graph (backend) API, as PyTorch's cuDNN
// attention backend runs it. Plans (operation graph, the engine configuration
// cuDNN's heuristics rank first that finalizes, its execution plan) are built
// on first use and cached per shape, like the GEMM plans.
//
// Why a composite graph and not cuDNN's native SDPA operation:
//   CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR ("unified" SDPA) first works
//   in cuDNN 9.13.1 and expresses no mask before 9.21.0, where masks come in
//   through CUDNN_ATTR_OPERATION_SDPA_FWD_SUBGRAPH (a diagonal-band-mask
//   subgraph). The 9.19 headers we compile against declare neither that
//   attribute nor the diagonal-band-mask operation, so the native forward
//   cannot be causal here at all; CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR
//   (declared in 9.19) is not what cudnn-frontend lowers sdpa_backward to in
//   any version. We therefore build the composite graph cudnn-frontend builds
//   for every cuDNN 9 when compiled against headers older than 9.21: matmul,
//   pointwise (scale, GEN_INDEX/CMP_GE/BINARY_SELECT causal mask, exp, ...),
//   reduction and reshape operations, which cuDNN recognizes and runs as its
//   fused flash-attention engines (sm80 and newer). cudnnGetVersion() of the
//   loaded library (9.10 ... 9.24 from PyTorch's wheels on the GPU machines)
//   picks the version-dependent details:
//     < 9.10.0      mask fill value -FLT_MAX (not -inf), as cudnn-frontend does;
//     9.10.0/9.10.1 refused (known SDPA bugs, cudnn-frontend refuses them too);
//     < 9.6.0       the backward's fp32 dQ accumulator is zeroed by us;
//     <= 9.15.0     backward with t % 128 != 0 adds a padding mask with
//                   seq_len = t (the cudnn-frontend workaround for a cuDNN bug);
//     >= 9.11.0     reductions state CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC (false).
//
// Layouts (GPT-2's fused projections; elements of shape.dtype, row-major):
//   qkv, dqkv  [b, t, 3, nh, hd]; Q, K, V (dQ, dK, dV) are strided views:
//              dims [b, nh, t, hd], strides [t*3*nh*hd, hd, 3*nh*hd, 1],
//              K at +nh*hd elements, V at +2*nh*hd;
//   out, dout  [b, t, nh, hd]: dims [b, nh, t, hd], strides [t*nh*hd, hd, nh*hd, 1];
//   stats      f32 [b, nh, t]: the natural-log logsumexp of each row of the
//              scaled, masked scores, the flash kernels' "lse" (either
//              backward reads the other's forward).
// The causal mask is top-left (query i sees keys j <= i); no dropout, bias
// or padding. Every pointer (qkv, out, dout, stats, dqkv, workspace) must be
// 16-byte aligned (cuDNN's tensor-core engines need it; plans declare it);
// Forward/Backward answer UNIMPLEMENTED for one that is not. Alignment is
// therefore not part of a plan's key: the workspace queries that build plans
// see no pointers, and every call checks its own.
//
// Backward determinism: where cuDNN exposes it (sm80/sm90: the "dP in
// workspace" graph cudnn-frontend builds for set_deterministic_algorithm,
// which has no fp32 dQ accumulator and so no atomics), it is preferred; among
// engine configs those without CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC win.
// Plans say what they got (SdpaPlan::deterministic). That graph keeps dP in
// the workspace (cudnn-frontend budgets b*nh*t*t*2 bytes; the plan reports
// the real size); where no engine fits Options::max_workspace_bytes the
// accumulator graph is used instead. Blackwell's deterministic backward needs
// engine knobs cudnn-frontend sets by hand: not done here (sm100+ plans say
// nondeterministic).
//
// Not thread-safe: one CudnnSdpa per backend thread and device (as the
// backend's other plan caches), destroyed before the cudnnHandle_t its plans
// were built with. Build plans (the *WorkspaceBytes calls) outside CUDA
// stream capture (building may allocate and copy); Forward and Backward only
// enqueue work on `stream` (cudnnBackendExecute, and a cudaMemsetAsync before
// cuDNN 9.6), as PyTorch does when it captures its cuDNN attention.

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/cuda_status.h"
#include "engine/core/dtype.h"

namespace ringmaster::engine {

struct SdpaShape {
  int64_t b = 0, t = 0, nh = 0, hd = 0;
  DType dtype = DType::kBF16;  // kF16 or kBF16
  float scale = 0.0f;          // applied to q.k, usually 1/sqrt(hd); a run-time value, not part of a plan
};

enum class SdpaDirection : uint8_t { kForward, kBackward };

// The loaded cuDNN and the device the support rules are checked against.
struct SdpaDevice {
  int64_t cudnn_version = 0;  // cudnnGetVersion(): 91900 is 9.19.0
  int sm = 0;                 // compute capability, major * 10 + minor
};

// The loaded cuDNN's version and the current device's compute capability.
absl::StatusOr<SdpaDevice> CurrentSdpaDevice();

// OK, or UNIMPLEMENTED naming the reason cuDNN cannot run `shape` in
// `direction` on `device` (dtype, head size, sequence length, architecture,
// cuDNN version), from cuDNN's documented support matrix; checked before any
// descriptor is built.
absl::Status SdpaSupported(const SdpaShape& shape, SdpaDirection direction, const SdpaDevice& device);

// Unique ids of the graphs' non-virtual tensors (the variant pack's keys).
// Virtual tensors are numbered from kSdpaFirstVirtualUid in creation order.
enum SdpaUid : int64_t {
  kSdpaQ = 1,
  kSdpaK = 2,
  kSdpaV = 3,
  kSdpaO = 4,
  kSdpaStats = 5,
  kSdpaScale = 6,   // by value, f32
  kSdpaNegInf = 7,  // by value, f32: the causal mask's fill
  kSdpaDO = 8,
  kSdpaDQ = 9,
  kSdpaDK = 10,
  kSdpaDV = 11,
  kSdpaOne = 12,         // by value, f32 1.0 (the softmax-sum's dropout scale)
  kSdpaSoftmaxSum = 13,  // f32 [b, nh, t, 1] = rowsum(dO * O), in the workspace
  kSdpaDQAccum = 14,     // f32 [b, nh, t, hd] dQ accumulator, in the workspace
  kSdpaSeqLenQ = 15,     // i32 [b, 1, 1, 1] = t (padding-mask workaround)
  kSdpaSeqLenKv = 16,
  kSdpaFirstVirtualUid = 100,
};

// Owner of one cudnnBackendDescriptor_t.
struct CudnnBackendDeleter {
  void operator()(void* descriptor) const { cudnnBackendDestroyDescriptor(descriptor); }
};
using CudnnBackendDesc = std::unique_ptr<void, CudnnBackendDeleter>;

// One operation of a graph as built: its kind ("matmul", "reduce_max",
// "reshape", or the pointwise mode: "mul", "cmp_ge", ..., "gen_row" and
// "gen_col" for GEN_INDEX on axis 2 and 3) and the uids it reads (a matmul's
// M/N/K overrides after A and B) and writes. cuDNN 9.19 cannot read
// pointwise operations back; this record says what the graph holds.
struct SdpaOpInfo {
  std::string kind;
  std::vector<int64_t> inputs;
  int64_t output = 0;
};

// A finalized operation graph and every descriptor it references. Building
// one needs no device from cuDNN 9.8 on (pass a null handle).
struct SdpaGraph {
  SdpaDirection direction = SdpaDirection::kForward;
  std::vector<CudnnBackendDesc> owned;                  // tensors, operations, the graph
  std::map<int64_t, cudnnBackendDescriptor_t> tensors;  // by uid, virtual ones too
  std::vector<cudnnBackendDescriptor_t> ops;            // in the graph's order
  std::vector<SdpaOpInfo> op_info;                      // ops[i] is op_info[i]
  cudnnBackendDescriptor_t graph = nullptr;
  float neg_inf = 0.0f;         // the value kSdpaNegInf carries
  bool dq_accumulator = false;  // backward: dQ goes through kSdpaDQAccum (atomics)
  bool seq_len_mask = false;    // backward: the padding-mask workaround is in the graph
};

// The graph's version-dependent structure follows `cudnn_version` (tests
// build every variant with one library); attributes only newer libraries know
// follow the loaded one.
struct SdpaGraphOptions {
  int64_t cudnn_version = CUDNN_VERSION;
  bool dq_accumulator = true;  // backward only; false: the deterministic "dP in workspace" graph
};

// The graph for `shape` and `direction`; INTERNAL for a descriptor cuDNN
// refuses (a bug here), UNIMPLEMENTED where cuDNN does not support the graph.
absl::StatusOr<std::unique_ptr<SdpaGraph>> BuildSdpaGraph(const SdpaShape& shape, SdpaDirection direction,
                                                          const SdpaGraphOptions& options, cudnnHandle_t handle);

// A graph with its execution plan and workspace layout:
//   [softmax sum (backward) | dQ accumulator (if any) | engine workspace],
// each region 256-byte aligned.
struct SdpaPlan {
  std::unique_ptr<SdpaGraph> graph;
  CudnnBackendDesc config, plan;  // the engine config and its execution plan (null in tests' fakes)
  int64_t engine = -1;            // cuDNN's global engine index
  bool deterministic = false;
  size_t softmax_sum_offset = 0, dq_accum_offset = 0, engine_offset = 0;
  size_t workspace_bytes = 0;  // all three regions
  DeviceBuffer seq_lens;       // i32 [2, b] = t, when graph->seq_len_mask
};

class CudnnSdpa {
 public:
  struct Options {
    bool deterministic_backward = true;
    size_t max_workspace_bytes = size_t{2} << 30;  // engine configs needing more are skipped
  };
  // Builds plans with cuDNN's heuristics (mode A, then the fallback list).
  using PlanBuilder = std::function<absl::StatusOr<std::unique_ptr<SdpaPlan>>(
      cudnnHandle_t, const SdpaShape&, SdpaDirection, const SdpaDevice&, const Options&)>;

  CudnnSdpa() : CudnnSdpa(Options{}) {}
  explicit CudnnSdpa(Options options);
  // Tests: a fixed device and a plan builder standing in for cuDNN's.
  CudnnSdpa(Options options, SdpaDevice device, PlanBuilder builder);

  // The workspace Forward/Backward need for `shape`, building its plan on
  // first use. UNIMPLEMENTED (with the reason) for a shape cuDNN cannot take
  // or has no engine for, remembered and returned at once next time: the
  // caller falls back to its own kernels.
  absl::StatusOr<size_t> ForwardWorkspaceBytes(cudnnHandle_t handle, const SdpaShape& shape);
  absl::StatusOr<size_t> BackwardWorkspaceBytes(cudnnHandle_t handle, const SdpaShape& shape);

  // out (dout's layout) and stats from qkv; workspace >= ForwardWorkspaceBytes.
  absl::Status Forward(cudnnHandle_t handle, const SdpaShape& shape, const void* qkv, void* out, float* stats,
                       void* workspace, cudaStream_t stream);
  // dqkv (overwritten) from forward's inputs and results; workspace >= BackwardWorkspaceBytes.
  absl::Status Backward(cudnnHandle_t handle, const SdpaShape& shape, const void* qkv, const void* out,
                        const void* dout, const float* stats, void* dqkv, void* workspace, cudaStream_t stream);

  // The cached plan for `shape` and `direction` (built on first use).
  absl::StatusOr<const SdpaPlan*> Plan(cudnnHandle_t handle, const SdpaShape& shape, SdpaDirection direction);
  size_t size() const { return plans_.size(); }

 private:
  struct Key {
    SdpaDirection direction;
    int64_t b, t, nh, hd;
    DType dtype;
    auto Tie() const { return std::tie(direction, b, t, nh, hd, dtype); }
    bool operator<(const Key& other) const { return Tie() < other.Tie(); }
  };

  absl::Status Execute(cudnnHandle_t handle, const SdpaPlan& plan, const std::vector<int64_t>& uids,
                       const std::vector<void*>& pointers, void* workspace, cudaStream_t stream) const;

  Options options_;
  std::optional<SdpaDevice> device_;  // probed on first use unless given
  PlanBuilder builder_;
  std::map<Key, std::unique_ptr<SdpaPlan>> plans_;
  std::map<Key, absl::Status> unsupported_;
};

// The real PlanBuilder: BuildSdpaGraph, then cuDNN's heuristics.
absl::StatusOr<std::unique_ptr<SdpaPlan>> BuildSdpaPlan(cudnnHandle_t handle, const SdpaShape& shape,
                                                        SdpaDirection direction, const SdpaDevice& device,
                                                        const CudnnSdpa::Options& options);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_CUDNN_SDPA_H_
