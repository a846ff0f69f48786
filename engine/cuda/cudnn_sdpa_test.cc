// CudnnSdpa without a device: the support rules, every tensor and operation
// descriptor and the finalized operation graphs (cuDNN 9.8+ needs no handle
// for them), read back through cudnnBackendGetAttribute, and the plan cache
// with a fake plan builder. With a device: forward and backward against the
// flash algorithm's CPU twin in bf16 and fp16 (skipped here, with a message).

#include "engine/cuda/cudnn_sdpa.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/core/flash_attention_reference.h"
#include "engine/core/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

using ::testing::HasSubstr;
using Desc = cudnnBackendDescriptor_t;
using Dims = std::vector<int64_t>;

// --------------------------------------------------------------- support rules

constexpr SdpaDevice kH100{91900, 90};
const int64_t kLoadedCudnn = static_cast<int64_t>(cudnnGetVersion());
constexpr SdpaDevice kA100{91900, 80};

SdpaShape Shape(int64_t b, int64_t t, int64_t nh, int64_t hd, DType dtype = DType::kBF16) {
  return {b, t, nh, hd, dtype, 1.0f / std::sqrt(static_cast<float>(hd))};
}

void ExpectRefused(const SdpaShape& s, SdpaDirection d, const SdpaDevice& device, const char* reason) {
  absl::Status status = SdpaSupported(s, d, device);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(reason));
}

TEST(SdpaSupportedTest, TakesGpt2ShapesOnAmpereAndHopper) {
  for (SdpaDirection d : {SdpaDirection::kForward, SdpaDirection::kBackward}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      EXPECT_TRUE(SdpaSupported(Shape(8, 1024, 12, 64, dtype), d, kH100).ok());
      EXPECT_TRUE(SdpaSupported(Shape(8, 1024, 12, 64, dtype), d, kA100).ok());
      EXPECT_TRUE(SdpaSupported(Shape(2, 17, 3, 128, dtype), d, {91002, 80}).ok());
    }
  }
  EXPECT_TRUE(SdpaSupported(Shape(1, 1, 1, 64), SdpaDirection::kForward, kH100).ok());
  EXPECT_TRUE(SdpaSupported(Shape(1, 64, 2, 256), SdpaDirection::kBackward, kH100).ok());
}

TEST(SdpaSupportedTest, RefusesWhatCudnnCannotTakeNamingTheReason) {
  const auto fwd = SdpaDirection::kForward, bwd = SdpaDirection::kBackward;
  ExpectRefused(Shape(2, 64, 4, 64, DType::kF32), fwd, kH100, "fp16 or bf16");
  ExpectRefused(Shape(2, 64, 4, 60), fwd, kH100, "head size not a multiple of 8");
  ExpectRefused(Shape(2, 64, 4, 264), fwd, kH100, "head size above 256 on sm_90 (forward)");
  ExpectRefused(Shape(2, 64, 4, 256), bwd, kA100, "head size above 128 on sm_80 (backward)");
  ExpectRefused(Shape(2, 64, 4, 256), fwd, {90900, 86}, "head size above 128 on sm_86 (forward)");
  ExpectRefused(Shape(2, 64, 4, 64), fwd, {91900, 75}, "sm_75: cuDNN attention needs sm_80 or newer");
  ExpectRefused(Shape(2, 64, 4, 64), bwd, {91000, 90}, "9.10.0/9.10.1 have known SDPA bugs");
  ExpectRefused(Shape(2, 64, 4, 64), fwd, {91001, 90}, "9.10.0/9.10.1");
  ExpectRefused(Shape(2, 64, 4, 64), fwd, {8906, 90}, "built for cuDNN 9");
  ExpectRefused(Shape(2, 1, 4, 64), bwd, kH100, "backward needs t >= 2");
  ExpectRefused(Shape(0, 64, 4, 64), fwd, kH100, "empty shape");
  // The message says which problem it was.
  EXPECT_THAT(std::string(SdpaSupported(Shape(2, 64, 4, 60), fwd, kH100).message()),
              HasSubstr("b=2 t=64 nh=4 hd=60 bf16"));
}

// ------------------------------------------------------ descriptors, read back

template <typename T>
T Get(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) {
  T value{};
  int64_t count = 0;
  EXPECT_EQ(cudnnBackendGetAttribute(d, name, type, 1, &count, &value), CUDNN_STATUS_SUCCESS) << name;
  EXPECT_EQ(count, 1) << name;
  return value;
}

Dims GetInts(Desc d, cudnnBackendAttributeName_t name) {
  Dims v(8);
  int64_t count = 0;
  EXPECT_EQ(cudnnBackendGetAttribute(d, name, CUDNN_TYPE_INT64, 8, &count, v.data()), CUDNN_STATUS_SUCCESS);
  v.resize(count);
  return v;
}

struct WantTensor {
  int64_t uid;
  Dims dims, strides;
  cudnnDataType_t type;
  bool by_value = false;
  bool is_virtual = false;
};

