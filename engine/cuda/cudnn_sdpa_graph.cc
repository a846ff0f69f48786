// The operation graphs of cuDNN attention (see cudnn_sdpa.h): forward and
// backward, as cudnn-frontend lowers them, built with cuDNN's backend API.
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cudnn_backend_util.h"
#include "engine/cuda/cudnn_sdpa.h"

namespace ringmaster::engine {
namespace {

using cudnn_backend::Create;
using cudnn_backend::Desc;
using cudnn_backend::kAlignment;
using cudnn_backend::Set;
using Dims = std::vector<int64_t>;

struct Spec {
  Dims dims, strides;
  cudnnDataType_t type;
  Spec As(cudnnDataType_t t) const { return {dims, strides, t}; }
};

// Builds one operation graph. The first failing cuDNN call is kept and every
// later call does nothing (returns null), so graph code reads as a list of
// operations; Finish() reports that first failure.
class GraphBuilder {
 public:
  explicit GraphBuilder(SdpaDirection direction) : g_(std::make_unique<SdpaGraph>()) { g_->direction = direction; }

  Desc Tensor(int64_t uid, const Spec& spec, bool is_virtual = false, bool by_value = false) {
    Desc d = New(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t rank = static_cast<int64_t>(spec.dims.size());
    Check(Set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, spec.type), "tensor data type");
    Check(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, spec.dims.data()),
          "tensor dimensions");
    Check(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, spec.strides.data()),
          "tensor strides");
    Check(Set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid), "tensor id");
    Check(Set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, kAlignment), "tensor alignment");
    Check(Set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual), "tensor virtual");
    if (by_value) Check(Set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, by_value), "tensor by value");
    Finalize(d, "tensor");
    if (d != nullptr) {
      g_->tensors[uid] = d;
      uid_of_[d] = uid;
    }
    return d;
  }
  Desc Virtual(const Spec& spec) { return Tensor(next_virtual_++, spec, /*is_virtual=*/true); }
  // A scalar the variant pack passes by value (a host pointer at execution).
  Desc Scalar(int64_t uid) { return Tensor(uid, {{1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT}, false, true); }

  // y = mode(x[, b[, t]]) into the existing tensor y; GEN_INDEX takes `axis`.
  void PointwiseInto(cudnnPointwiseMode_t mode, Desc y, Desc x, Desc b = nullptr, Desc t = nullptr,
                     cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw = New(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    Check(Set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode), "pointwise mode");
    Check(Set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, compute), "pointwise precision");
    if (mode == CUDNN_POINTWISE_GEN_INDEX) Check(Set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis), "axis");
    Finalize(pw, "pointwise");
    Desc op = New(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, pw), "pointwise");
    Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x), "pointwise x");
    if (b != nullptr) Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b), "b");
    if (t != nullptr) Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t), "t");
    Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y), "pointwise y");
    Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1.0f), "alpha1");
    Check(Set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1.0f), "alpha2");
    const char* kind = mode != CUDNN_POINTWISE_GEN_INDEX ? PointwiseKind(mode) : axis == 2 ? "gen_row" : "gen_col";
    AddOp(op, kind, {x, b, t}, y);
  }
  // The same into a new virtual tensor of `out`.
  Desc Pointwise(cudnnPointwiseMode_t mode, const Spec& out, Desc x, Desc b = nullptr, Desc t = nullptr,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc y = Virtual(out);
    PointwiseInto(mode, y, x, b, t, compute, axis);
    return y;
  }

  // c = a @ b (fp32 accumulation); the overrides are per-batch GEMM sizes.
  void Matmul(Desc a, Desc b, Desc c, Desc m = nullptr, Desc n = nullptr, Desc k = nullptr) {
    Desc mm = New(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    Check(Set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT), "matmul precision");
    Finalize(mm, "matmul");
    Desc op = New(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    Check(Set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a), "matmul a");
    Check(Set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b), "matmul b");
    Check(Set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c), "matmul c");
    Check(Set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, mm), "matmul");
    const std::pair<cudnnBackendAttributeName_t, Desc> overrides[] = {
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m},
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n},
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k}};
    for (const auto& [name, d] : overrides) {
      if (d != nullptr) Check(Set(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, d), "matmul override");
    }
    AddOp(op, "matmul", {a, b, m, n, k}, c);
  }

  // y = reduce(x) over the axes where y has extent 1.
  void Reduction(cudnnReduceTensorOp_t reduce, Desc x, Desc y) {
    Desc r = New(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    Check(Set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT), "reduction precision");
    Check(Set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, reduce), "reduction operator");
    // The attribute exists from cuDNN 9.11 (the loaded library's version
    // decides, not the graph's); cudnn-frontend states it (false) there.
    if (cudnnGetVersion() >= 91100) {
      Check(Set(r, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, false), "reduction determinism");
    }
    Finalize(r, "reduction");
    Desc op = New(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    Check(Set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x), "reduction x");
    Check(Set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y), "reduction y");
    Check(Set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, r), "reduction");
    AddOp(op, reduce == CUDNN_REDUCE_TENSOR_MAX ? "reduce_max" : "reduce_add", {x}, y);
  }

  // y views x's elements with other dims/strides (a transpose here).
  void Reshape(Desc x, Desc y) {
    Desc op = New(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    Check(Set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x), "reshape x");
    Check(Set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y), "reshape y");
    AddOp(op, "reshape", {x}, y);
  }

  absl::StatusOr<std::unique_ptr<SdpaGraph>> Finish(cudnnHandle_t handle) {
    RETURN_IF_ERROR(status_);
    ASSIGN_OR_RETURN(CudnnBackendDesc graph, Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
    CUDNN_RETURN_IF_ERROR(cudnnBackendSetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(g_->ops.size()),
                                                   g_->ops.data()));
    // Needed before cuDNN 9.8; a graph finalizes without one (and a device) from 9.8.
    if (handle != nullptr)
      CUDNN_RETURN_IF_ERROR(Set(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle));
    SDPA_RETURN_IF_UNSUPPORTED(cudnnBackendFinalize(graph.get()));
    g_->graph = graph.get();
    g_->owned.push_back(std::move(graph));
    return std::move(g_);
  }

  SdpaGraph& graph() { return *g_; }

 private:
  Desc New(cudnnBackendDescriptorType_t type) {
    if (!status_.ok()) return nullptr;
    absl::StatusOr<CudnnBackendDesc> d = Create(type);
    if (!d.ok()) {
      status_ = d.status();
      return nullptr;
    }
    g_->owned.push_back(std::move(*d));
    return g_->owned.back().get();
  }
  void Check(cudnnStatus_t status, const char* what) {
    if (status_.ok() && status != CUDNN_STATUS_SUCCESS) status_ = CudnnStatus(status, what, __FILE__, __LINE__);
  }
  void Finalize(Desc d, const char* what) {
    if (status_.ok()) Check(cudnnBackendFinalize(d), absl::StrCat("finalizing a ", what).c_str());
  }
  void AddOp(Desc op, const char* kind, std::initializer_list<Desc> inputs, Desc output) {
    Finalize(op, kind);
    if (!status_.ok()) return;
    g_->ops.push_back(op);
    SdpaOpInfo info{kind, {}, uid_of_[output]};
    for (Desc in : inputs) {
      if (in != nullptr) info.inputs.push_back(uid_of_[in]);
    }
    g_->op_info.push_back(std::move(info));
  }
  static const char* PointwiseKind(cudnnPointwiseMode_t mode) {
    switch (mode) {
      case CUDNN_POINTWISE_ADD: return "add";
      case CUDNN_POINTWISE_SUB: return "sub";
      case CUDNN_POINTWISE_MUL: return "mul";
      case CUDNN_POINTWISE_DIV: return "div";
      case CUDNN_POINTWISE_EXP: return "exp";
      case CUDNN_POINTWISE_LOG: return "log";
      case CUDNN_POINTWISE_IDENTITY: return "identity";
      case CUDNN_POINTWISE_CMP_GE: return "cmp_ge";
      case CUDNN_POINTWISE_CMP_LT: return "cmp_lt";
      case CUDNN_POINTWISE_LOGICAL_AND: return "and";
      case CUDNN_POINTWISE_BINARY_SELECT: return "select";
      default: return "pointwise";
    }
  }

  std::unique_ptr<SdpaGraph> g_;
  std::map<Desc, int64_t> uid_of_;
  absl::Status status_;
  int64_t next_virtual_ = kSdpaFirstVirtualUid;
};

