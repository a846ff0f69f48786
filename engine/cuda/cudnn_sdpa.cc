#include "engine/cuda/cudnn_sdpa.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/cuda/cudnn_backend_util.h"

namespace ringmaster::engine {
namespace {

using cudnn_backend::Create;
using cudnn_backend::CudnnSupportStatus;
using cudnn_backend::Desc;
using cudnn_backend::kAlignment;
using cudnn_backend::Set;

size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

absl::Status Unsupported(const SdpaShape& s, const std::string& why) {
  return absl::UnimplementedError(
      absl::StrFormat("cuDNN attention b=%d t=%d nh=%d hd=%d %s: %s", s.b, s.t, s.nh, s.hd, DTypeName(s.dtype), why));
}

// The largest head size cuDNN's SDPA engines take (cuDNN's support matrix and
// cudnn-frontend's checks): Hopper 256; Ampere/Ada forward 256 from 9.10
// (128 before), backward 128; Blackwell 128 (forward 256 from 9.9).
int64_t MaxHeadSize(SdpaDirection direction, const SdpaDevice& device) {
  const int major = device.sm / 10;
  if (major == 9) return 256;
  if (direction == SdpaDirection::kBackward) return 128;
  if (major == 8) return device.cudnn_version >= 91000 ? 256 : 128;
  return device.cudnn_version >= 90900 ? 256 : 128;
}

struct EngineChoice {
  CudnnBackendDesc config, plan;  // the plan refers to the config: both live as long as the SdpaPlan
  int64_t engine = -1;
  bool nondeterministic = false;
  size_t workspace = 0;
};

// An execution plan for one heuristic result, or why it did not finalize.
absl::StatusOr<EngineChoice> TryConfig(cudnnHandle_t handle, Desc config) {
  EngineChoice c;
  ASSIGN_OR_RETURN(c.plan, Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  CUDNN_RETURN_IF_ERROR(Set(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle));
  CUDNN_RETURN_IF_ERROR(
      Set(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, config));
  SDPA_RETURN_IF_UNSUPPORTED(cudnnBackendFinalize(c.plan.get()));
  int64_t count = 0, workspace = 0;
  CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                 CUDNN_TYPE_INT64, 1, &count, &workspace));
  c.workspace = static_cast<size_t>(workspace);
  ASSIGN_OR_RETURN(CudnnBackendDesc engine, Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  Desc raw = engine.get();
  CUDNN_RETURN_IF_ERROR(
      cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw));
  CUDNN_RETURN_IF_ERROR(
      cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &c.engine));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes));
  for (int64_t i = 0; i < count; ++i) c.nondeterministic |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  return c;
}

// The first engine config cuDNN's heuristics rank (mode A; the fallback list
// where mode A has none) whose plan finalizes within `max_workspace`; with
// `prefer_deterministic`, the first without CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
// where the mode has one.
absl::StatusOr<EngineChoice> FirstEngine(cudnnHandle_t handle, Desc graph, size_t max_workspace,
                                         bool prefer_deterministic) {
  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    ASSIGN_OR_RETURN(CudnnBackendDesc heur, Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    CUDNN_RETURN_IF_ERROR(Set(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph));
    CUDNN_RETURN_IF_ERROR(Set(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode));
    absl::Status heuristics = CudnnSupportStatus(cudnnBackendFinalize(heur.get()), "heuristics", __FILE__, __LINE__);
    if (!heuristics.ok()) {
      absl::StrAppend(&tried, " [mode ", static_cast<int>(mode), ": ", heuristics.message(), "]");
      continue;
    }
    int64_t count = 0;
    CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
    std::vector<CudnnBackendDesc> configs;
    std::vector<Desc> raw;
    for (int64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(CudnnBackendDesc c, Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(c.get());
      configs.push_back(std::move(c));
    }
    if (count > 0) {
      CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()));
    }
    std::optional<EngineChoice> nondeterministic;
    int finalized = 0;
    for (int64_t i = 0; i < count; ++i) {
      absl::StatusOr<EngineChoice> c = TryConfig(handle, raw[i]);
      if (!c.ok()) continue;  // this config does not run here: the next one might
      ++finalized;
      if (c->workspace > max_workspace) continue;
      c->config = std::move(configs[i]);
      if (!prefer_deterministic || !c->nondeterministic) return std::move(*c);
      if (!nondeterministic) nondeterministic = std::move(*c);
    }
    if (nondeterministic) return std::move(*nondeterministic);
    absl::StrAppend(&tried, " [mode ", static_cast<int>(mode), ": ", count, " configs, ", finalized, " finalized]");
  }
  return absl::UnimplementedError(
      absl::StrCat("no cuDNN engine config finalizes within ", max_workspace, " workspace bytes:", tried));
}