// What cuDNN holds for the tensor. (9.19 answers NOT_SUPPORTED for reading
// CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT back, so the declared 16 is not read here.)
void ExpectTensor(const SdpaGraph& g, const WantTensor& w) {
  SCOPED_TRACE(::testing::Message() << "tensor uid " << w.uid);
  auto it = g.tensors.find(w.uid);
  ASSERT_NE(it, g.tensors.end());
  Desc d = it->second;
  EXPECT_EQ(Get<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64), w.uid);
  EXPECT_EQ(GetInts(d, CUDNN_ATTR_TENSOR_DIMENSIONS), w.dims);
  EXPECT_EQ(GetInts(d, CUDNN_ATTR_TENSOR_STRIDES), w.strides);
  EXPECT_EQ(Get<cudnnDataType_t>(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE), w.type);
  EXPECT_EQ(Get<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN), w.is_virtual);
  EXPECT_EQ(Get<bool>(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN), w.by_value);
}

cudnnDataType_t TypeOf(const SdpaGraph& g, int64_t uid) {
  EXPECT_TRUE(g.tensors.count(uid)) << uid;
  if (!g.tensors.count(uid)) return CUDNN_DATA_INT8;
  return Get<cudnnDataType_t>(g.tensors.at(uid), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE);
}

// The uid of the tensor `op` holds under `name`, read back from cuDNN.
int64_t OperandUid(Desc op, cudnnBackendAttributeName_t name) {
  Desc tensor = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &tensor) != CUDNN_STATUS_SUCCESS) return -2;
  CudnnBackendDesc owner(tensor);
  int64_t count = 0, uid = -1;
  if (cudnnBackendGetAttribute(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &tensor) != CUDNN_STATUS_SUCCESS ||
      count != 1) {
    return -1;
  }
  cudnnBackendGetAttribute(tensor, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &count, &uid);
  return uid;
}

std::vector<std::string> Kinds(const SdpaGraph& g) {
  std::vector<std::string> kinds;
  for (const SdpaOpInfo& op : g.op_info) kinds.push_back(op.kind);
  return kinds;
}

// Checks every graph: the record matches what cuDNN reads back where it can
// (matmul and reduction operands; 9.19 cannot read pointwise operations back),
// each operation writes its own tensor, `written` are written once and
// `inputs` never, and virtual tensors are exactly those numbered from
// kSdpaFirstVirtualUid. cuDNN finalized the graph and counts engines for it.
void ExpectWellFormed(const SdpaGraph& g, const std::vector<int64_t>& written, const std::vector<int64_t>& inputs) {
  ASSERT_NE(g.graph, nullptr);
  ASSERT_EQ(g.ops.size(), g.op_info.size());
  std::multiset<int64_t> outputs;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const SdpaOpInfo& info = g.op_info[i];
    SCOPED_TRACE(::testing::Message() << "op " << i << " " << info.kind);
    outputs.insert(info.output);
    if (info.kind == "matmul") {
      ASSERT_GE(info.inputs.size(), 2u);
      EXPECT_EQ(OperandUid(g.ops[i], CUDNN_ATTR_OPERATION_MATMUL_ADESC), info.inputs[0]);
      EXPECT_EQ(OperandUid(g.ops[i], CUDNN_ATTR_OPERATION_MATMUL_BDESC), info.inputs[1]);
      EXPECT_EQ(OperandUid(g.ops[i], CUDNN_ATTR_OPERATION_MATMUL_CDESC), info.output);
    } else if (info.kind == "reduce_max" || info.kind == "reduce_add") {
      EXPECT_EQ(OperandUid(g.ops[i], CUDNN_ATTR_OPERATION_REDUCTION_XDESC), info.inputs.at(0));
      EXPECT_EQ(OperandUid(g.ops[i], CUDNN_ATTR_OPERATION_REDUCTION_YDESC), info.output);
    } else if (info.kind == "cmp_ge") {  // the causal mask keeps row >= col
      ASSERT_GE(i, 2u);
      EXPECT_EQ(g.op_info[i - 2].kind, "gen_row");
      EXPECT_EQ(g.op_info[i - 1].kind, "gen_col");
      EXPECT_EQ(info.inputs, (Dims{g.op_info[i - 2].output, g.op_info[i - 1].output}));
    } else if (info.kind == "cmp_lt") {  // the padding mask keeps row < seq_len_q, col < seq_len_kv
      const bool row = info.inputs.at(1) == kSdpaSeqLenQ;
      EXPECT_EQ(info.inputs.at(1), row ? kSdpaSeqLenQ : kSdpaSeqLenKv);
      EXPECT_EQ(g.op_info[i - 2].kind, row ? "gen_row" : "gen_col");
      EXPECT_EQ(info.inputs.at(0), g.op_info[i - 2].output);
    } else if (info.kind == "select") {  // masked scores become the fill value
      ASSERT_EQ(info.inputs.size(), 3u);
      EXPECT_EQ(info.inputs[1], kSdpaNegInf);
      EXPECT_EQ(info.inputs[2], g.op_info[i - 1].output);
    }
  }
  EXPECT_EQ(std::set<int64_t>(outputs.begin(), outputs.end()).size(), outputs.size());
  for (int64_t uid : written) EXPECT_EQ(outputs.count(uid), 1u) << uid;
  for (int64_t uid : inputs) EXPECT_EQ(outputs.count(uid), 0u) << uid;
  for (const auto& [uid, d] : g.tensors) {
    EXPECT_EQ(Get<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN), uid >= kSdpaFirstVirtualUid) << uid;
  }
  EXPECT_GT(Get<int64_t>(g.graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64), 0);
}

class SdpaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudnnGetVersion() < 90800) {
      GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " finalizes operation graphs only with a handle (a device)";
    }
  }
  // b=2, t=17, nh=3, hd=64: qkv rows of 3*3*64 = 576 elements, out rows of 192.
  const SdpaShape shape_ = Shape(2, 17, 3, 64);
  const Dims qkv_dims_{2, 3, 17, 64}, qkv_strides_{17 * 576, 64, 576, 1};
  const Dims kt_dims_{2, 3, 64, 17}, kt_strides_{17 * 576, 64, 1, 576};
  const Dims out_strides_{17 * 192, 64, 192, 1};
  const Dims rows_dims_{2, 3, 17, 1}, rows_strides_{51, 17, 1, 1};
};

const std::vector<std::string> kCausal = {"gen_row", "gen_col", "cmp_ge", "select"};
const std::vector<std::string> kPadding = {"gen_row", "gen_col", "cmp_lt", "cmp_lt", "and", "select"};

std::vector<std::string> Concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

TEST_F(SdpaGraphTest, ForwardGraphHasTheFusedLayoutsAndFinalizesWithoutADevice) {
  absl::StatusOr<std::unique_ptr<SdpaGraph>> built =
      BuildSdpaGraph(shape_, SdpaDirection::kForward, {kLoadedCudnn, true}, /*handle=*/nullptr);
  ASSERT_TRUE(built.ok()) << built.status();
  const SdpaGraph& g = **built;
  ExpectTensor(g, {kSdpaQ, qkv_dims_, qkv_strides_, CUDNN_DATA_BFLOAT16});
  ExpectTensor(g, {kSdpaK, kt_dims_, kt_strides_, CUDNN_DATA_BFLOAT16});  // K^T over the same memory
  ExpectTensor(g, {kSdpaV, qkv_dims_, qkv_strides_, CUDNN_DATA_BFLOAT16});
  ExpectTensor(g, {kSdpaO, qkv_dims_, out_strides_, CUDNN_DATA_BFLOAT16});
  ExpectTensor(g, {kSdpaStats, rows_dims_, rows_strides_, CUDNN_DATA_FLOAT});
  ExpectTensor(g, {kSdpaScale, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, true});
  ExpectTensor(g, {kSdpaNegInf, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, true});
  EXPECT_EQ(g.tensors.count(kSdpaDQ), 0u);
  EXPECT_TRUE(std::isinf(g.neg_inf) && g.neg_inf < 0) << g.neg_inf;
  ExpectWellFormed(g, {kSdpaO, kSdpaStats}, {kSdpaQ, kSdpaK, kSdpaV, kSdpaScale, kSdpaNegInf});

  // Q K^T, scale, causal mask, softmax with its stats, P V.
  ASSERT_EQ(
      Kinds(g),
      Concat({{"matmul", "mul"}, kCausal, {"reduce_max", "sub", "exp", "reduce_add", "log", "add", "div", "matmul"}}));
  const std::vector<SdpaOpInfo>& op = g.op_info;
  EXPECT_EQ(op[0].inputs, (Dims{kSdpaQ, kSdpaK}));
  EXPECT_EQ(op[1].inputs, (Dims{op[0].output, kSdpaScale}));
  EXPECT_EQ(op[4].inputs, (Dims{op[2].output, op[3].output}));  // row >= col: keys up to the query
  EXPECT_EQ(op[5].inputs, (Dims{op[1].output, kSdpaNegInf, op[4].output}));
  EXPECT_EQ(op[6].inputs, (Dims{op[5].output}));                  // the row max
  EXPECT_EQ(op[11].inputs, (Dims{op[6].output, op[10].output}));  // Stats = max + log(sum)
  EXPECT_EQ(op[11].output, kSdpaStats);
  EXPECT_EQ(op[13].inputs, (Dims{op[12].output, kSdpaV}));
  EXPECT_EQ(TypeOf(g, op[12].output), CUDNN_DATA_BFLOAT16);  // P enters P V in the I/O type
  EXPECT_EQ(TypeOf(g, op[0].output), CUDNN_DATA_FLOAT);      // the scores stay fp32
  EXPECT_EQ(TypeOf(g, op[2].output), CUDNN_DATA_INT32);
  EXPECT_EQ(TypeOf(g, op[4].output), CUDNN_DATA_BOOLEAN);
  ExpectTensor(g, {op[0].output, {2, 3, 17, 17}, {867, 289, 17, 1}, CUDNN_DATA_FLOAT, false, true});
  EXPECT_EQ(GetInts(g.tensors.at(op[6].output), CUDNN_ATTR_TENSOR_DIMENSIONS), rows_dims_);
}