// The specs of the graphs' tensors for one shape.
struct Layout {
  explicit Layout(const SdpaShape& s) : b(s.b), t(s.t), nh(s.nh), hd(s.hd) {
    io = s.dtype == DType::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    const int64_t row3 = 3 * nh * hd;  // one token's q, k, v
    qkv = {{b, nh, t, hd}, {t * row3, hd, row3, 1}, io};
    qkv_t = {{b, nh, hd, t}, {t * row3, hd, 1, row3}, io};  // K^T, V^T
    out = {{b, nh, t, hd}, {t * nh * hd, hd, nh * hd, 1}, io};
    rows = {{b, nh, t, 1}, {nh * t, t, 1, 1}, CUDNN_DATA_FLOAT};
    scores = {{b, nh, t, t}, {nh * t * t, t * t, t, 1}, CUDNN_DATA_FLOAT};
    scores_t = {{b, nh, t, t}, {nh * t * t, t * t, 1, t}, io};  // [b, nh, keys, queries] over the same memory
  }
  int64_t b, t, nh, hd;
  cudnnDataType_t io;
  Spec qkv, qkv_t, out, rows, scores, scores_t;
};

// Keeps scores[i][j] for j <= i and fills the rest with neg_inf: cudnn-frontend's
// diagonal-band mask with right bound 0, top-left (its pre-9.21 lowering).
Desc CausalMask(GraphBuilder& gb, const Layout& l, Desc scores, Desc neg_inf) {
  Desc row = gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, l.scores.As(CUDNN_DATA_INT32), scores, nullptr, nullptr,
                          CUDNN_DATA_FLOAT, 2);
  Desc col = gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, l.scores.As(CUDNN_DATA_INT32), scores, nullptr, nullptr,
                          CUDNN_DATA_FLOAT, 3);
  Desc keep =
      gb.Pointwise(CUDNN_POINTWISE_CMP_GE, l.scores.As(CUDNN_DATA_BOOLEAN), row, col, nullptr, CUDNN_DATA_BOOLEAN);
  return gb.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, l.scores, scores, neg_inf, keep);
}