absl::Status CheckWorkspace(const SdpaPlan& plan, const void* workspace) {
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuDNN attention needs %d workspace bytes, got none", plan.workspace_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckAligned(std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, p] : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % kAlignment != 0) {
      return absl::UnimplementedError(
          absl::StrFormat("cuDNN attention: %s at %p is not %d-byte aligned", name, p, kAlignment));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SdpaDevice> CurrentSdpaDevice() {
  int device = 0, major = 0, minor = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return SdpaDevice{static_cast<int64_t>(cudnnGetVersion()), major * 10 + minor};
}

absl::Status SdpaSupported(const SdpaShape& s, SdpaDirection direction, const SdpaDevice& device) {
  if (s.dtype != DType::kF16 && s.dtype != DType::kBF16) return Unsupported(s, "cuDNN attention takes fp16 or bf16");
  if (s.b <= 0 || s.t <= 0 || s.nh <= 0 || s.hd <= 0) return Unsupported(s, "empty shape");
  if (s.hd % 8 != 0) return Unsupported(s, "head size not a multiple of 8");
  if (device.sm < 80) return Unsupported(s, absl::StrFormat("sm_%d: cuDNN attention needs sm_80 or newer", device.sm));
  if (device.cudnn_version < 90000) {
    return Unsupported(s, absl::StrFormat("cuDNN %d: built for cuDNN 9", device.cudnn_version));
  }
  if (device.cudnn_version == 91000 || device.cudnn_version == 91001) {
    return Unsupported(s, "cuDNN 9.10.0/9.10.1 have known SDPA bugs (9.10.2 fixes them)");
  }
  const int64_t max_hd = MaxHeadSize(direction, device);
  if (s.hd > max_hd) {
    return Unsupported(s, absl::StrFormat("head size above %d on sm_%d (%s)", max_hd, device.sm,
                                          direction == SdpaDirection::kForward ? "forward" : "backward"));
  }
  if (direction == SdpaDirection::kBackward && s.t == 1) return Unsupported(s, "backward needs t >= 2");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SdpaPlan>> BuildSdpaPlan(cudnnHandle_t handle, const SdpaShape& shape,
                                                        SdpaDirection direction, const SdpaDevice& device,
                                                        const CudnnSdpa::Options& options) {
  if (handle == nullptr) return absl::InvalidArgumentError("cuDNN attention plans need a cuDNN handle");
  RETURN_IF_ERROR(SdpaSupported(shape, direction, device));
  const bool backward = direction == SdpaDirection::kBackward;
  // Backward: the deterministic graph first where cuDNN has it (sm80, sm90).
  std::vector<bool> accumulators = {false};
  if (backward) {
    const int major = device.sm / 10;
    accumulators = options.deterministic_backward && (major == 8 || major == 9) ? std::vector<bool>{false, true}
                                                                                : std::vector<bool>{true};
  }
  std::string why;  // each graph variant's failure
  for (bool accumulator : accumulators) {
    absl::StatusOr<std::unique_ptr<SdpaGraph>> graph =
        BuildSdpaGraph(shape, direction, {device.cudnn_version, accumulator}, handle);
    if (!graph.ok() && graph.status().code() != absl::StatusCode::kUnimplemented) return graph.status();
    auto plan = std::make_unique<SdpaPlan>();
    size_t own = 0;  // the graph's fp32 buffers ahead of the engine's workspace
    if (backward) {
      plan->softmax_sum_offset = 0;
      own = Align256(sizeof(float) * shape.b * shape.nh * shape.t);
      if (accumulator) {
        plan->dq_accum_offset = own;
        own += Align256(sizeof(float) * shape.b * shape.nh * shape.t * shape.hd);
      }
    }
    absl::StatusOr<EngineChoice> choice =
        absl::UnimplementedError("the graph's own buffers exceed the workspace limit");
    if (!graph.ok()) {
      choice = graph.status();
    } else if (own < options.max_workspace_bytes) {
      // The accumulator graph is nondeterministic whatever the engine: take the first.
      choice = FirstEngine(handle, (*graph)->graph, options.max_workspace_bytes - own, backward && !accumulator);
    }
    if (!choice.ok()) {
      if (choice.status().code() != absl::StatusCode::kUnimplemented) return choice.status();
      const char* variant = !backward ? "" : accumulator ? "dQ-accumulator graph: " : "deterministic graph: ";
      absl::StrAppend(&why, why.empty() ? "" : "; ", variant, choice.status().message());
      continue;
    }
    plan->graph = std::move(*graph);
    plan->config = std::move(choice->config);
    plan->plan = std::move(choice->plan);
    plan->engine = choice->engine;
    plan->deterministic = !accumulator && !choice->nondeterministic;
    plan->engine_offset = Align256(own);
    plan->workspace_bytes = plan->engine_offset + choice->workspace;
    if (plan->graph->seq_len_mask) {
      const std::vector<int32_t> lens(2 * shape.b, static_cast<int32_t>(shape.t));
      // A one-off copy on a stream of its own (the plan has none), finished before return.
      ASSIGN_OR_RETURN(CudaStream copy, CudaStream::Create());
      ASSIGN_OR_RETURN(plan->seq_lens, DeviceBuffer::Allocate(lens.size() * sizeof(int32_t)));
      RETURN_IF_ERROR(plan->seq_lens.CopyFromHost(lens.data(), lens.size() * sizeof(int32_t), copy.get()));
    }
    return plan;
  }
  return Unsupported(shape, why);
}

CudnnSdpa::CudnnSdpa(Options options) : options_(options), builder_(BuildSdpaPlan) {}

CudnnSdpa::CudnnSdpa(Options options, SdpaDevice device, PlanBuilder builder)
    : options_(options), device_(device), builder_(std::move(builder)) {}

absl::StatusOr<const SdpaPlan*> CudnnSdpa::Plan(cudnnHandle_t handle, const SdpaShape& shape, SdpaDirection direction) {
  const Key key{direction, shape.b, shape.t, shape.nh, shape.hd, shape.dtype};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (auto it = unsupported_.find(key); it != unsupported_.end()) return it->second;
  if (!device_) {
    ASSIGN_OR_RETURN(SdpaDevice device, CurrentSdpaDevice());
    device_ = device;
  }
  if (absl::Status s = SdpaSupported(shape, direction, *device_); !s.ok()) return unsupported_[key] = s;
  absl::StatusOr<std::unique_ptr<SdpaPlan>> plan = builder_(handle, shape, direction, *device_, options_);
  if (!plan.ok()) {
    if (plan.status().code() == absl::StatusCode::kUnimplemented) unsupported_[key] = plan.status();
    return plan.status();
  }
  const SdpaPlan* out = plan->get();
  plans_.emplace(key, std::move(*plan));
  return out;
}

absl::StatusOr<size_t> CudnnSdpa::ForwardWorkspaceBytes(cudnnHandle_t handle, const SdpaShape& shape) {
  ASSIGN_OR_RETURN(const SdpaPlan* plan, Plan(handle, shape, SdpaDirection::kForward));
  return plan->workspace_bytes;
}

absl::StatusOr<size_t> CudnnSdpa::BackwardWorkspaceBytes(cudnnHandle_t handle, const SdpaShape& shape) {
  ASSIGN_OR_RETURN(const SdpaPlan* plan, Plan(handle, shape, SdpaDirection::kBackward));
  return plan->workspace_bytes;
}

absl::Status CudnnSdpa::Forward(cudnnHandle_t handle, const SdpaShape& shape, const void* qkv, void* out, float* stats,
                                void* workspace, cudaStream_t stream) {
  ASSIGN_OR_RETURN(const SdpaPlan* plan, Plan(handle, shape, SdpaDirection::kForward));
  RETURN_IF_ERROR(CheckAligned({{"qkv", qkv}, {"out", out}, {"stats", stats}, {"workspace", workspace}}));
  RETURN_IF_ERROR(CheckWorkspace(*plan, workspace));
  const size_t head_bytes = shape.nh * shape.hd * DTypeSize(shape.dtype);
  char* q = const_cast<char*>(static_cast<const char*>(qkv));
  float scale = shape.scale, neg_inf = plan->graph->neg_inf;
  return Execute(handle, *plan, {kSdpaQ, kSdpaK, kSdpaV, kSdpaO, kSdpaStats, kSdpaScale, kSdpaNegInf},
                 {q, q + head_bytes, q + 2 * head_bytes, out, stats, &scale, &neg_inf}, workspace, stream);
}

absl::Status CudnnSdpa::Backward(cudnnHandle_t handle, const SdpaShape& shape, const void* qkv, const void* out,
                                 const void* dout, const float* stats, void* dqkv, void* workspace,
                                 cudaStream_t stream) {
  ASSIGN_OR_RETURN(const SdpaPlan* plan, Plan(handle, shape, SdpaDirection::kBackward));
  RETURN_IF_ERROR(CheckAligned(
      {{"qkv", qkv}, {"out", out}, {"dout", dout}, {"stats", stats}, {"dqkv", dqkv}, {"workspace", workspace}}));
  RETURN_IF_ERROR(CheckWorkspace(*plan, workspace));
  const SdpaGraph& g = *plan->graph;
  const size_t head_bytes = shape.nh * shape.hd * DTypeSize(shape.dtype);
  char* q = const_cast<char*>(static_cast<const char*>(qkv));
  char* dq = static_cast<char*>(dqkv);
  char* ws = static_cast<char*>(workspace);
  float scale = shape.scale, neg_inf = g.neg_inf, one = 1.0f;
  std::vector<int64_t> uids = {kSdpaQ,  kSdpaK,  kSdpaV,     kSdpaO,      kSdpaDO,  kSdpaStats,     kSdpaDQ,
                               kSdpaDK, kSdpaDV, kSdpaScale, kSdpaNegInf, kSdpaOne, kSdpaSoftmaxSum};
  std::vector<void*> ptrs = {q,
                             q + head_bytes,
                             q + 2 * head_bytes,
                             const_cast<void*>(out),
                             const_cast<void*>(dout),
                             const_cast<float*>(stats),
                             dq,
                             dq + head_bytes,
                             dq + 2 * head_bytes,
                             &scale,
                             &neg_inf,
                             &one,
                             ws + plan->softmax_sum_offset};
  if (g.dq_accumulator) {
    uids.push_back(kSdpaDQAccum);
    ptrs.push_back(ws + plan->dq_accum_offset);
    // cuDNN zeroes its dQ accumulator itself from 9.6.0 (cudnn-frontend memsets it before).
    if (device_->cudnn_version < 90600) {
      const size_t bytes = sizeof(float) * shape.b * shape.nh * shape.t * shape.hd;
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws + plan->dq_accum_offset, 0, bytes, stream));
    }
  }
  if (g.seq_len_mask) {
    int32_t* lens = static_cast<int32_t*>(plan->seq_lens.data());
    uids.insert(uids.end(), {kSdpaSeqLenQ, kSdpaSeqLenKv});
    ptrs.insert(ptrs.end(), {lens, lens + shape.b});
  }
  return Execute(handle, *plan, uids, ptrs, ws, stream);
}

absl::Status CudnnSdpa::Execute(cudnnHandle_t handle, const SdpaPlan& plan, const std::vector<int64_t>& uids,
                                const std::vector<void*>& pointers, void* workspace, cudaStream_t stream) const {
  void* engine_workspace = static_cast<char*>(workspace) + plan.engine_offset;
  ASSIGN_OR_RETURN(CudnnBackendDesc pack, Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  const int64_t n = static_cast<int64_t>(uids.size());
  CUDNN_RETURN_IF_ERROR(
      cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data()));
  CUDNN_RETURN_IF_ERROR(cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                                 n, pointers.data()));
  CUDNN_RETURN_IF_ERROR(Set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, engine_workspace));
  CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(pack.get()));
  cudaStream_t previous = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnGetStream(handle, &previous));
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle, stream));
  absl::Status run = CUDNN_STATUS(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
  absl::Status restore = CUDNN_STATUS(cudnnSetStream(handle, previous));
  return run.ok() ? restore : run;
}

}  // namespace ringmaster::engine