TEST_F(SdpaGraphTest, Fp16GraphsUseHalf) {
  SdpaShape s = shape_;
  s.dtype = DType::kF16;
  for (SdpaDirection d : {SdpaDirection::kForward, SdpaDirection::kBackward}) {
    absl::StatusOr<std::unique_ptr<SdpaGraph>> built = BuildSdpaGraph(s, d, {kLoadedCudnn, true}, nullptr);
    ASSERT_TRUE(built.ok()) << built.status();
    ExpectTensor(**built, {kSdpaQ, qkv_dims_, qkv_strides_, CUDNN_DATA_HALF});
    ExpectTensor(**built, {kSdpaO, qkv_dims_, out_strides_, CUDNN_DATA_HALF});
  }
}

TEST_F(SdpaGraphTest, BackwardGraphsFinalizeInEveryVariant) {
  struct Variant {
    int64_t version;
    bool accumulator;
    int64_t t;
    bool seq_len_mask;
  };
  const Variant variants[] = {
      {kLoadedCudnn, false, 17, false}, {kLoadedCudnn, true, 17, false}, {91500, true, 17, true},
      {91500, false, 128, false},       {90500, true, 17, true},         {90500, false, 256, false},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(::testing::Message() << "version " << v.version << " accumulator " << v.accumulator << " t " << v.t);
    SdpaShape s = shape_;
    s.t = v.t;
    absl::StatusOr<std::unique_ptr<SdpaGraph>> built =
        BuildSdpaGraph(s, SdpaDirection::kBackward, {v.version, v.accumulator}, nullptr);
    ASSERT_TRUE(built.ok()) << built.status();
    const SdpaGraph& g = **built;
    EXPECT_EQ(g.dq_accumulator, v.accumulator);
    EXPECT_EQ(g.seq_len_mask, v.seq_len_mask);
    const int64_t t = v.t;
    const Dims qkv_dims{2, 3, t, 64}, qkv_strides{t * 576, 64, 576, 1};
    const Dims rows{2, 3, t, 1}, rows_strides{3 * t, t, 1, 1};
    for (int64_t uid : {kSdpaQ, kSdpaDQ, kSdpaDK, kSdpaDV}) {
      ExpectTensor(g, {uid, qkv_dims, qkv_strides, CUDNN_DATA_BFLOAT16});
    }
    ExpectTensor(g, {kSdpaK, {2, 3, 64, t}, {t * 576, 64, 1, 576}, CUDNN_DATA_BFLOAT16});
    ExpectTensor(g, {kSdpaV, {2, 3, 64, t}, {t * 576, 64, 1, 576}, CUDNN_DATA_BFLOAT16});  // V^T
    for (int64_t uid : {kSdpaO, kSdpaDO}) ExpectTensor(g, {uid, qkv_dims, {t * 192, 64, 192, 1}, CUDNN_DATA_BFLOAT16});
    ExpectTensor(g, {kSdpaStats, rows, rows_strides, CUDNN_DATA_FLOAT});
    ExpectTensor(g, {kSdpaSoftmaxSum, rows, rows_strides, CUDNN_DATA_FLOAT});
    for (int64_t uid : {kSdpaScale, kSdpaNegInf, kSdpaOne}) {
      ExpectTensor(g, {uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, true});
    }
    if (v.accumulator) {
      ExpectTensor(g, {kSdpaDQAccum, qkv_dims, {3 * t * 64, t * 64, 64, 1}, CUDNN_DATA_FLOAT});
    } else {
      EXPECT_EQ(g.tensors.count(kSdpaDQAccum), 0u);
    }
    if (v.seq_len_mask) {
      for (int64_t uid : {kSdpaSeqLenQ, kSdpaSeqLenKv}) {
        ExpectTensor(g, {uid, {2, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT32});
      }
    } else {
      EXPECT_EQ(g.tensors.count(kSdpaSeqLenQ), 0u);
    }
    EXPECT_EQ(g.neg_inf < -1e38f && !std::isinf(g.neg_inf), v.version < 91000) << g.neg_inf;
    std::vector<int64_t> written = {kSdpaDQ, kSdpaDK, kSdpaDV, kSdpaSoftmaxSum};
    if (v.accumulator) written.push_back(kSdpaDQAccum);
    ExpectWellFormed(g, written,
                     {kSdpaQ, kSdpaK, kSdpaV, kSdpaO, kSdpaDO, kSdpaStats, kSdpaScale, kSdpaNegInf, kSdpaOne,
                      kSdpaSeqLenQ, kSdpaSeqLenKv});

    // softmax sum; P from Stats (with the padding mask, twice before 9.10);
    // dV; dS; dK; dQ (through the accumulator or not).
    const bool twice = v.seq_len_mask && v.version < 91000;
    ASSERT_EQ(
        Kinds(g),
        Concat({{"mul", "reduce_add", "mul", "matmul", "mul"},
                v.seq_len_mask ? kPadding : std::vector<std::string>{},
                {"sub"},
                twice ? kPadding : std::vector<std::string>{},
                kCausal,
                {"exp", "reshape", "matmul", "matmul", "sub", "mul", "mul", "reshape", "matmul", "reshape", "matmul"},
                v.accumulator ? std::vector<std::string>{"identity"} : std::vector<std::string>{}}));
    const std::vector<SdpaOpInfo>& op = g.op_info;
    const Dims q_kv = v.seq_len_mask ? Dims{kSdpaSeqLenQ, kSdpaSeqLenKv} : Dims{};  // GEMM size overrides
    const Dims kv_q = v.seq_len_mask ? Dims{kSdpaSeqLenKv, kSdpaSeqLenQ} : Dims{};
    auto with = [](Dims operands, const Dims& overrides) {
      operands.insert(operands.end(), overrides.begin(), overrides.end());
      return operands;
    };
    EXPECT_EQ(op[0].inputs, (Dims{kSdpaDO, kSdpaO}));
    EXPECT_EQ(op[2].inputs, (Dims{op[1].output, kSdpaOne}));
    EXPECT_EQ(op[2].output, kSdpaSoftmaxSum);
    EXPECT_EQ(op[3].inputs, with({kSdpaQ, kSdpaK}, q_kv));
    const size_t sub_stats = v.seq_len_mask ? 11 : 5;
    EXPECT_EQ(op[sub_stats].inputs.at(1), kSdpaStats);
    // From the end: exp, P^T, dV, dP, dP - sum, * P, * scale, dS^T, dK, K, dQ [, identity].
    auto at = [&](size_t from_end) -> const SdpaOpInfo& { return op[op.size() - (v.accumulator ? 1 : 0) - from_end]; };
    EXPECT_EQ(at(10).inputs, (Dims{at(11).output}));
    EXPECT_EQ(TypeOf(g, at(10).output), CUDNN_DATA_BFLOAT16);  // P^T enters the dV GEMM in the I/O type
    ExpectTensor(g, {at(10).output, {2, 3, t, t}, {3 * t * t, t * t, 1, t}, CUDNN_DATA_BFLOAT16, false, true});
    EXPECT_EQ(at(9).inputs, with({at(10).output, kSdpaDO}, kv_q));
    EXPECT_EQ(at(9).output, kSdpaDV);
    EXPECT_EQ(at(8).inputs, with({kSdpaDO, kSdpaV}, q_kv));
    EXPECT_EQ(at(7).inputs, (Dims{at(8).output, kSdpaSoftmaxSum}));
    EXPECT_EQ(at(6).inputs, (Dims{at(7).output, at(11).output}));
    EXPECT_EQ(at(5).inputs, (Dims{at(6).output, kSdpaScale}));
    EXPECT_EQ(at(4).inputs, (Dims{at(5).output}));
    EXPECT_EQ(at(3).inputs, with({at(4).output, kSdpaQ}, kv_q));
    EXPECT_EQ(at(3).output, kSdpaDK);
    EXPECT_EQ(at(2).inputs, (Dims{kSdpaK}));
    EXPECT_EQ(TypeOf(g, at(2).output), CUDNN_DATA_FLOAT);
    EXPECT_EQ(GetInts(g.tensors.at(at(2).output), CUDNN_ATTR_TENSOR_STRIDES), qkv_strides);  // K^T viewed as K
    EXPECT_EQ(at(1).inputs, with({at(5).output, at(2).output}, q_kv));
    EXPECT_EQ(at(1).output, v.accumulator ? kSdpaDQAccum : kSdpaDQ);
    if (v.accumulator) {
      EXPECT_EQ(op.back().inputs, (Dims{kSdpaDQAccum}));
      EXPECT_EQ(op.back().output, kSdpaDQ);
    }
  }
}

// ------------------------------------------------------------- the plan cache

// Stands in for cuDNN's heuristics: counts builds, refuses hd = 128 as "no
// engine" (UNIMPLEMENTED) and nh = 5 with an INTERNAL error.
struct FakeBuilder {
  int builds = 0;
  CudnnSdpa::PlanBuilder Fn() {
    return [this](cudnnHandle_t, const SdpaShape& s, SdpaDirection d, const SdpaDevice&,
                  const CudnnSdpa::Options&) -> absl::StatusOr<std::unique_ptr<SdpaPlan>> {
      ++builds;
      if (s.hd == 128) return absl::UnimplementedError("no engine for hd 128");
      if (s.nh == 5) return absl::InternalError("descriptor refused");
      auto plan = std::make_unique<SdpaPlan>();
      plan->workspace_bytes = static_cast<size_t>(s.b * s.t) * (d == SdpaDirection::kForward ? 1 : 2);
      return plan;
    };
  }
};

TEST(CudnnSdpaCacheTest, ReturnsTheSamePlanForTheSameKey) {
  FakeBuilder fake;
  CudnnSdpa sdpa({}, kH100, fake.Fn());
  absl::StatusOr<const SdpaPlan*> a = sdpa.Plan(nullptr, Shape(2, 64, 4, 64), SdpaDirection::kForward);
  ASSERT_TRUE(a.ok()) << a.status();
  SdpaShape rescaled = Shape(2, 64, 4, 64);
  rescaled.scale = 0.5f;  // a run-time value: same plan
  absl::StatusOr<const SdpaPlan*> b = sdpa.Plan(nullptr, rescaled, SdpaDirection::kForward);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(fake.builds, 1);
  // Direction, dtype and every dimension are part of the key.
  const SdpaPlan* backward = *sdpa.Plan(nullptr, Shape(2, 64, 4, 64), SdpaDirection::kBackward);
  const SdpaPlan* fp16 = *sdpa.Plan(nullptr, Shape(2, 64, 4, 64, DType::kF16), SdpaDirection::kForward);
  const SdpaPlan* longer = *sdpa.Plan(nullptr, Shape(2, 128, 4, 64), SdpaDirection::kForward);
  const SdpaPlan* heads = *sdpa.Plan(nullptr, Shape(2, 64, 8, 64), SdpaDirection::kForward);
  const SdpaPlan* dims = *sdpa.Plan(nullptr, Shape(2, 64, 4, 32), SdpaDirection::kForward);
  const SdpaPlan* batch = *sdpa.Plan(nullptr, Shape(3, 64, 4, 64), SdpaDirection::kForward);
  EXPECT_EQ(std::set<const SdpaPlan*>({*a, backward, fp16, longer, heads, dims, batch}).size(), 7u);
  EXPECT_EQ(fake.builds, 7);
  EXPECT_EQ(sdpa.size(), 7u);
  EXPECT_EQ(*sdpa.ForwardWorkspaceBytes(nullptr, Shape(2, 64, 4, 64)), 128u);
  EXPECT_EQ(*sdpa.BackwardWorkspaceBytes(nullptr, Shape(2, 64, 4, 64)), 256u);
  EXPECT_EQ(fake.builds, 7);
}

TEST(CudnnSdpaCacheTest, RemembersShapesWithoutAnEngine) {
  FakeBuilder fake;
  CudnnSdpa sdpa({}, kH100, fake.Fn());
  // Refused by the support rules: the builder never runs.
  absl::StatusOr<size_t> odd = sdpa.ForwardWorkspaceBytes(nullptr, Shape(2, 64, 4, 60));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(fake.builds, 0);
  // No engine: built once, then UNIMPLEMENTED at once.
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<size_t> none = sdpa.BackwardWorkspaceBytes(nullptr, Shape(2, 64, 4, 128));
    EXPECT_EQ(none.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(none.status().message()), HasSubstr("no engine for hd 128"));
  }
  EXPECT_EQ(fake.builds, 1);
  // Other failures are not remembered (they may be transient or a bug to see).
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(sdpa.ForwardWorkspaceBytes(nullptr, Shape(2, 64, 5, 64)).status().code(), absl::StatusCode::kInternal);
  }
  EXPECT_EQ(fake.builds, 3);
  EXPECT_EQ(sdpa.size(), 0u);
}