// Keeps scores of rows < seq_q and columns < seq_kv (both t here): the
// workaround cudnn-frontend adds to backward graphs on cuDNN <= 9.15.0 when
// t % 128 != 0.
Desc PaddingMask(GraphBuilder& gb, const Layout& l, Desc scores, Desc seq_q, Desc seq_kv, Desc neg_inf) {
  const Spec index = l.scores.As(CUDNN_DATA_INT32), mask = l.scores.As(CUDNN_DATA_BOOLEAN);
  Desc row = gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, index, scores, nullptr, nullptr, CUDNN_DATA_INT32, 2);
  Desc col = gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, index, scores, nullptr, nullptr, CUDNN_DATA_INT32, 3);
  Desc row_in = gb.Pointwise(CUDNN_POINTWISE_CMP_LT, mask, row, seq_q, nullptr, CUDNN_DATA_BOOLEAN);
  Desc col_in = gb.Pointwise(CUDNN_POINTWISE_CMP_LT, mask, col, seq_kv, nullptr, CUDNN_DATA_BOOLEAN);
  Desc keep = gb.Pointwise(CUDNN_POINTWISE_LOGICAL_AND, mask, row_in, col_in, nullptr, CUDNN_DATA_BOOLEAN);
  return gb.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, l.scores, scores, neg_inf, keep);
}

// O = softmax(causal(scale * Q K^T)) V and Stats = rowmax + log(rowsum exp(. - rowmax)).
void ForwardOps(GraphBuilder& gb, const Layout& l) {
  Desc q = gb.Tensor(kSdpaQ, l.qkv), kt = gb.Tensor(kSdpaK, l.qkv_t), v = gb.Tensor(kSdpaV, l.qkv);
  Desc o = gb.Tensor(kSdpaO, l.out), stats = gb.Tensor(kSdpaStats, l.rows);
  Desc scale = gb.Scalar(kSdpaScale), neg_inf = gb.Scalar(kSdpaNegInf);
  Desc s = gb.Virtual(l.scores);
  gb.Matmul(q, kt, s);
  s = gb.Pointwise(CUDNN_POINTWISE_MUL, l.scores, s, scale);
  s = CausalMask(gb, l, s, neg_inf);
  Desc max = gb.Virtual(l.rows);
  gb.Reduction(CUDNN_REDUCE_TENSOR_MAX, s, max);
  s = gb.Pointwise(CUDNN_POINTWISE_SUB, l.scores, s, max);
  Desc e = gb.Pointwise(CUDNN_POINTWISE_EXP, l.scores, s);
  Desc sum = gb.Virtual(l.rows);
  gb.Reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  Desc log_sum = gb.Pointwise(CUDNN_POINTWISE_LOG, l.rows, sum);
  gb.PointwiseInto(CUDNN_POINTWISE_ADD, stats, max, log_sum);
  Desc p = gb.Pointwise(CUDNN_POINTWISE_DIV, l.scores.As(l.io), e, sum);  // bmm2 reads P in the I/O type
  gb.Matmul(p, v, o);
}

// dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)) * scale, dK = dS^T Q, dQ = dS K,
// with P recomputed from Stats (cudnn-frontend's CompositeSDPABackwardNode).
void BackwardOps(GraphBuilder& gb, const Layout& l, const SdpaGraphOptions& options) {
  SdpaGraph& g = gb.graph();
  Desc q = gb.Tensor(kSdpaQ, l.qkv), kt = gb.Tensor(kSdpaK, l.qkv_t), vt = gb.Tensor(kSdpaV, l.qkv_t);
  Desc o = gb.Tensor(kSdpaO, l.out), dout = gb.Tensor(kSdpaDO, l.out), stats = gb.Tensor(kSdpaStats, l.rows);
  Desc dq = gb.Tensor(kSdpaDQ, l.qkv), dk = gb.Tensor(kSdpaDK, l.qkv), dv = gb.Tensor(kSdpaDV, l.qkv);
  Desc scale = gb.Scalar(kSdpaScale), neg_inf = gb.Scalar(kSdpaNegInf), one = gb.Scalar(kSdpaOne);
  Desc seq_q = nullptr, seq_kv = nullptr;
  if (g.seq_len_mask) {
    const Spec lens{{l.b, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT32};
    seq_q = gb.Tensor(kSdpaSeqLenQ, lens);
    seq_kv = gb.Tensor(kSdpaSeqLenKv, lens);
  }
  // softmax_sum = rowsum(dO * O), a non-virtual fp32 tensor in the workspace.
  const Spec prod{{l.b, l.nh, l.t, l.hd}, {l.nh * l.t * l.hd, l.t * l.hd, l.nh * l.hd, 1}, CUDNN_DATA_FLOAT};
  Desc d_o = gb.Pointwise(CUDNN_POINTWISE_MUL, prod, dout, o);
  Desc row_sum = gb.Virtual(l.rows);
  gb.Reduction(CUDNN_REDUCE_TENSOR_ADD, d_o, row_sum);
  Desc softmax_sum = gb.Tensor(kSdpaSoftmaxSum, l.rows);
  gb.PointwiseInto(CUDNN_POINTWISE_MUL, softmax_sum, row_sum, one);
  // P = exp(mask(scale * Q K^T) - Stats).
  Desc s = gb.Virtual(l.scores);
  gb.Matmul(q, kt, s, seq_q, seq_kv);
  s = gb.Pointwise(CUDNN_POINTWISE_MUL, l.scores, s, scale);
  if (g.seq_len_mask) s = PaddingMask(gb, l, s, seq_q, seq_kv, neg_inf);
  s = gb.Pointwise(CUDNN_POINTWISE_SUB, l.scores, s, stats);
  if (g.seq_len_mask && options.cudnn_version >= 90000 && options.cudnn_version < 91000) {
    s = PaddingMask(gb, l, s, seq_q, seq_kv, neg_inf);  // cudnn-frontend repeats it after Stats there
  }
  s = CausalMask(gb, l, s, neg_inf);
  Desc p = gb.Pointwise(CUDNN_POINTWISE_EXP, l.scores, s);
  Desc p_t = gb.Virtual(l.scores_t);
  gb.Reshape(p, p_t);
  gb.Matmul(p_t, dout, dv, seq_kv, nullptr, seq_q);
  Desc dp = gb.Virtual(l.scores);
  gb.Matmul(dout, vt, dp, seq_q, seq_kv);
  dp = gb.Pointwise(CUDNN_POINTWISE_SUB, l.scores, dp, softmax_sum);
  Desc ds = gb.Pointwise(CUDNN_POINTWISE_MUL, l.scores, dp, p);
  ds = gb.Pointwise(CUDNN_POINTWISE_MUL, l.scores, ds, scale);
  Desc ds_t = gb.Virtual(l.scores_t);
  gb.Reshape(ds, ds_t);
  gb.Matmul(ds_t, q, dk, seq_kv, nullptr, seq_q);
  Desc k = gb.Virtual(l.qkv.As(CUDNN_DATA_FLOAT));  // K^T viewed back as K
  gb.Reshape(kt, k);
  if (g.dq_accumulator) {
    const Spec acc{{l.b, l.nh, l.t, l.hd}, {l.nh * l.t * l.hd, l.t * l.hd, l.hd, 1}, CUDNN_DATA_FLOAT};
    Desc dq_acc = gb.Tensor(kSdpaDQAccum, acc);
    gb.Matmul(ds, k, dq_acc, seq_q, nullptr, seq_kv);
    gb.PointwiseInto(CUDNN_POINTWISE_IDENTITY, dq, dq_acc);
  } else {
    gb.Matmul(ds, k, dq, seq_q, nullptr, seq_kv);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SdpaGraph>> BuildSdpaGraph(const SdpaShape& shape, SdpaDirection direction,
                                                          const SdpaGraphOptions& options, cudnnHandle_t handle) {
  const Layout layout(shape);
  GraphBuilder gb(direction);
  SdpaGraph& g = gb.graph();
  // cudnn-frontend's mask value: the lowest float before 9.10, -inf from 9.10.
  g.neg_inf =
      options.cudnn_version < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
  if (direction == SdpaDirection::kForward) {
    ForwardOps(gb, layout);
  } else {
    g.dq_accumulator = options.dq_accumulator;
    g.seq_len_mask = shape.t % 128 != 0 && options.cudnn_version <= 91500;
    BackwardOps(gb, layout, options);
  }
  return gb.Finish(handle);
}

}  // namespace ringmaster::engine