TEST(CudnnSdpaCacheTest, RefusesMisalignedPointersAndMissingWorkspaceBeforeLaunching) {
  FakeBuilder fake;
  CudnnSdpa sdpa({}, kH100, fake.Fn());
  const SdpaShape s = Shape(2, 64, 4, 64);
  void* aligned = reinterpret_cast<void*>(uintptr_t{0x10000});
  void* off = reinterpret_cast<void*>(uintptr_t{0x10008});
  float* stats = static_cast<float*>(aligned);
  absl::Status f = sdpa.Forward(nullptr, s, off, aligned, stats, aligned, nullptr);
  EXPECT_EQ(f.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(f.message()), HasSubstr("qkv at"));
  EXPECT_THAT(std::string(f.message()), HasSubstr("16-byte aligned"));
  absl::Status b = sdpa.Backward(nullptr, s, aligned, aligned, aligned, stats, off, aligned, nullptr);
  EXPECT_EQ(b.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(b.message()), HasSubstr("dqkv at"));
  // A plan that needs workspace gets some.
  absl::Status none = sdpa.Backward(nullptr, s, aligned, aligned, aligned, stats, aligned, nullptr, nullptr);
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.message()), HasSubstr("needs 256 workspace bytes"));
}

TEST(CudnnSdpaPlanTest, RealPlansNeedAHandle) {
  absl::StatusOr<std::unique_ptr<SdpaPlan>> plan =
      BuildSdpaPlan(nullptr, Shape(2, 64, 4, 64), SdpaDirection::kForward, kH100, {});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ on a device

bool HaveDevice() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

uint16_t ToBits(DType t, float f) { return t == DType::kF16 ? FloatToHalf(f) : FloatToBFloat16(f); }
float FromBits(DType t, uint16_t h) { return t == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h); }

struct Case {
  int64_t b, t, nh, hd;
  DType dtype;
};

class CudnnSdpaGpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: cuDNN attention forward/backward not run";
    ASSERT_EQ(cudnnCreate(&handle_), CUDNN_STATUS_SUCCESS);
    absl::StatusOr<SdpaDevice> device = CurrentSdpaDevice();
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
    absl::StatusOr<CudaStream> stream = CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
    sdpa_ = std::make_unique<CudnnSdpa>();
  }
  void TearDown() override {
    sdpa_.reset();  // its execution plans before the handle they were built with
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }

  // Rounded to the dtype: the reference sees exactly the device's inputs.
  static std::vector<float> Rounded(int64_t n, uint64_t seed, DType t) {
    std::vector<float> v = testing::RandomVec(n, seed);
    for (float& x : v) x = FromBits(t, ToBits(t, x));
    return v;
  }
  DeviceBuffer Upload(const std::vector<float>& v, DType t) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = ToBits(t, v[i]);
    DeviceBuffer d = *DeviceBuffer::Allocate(bits.size() * 2);
    EXPECT_TRUE(d.CopyFromHost(bits.data(), bits.size() * 2, stream_.get()).ok());
    return d;
  }
  std::vector<float> Download(const DeviceBuffer& d, DType t) {
    std::vector<uint16_t> bits(d.bytes() / 2);
    EXPECT_TRUE(d.CopyToHost(bits.data(), d.bytes(), stream_.get()).ok());
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = FromBits(t, bits[i]);
    return v;
  }
  // Device memory filled with 0xff bytes (NaN in every float format).
  DeviceBuffer Poisoned(size_t bytes) {
    DeviceBuffer d = *DeviceBuffer::Allocate(std::max<size_t>(bytes, 256));
    EXPECT_EQ(cudaMemsetAsync(d.data(), 0xff, d.bytes(), stream_.get()), cudaSuccess);
    return d;
  }

  cudnnHandle_t handle_ = nullptr;
  SdpaDevice device_;
  CudaStream stream_;
  std::unique_ptr<CudnnSdpa> sdpa_;
};

// Max-normalized tolerances: bf16 keeps 8 significant bits, fp16 11; P and dS
// are rounded to the I/O type before their GEMMs (as in every flash kernel).
TEST_P(CudnnSdpaGpuTest, MatchesTheFlashReference) {
  const Case c = GetParam();
  const SdpaShape s = Shape(c.b, c.t, c.nh, c.hd, c.dtype);
  for (SdpaDirection d : {SdpaDirection::kForward, SdpaDirection::kBackward}) {
    if (absl::Status why = SdpaSupported(s, d, device_); !why.ok()) GTEST_SKIP() << why;
  }
  const int64_t ch = c.nh * c.hd;
  const std::vector<float> qkv = Rounded(c.b * c.t * 3 * ch, 11 + c.t, c.dtype);
  const std::vector<float> dout = Rounded(c.b * c.t * ch, 12 + c.t, c.dtype);
  const ref::FlashForwardResult want = ref::FlashAttentionForward(c.b, c.t, ch, c.nh, qkv);
  const std::vector<float> want_dqkv = ref::FlashAttentionBackward(c.b, c.t, ch, c.nh, qkv, want.out, want.lse, dout);

  absl::StatusOr<size_t> fwd_ws = sdpa_->ForwardWorkspaceBytes(handle_, s);
  ASSERT_TRUE(fwd_ws.ok()) << fwd_ws.status();
  absl::StatusOr<size_t> bwd_ws = sdpa_->BackwardWorkspaceBytes(handle_, s);
  ASSERT_TRUE(bwd_ws.ok()) << bwd_ws.status();
  const SdpaPlan* bwd_plan = *sdpa_->Plan(handle_, s, SdpaDirection::kBackward);
  std::printf(
      "cuDNN %ld sm_%d b=%ld t=%ld nh=%ld hd=%ld %s: forward workspace %zu, backward engine %ld (%s, %s) "
      "workspace %zu\n",
      static_cast<long>(device_.cudnn_version), device_.sm, static_cast<long>(c.b), static_cast<long>(c.t),
      static_cast<long>(c.nh), static_cast<long>(c.hd), DTypeName(c.dtype), *fwd_ws,
      static_cast<long>(bwd_plan->engine), bwd_plan->deterministic ? "deterministic" : "nondeterministic",
      bwd_plan->graph->dq_accumulator ? "dQ accumulator" : "dP workspace", *bwd_ws);

  DeviceBuffer qkv_d = Upload(qkv, c.dtype), dout_d = Upload(dout, c.dtype);
  DeviceBuffer out_d = Poisoned(c.b * c.t * ch * 2), stats_d = Poisoned(c.b * c.nh * c.t * 4);
  DeviceBuffer dqkv_d = Poisoned(c.b * c.t * 3 * ch * 2), ws = Poisoned(std::max(*fwd_ws, *bwd_ws));
  float* stats = static_cast<float*>(stats_d.data());
  absl::Status fwd = sdpa_->Forward(handle_, s, qkv_d.data(), out_d.data(), stats, ws.data(), stream_.get());
  ASSERT_TRUE(fwd.ok()) << fwd;
  ASSERT_TRUE(stream_.Synchronize().ok());
  // No zeroed workspace to rely on (cuDNN >= 9.6 zeroes its dQ accumulator itself).
  ASSERT_EQ(cudaMemsetAsync(ws.data(), 0xff, ws.bytes(), stream_.get()), cudaSuccess);
  absl::Status bwd = sdpa_->Backward(handle_, s, qkv_d.data(), out_d.data(), dout_d.data(), stats, dqkv_d.data(),
                                     ws.data(), stream_.get());
  ASSERT_TRUE(bwd.ok()) << bwd;
  ASSERT_TRUE(stream_.Synchronize().ok());

  std::vector<float> got_stats(c.b * c.nh * c.t);
  ASSERT_TRUE(stats_d.CopyToHost(got_stats.data(), got_stats.size() * 4, stream_.get()).ok());
  const bool bf16 = c.dtype == DType::kBF16;
  std::vector<float> got_out = Download(out_d, c.dtype);
  got_out.resize(want.out.size());
  std::vector<float> got_dqkv = Download(dqkv_d, c.dtype);
  got_dqkv.resize(want_dqkv.size());
  EXPECT_LE(testing::MaxRelDiff(got_out, want.out), bf16 ? 2e-2 : 5e-3) << "out";
  EXPECT_LE(testing::MaxAbsDiff(got_stats, want.lse), 5e-3) << "stats (logsumexp)";
  EXPECT_LE(testing::MaxRelDiff(got_dqkv, want_dqkv), bf16 ? 4e-2 : 1e-2) << "dqkv";
}

TEST_P(CudnnSdpaGpuTest, BackwardIsDeterministicWhenThePlanSaysSo) {
  const Case c = GetParam();
  const SdpaShape s = Shape(c.b, c.t, c.nh, c.hd, c.dtype);
  if (absl::Status why = SdpaSupported(s, SdpaDirection::kBackward, device_); !why.ok()) GTEST_SKIP() << why;
  const int64_t ch = c.nh * c.hd;
  DeviceBuffer qkv_d = Upload(Rounded(c.b * c.t * 3 * ch, 21, c.dtype), c.dtype);
  DeviceBuffer dout_d = Upload(Rounded(c.b * c.t * ch, 22, c.dtype), c.dtype);
  absl::StatusOr<size_t> fwd_ws = sdpa_->ForwardWorkspaceBytes(handle_, s);
  ASSERT_TRUE(fwd_ws.ok()) << fwd_ws.status();
  absl::StatusOr<size_t> bwd_ws = sdpa_->BackwardWorkspaceBytes(handle_, s);
  ASSERT_TRUE(bwd_ws.ok()) << bwd_ws.status();
  const size_t ws_bytes = std::max(*fwd_ws, *bwd_ws);
  DeviceBuffer out_d = Poisoned(c.b * c.t * ch * 2), stats_d = Poisoned(c.b * c.nh * c.t * 4), ws = Poisoned(ws_bytes);
  float* stats = static_cast<float*>(stats_d.data());
  absl::Status fwd = sdpa_->Forward(handle_, s, qkv_d.data(), out_d.data(), stats, ws.data(), stream_.get());
  ASSERT_TRUE(fwd.ok()) << fwd;
  std::vector<float> runs[2];
  for (std::vector<float>& r : runs) {
    DeviceBuffer dqkv_d = Poisoned(c.b * c.t * 3 * ch * 2);
    absl::Status bwd = sdpa_->Backward(handle_, s, qkv_d.data(), out_d.data(), dout_d.data(), stats, dqkv_d.data(),
                                       ws.data(), stream_.get());
    ASSERT_TRUE(bwd.ok()) << bwd;
    ASSERT_TRUE(stream_.Synchronize().ok());
    r = Download(dqkv_d, c.dtype);
  }
  if (!(*sdpa_->Plan(handle_, s, SdpaDirection::kBackward))->deterministic) {
    GTEST_SKIP() << "cuDNN chose a nondeterministic backward engine here";
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
}

// GPT-2's head size and T = 1024; t = 200 (not a multiple of 128: the padding
// workaround before 9.16); hd = 128.
INSTANTIATE_TEST_SUITE_P(Shapes, CudnnSdpaGpuTest,
                         ::testing::Values(Case{2, 128, 4, 64, DType::kBF16}, Case{2, 128, 4, 64, DType::kF16},
                                           Case{2, 1024, 4, 64, DType::kBF16}, Case{2, 1024, 4, 64, DType::kF16},
                                           Case{2, 200, 3, 64, DType::kBF16}, Case{1, 256, 2, 128, DType::kF16}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return absl::StrFormat("b%dt%dnh%dhd%d_%s", c.b, c.t, c.nh, c.hd, DTypeName(c.dtype));
                         });

}  // namespace
}  // namespace ringmaster::engine
