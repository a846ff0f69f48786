// CudaBackend against CpuBackend: memory, elementwise ops, GEMMs (activations
// and parameter gradients), the allocator on the device, error reporting, and
// the dtype CHECKs of the mixed-precision contract. Tolerances:
// cuda_backend_test_util.h.

#include <csignal>
#include <limits>

#include "engine/core/reference_ops.h"
#include "engine/cuda/cuda_backend_test_util.h"

namespace ringmaster::engine::testing {
namespace {

TEST(CudaBackendCreateTest, NoDeviceOrBadOrdinalIsFailedPrecondition) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  CudaBackendConfig config;
  config.device = devices;  // one past the last (device 0 when there is none)
  auto backend = CudaBackend::Create(config);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
}

TEST(CudaBackendCreateTest, I32ComputeDtypeIsInvalidArgument) {
  CudaBackendConfig config;
  config.compute_dtype = DType::kI32;
  EXPECT_EQ(CudaBackend::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(CudaBackendTest, CopiesRoundTripAndZerosAreZero) {
  Tensor x = RandomTensor({3, 257}, 1);
  Tensor d = Up(x);
  Tensor e = Poisoned({3, 257});
  gpu_->Copy(d, e);
  EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(e), x));
  EXPECT_EQ(Down(gpu_->Zeros({1000})), std::vector<float>(1000, 0.0f));
  // Activations: values of the compute dtype survive the activation dtype exactly.
  Tensor r = Rand({3, 257}, 2);
  Tensor ra = UpAct(r);
  EXPECT_EQ(ra.dtype(), act());
  Tensor rb = PoisonedAct({3, 257});
  gpu_->Copy(ra, rb);
  EXPECT_EQ(Down(rb), r.ToVector());
  EXPECT_EQ(Down(gpu_->Zeros({1000}, act())), std::vector<float>(1000, 0.0f));
}

TEST_P(CudaBackendTest, ExactUtilitiesMatchTheCpu) {
  Tensor x = RandomTensor({4099}, 2), y = RandomTensor({4099}, 3);
  Tensor dx = Up(x), dy = Up(y);
  gpu_->Scale(dx, 0.37f);
  cpu_->Scale(x, 0.37f);
  gpu_->Axpy(-1.5f, dx, dy);
  cpu_->Axpy(-1.5f, x, y);
  ExpectClose("Scale", dx, x, 1e-7);
  ExpectClose("Axpy", dy, y, 1e-7);
  gpu_->Fill(dx, 2.5f);
  EXPECT_EQ(Down(dx), std::vector<float>(4099, 2.5f));
}

TEST_P(CudaBackendTest, AddRoundsLikeTheCpu) {
  Tensor a = Rand({5000}, 4), b = Rand({5000}, 5);
  Tensor out = PoisonedAct({5000});
  gpu_->Add(UpAct(a), UpAct(b), out);
  cpu_->Add(a, b, a);  // out may alias a
  ExpectClose("Add", out, a);
  // One fp32 addition of the same values, rounded once to nearest even: the same values.
  EXPECT_EQ(Down(out), a.ToVector()) << GetParam().name;
}

TEST_P(CudaBackendTest, ConvertAndRoundAreBitwiseTheCpus) {
  Tensor x = RandomTensor({3000}, 6, -70000.0f, 70000.0f);  // past fp16's range: inf
  for (DType t : {DType::kF16, DType::kBF16}) {
    Tensor half_host = Tensor::Empty({3000}, t);
    cpu_->Convert(x, half_host);
    Tensor half_dev = gpu_->Empty({3000}, t);
    gpu_->Convert(Up(x), half_dev);
    EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(half_dev), half_host)) << DTypeName(t);
    Tensor back = Poisoned({3000});
    gpu_->Convert(half_dev, back);
    Tensor back_host = Tensor::Empty({3000});
    cpu_->Convert(half_host, back_host);
    EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(back), back_host)) << DTypeName(t);
    Tensor r = Up(x);
    gpu_->RoundInPlace(r, t);
    Tensor rh = Clone(x);
    cpu_->RoundInPlace(rh, t);
    EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(r), rh)) << DTypeName(t);
  }
}

TEST_P(CudaBackendTest, NonFiniteCheckSetsTheFlagOnlyForInfOrNan) {
  Tensor flag = gpu_->Zeros({1});
  Tensor fine = Up(RandomTensor({10000}, 7));
  gpu_->NonFiniteCheck({fine, fine}, flag);
  EXPECT_EQ(Down(flag)[0], 0.0f);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> v = RandomVec(10000, 8);
    v[9999] = bad;
    gpu_->Fill(flag, 0.0f);
    gpu_->NonFiniteCheck({fine, Up(Tensor::FromVector({10000}, v))}, flag);
    EXPECT_EQ(Down(flag)[0], 1.0f) << bad;
    gpu_->NonFiniteCheck({fine}, flag);  // a clean check leaves the flag set (calls OR together)
    EXPECT_EQ(Down(flag)[0], 1.0f);
  }
}

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
};

TEST_P(CudaBackendTest, GemmAllTransposesBiasAlphaAndAccumulate) {
  const GemmCase cases[] = {{false, false, 64, 96, 48}, {true, false, 33, 17, 65}, {false, true, 128, 50, 256},
                            {true, true, 7, 300, 19},   {false, true, 1, 513, 77}};
  uint64_t seed = 10;
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "ta " << c.ta << " tb " << c.tb << " m " << c.m << " n " << c.n << " k "
                                      << c.k);
    Tensor a = Rand(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, ++seed);
    Tensor b = Rand(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, ++seed);
    Tensor bias = Rand({c.n}, ++seed);
    Tensor da = UpAct(a), db = UpOperand(b);
    // beta = 0 with bias (its operand copy): an activation, overwritten (poisoned before).
    Tensor out = PoisonedAct({c.m, c.n});
    Tensor want = Tensor::Empty({c.m, c.n});
    Tensor dbias = UpOperand(bias);
    gpu_->Gemm(c.ta, c.tb, 0.75f, da, db, 0.0f, out, &dbias);
    cpu_->Gemm(c.ta, c.tb, 0.75f, a, b, 0.0f, want, &bias);
    ExpectClose("Gemm", out, want);
    // beta = 1 into an activation: the sum stored in the activation dtype.
    Tensor acc_act_host = Rand({c.m, c.n}, ++seed);
    Tensor acc_act = UpAct(acc_act_host);
    gpu_->Gemm(c.ta, c.tb, 1.0f, da, db, 1.0f, acc_act);
    cpu_->Gemm(c.ta, c.tb, 1.0f, a, b, 1.0f, acc_act_host);
    ExpectClose("Gemm += (activation)", acc_act, acc_act_host);
    // beta = 1 into f32: "+=" (a parameter gradient).
    Tensor acc_host = Rand({c.m, c.n}, ++seed);
    Tensor acc = Up(acc_host);
    gpu_->Gemm(c.ta, c.tb, 1.0f, da, db, 1.0f, acc);
    cpu_->Gemm(c.ta, c.tb, 1.0f, a, b, 1.0f, acc_host);
    EXPECT_EQ(acc.dtype(), DType::kF32);
    ExpectClose("Gemm += (f32)", acc, acc_host);
  }
}

// The weight gradient of a linear layer, dW[out, in] += dy[M, out]^T x[M, in],
// and the other products a backward runs into f32 (16-bit operands in 16-bit
// modes). The GPU adds the fp32 product unrounded: within fp32 accumulation
// error of the exact result (see ExactAccumulationTol), where the CPU's
// contribution, rounded to 16 bits first, is up to 2^-8 (bf16) off.
TEST_P(CudaBackendTest, GemmAccumulatesAnF32ParameterGradientUnrounded) {
  const GemmCase cases[] = {{true, false, 96, 80, 256}, {true, false, 33, 17, 65}, {false, true, 40, 64, 128},
                            {false, false, 5, 200, 31}};
  uint64_t seed = 60;
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "ta " << c.ta << " tb " << c.tb << " m " << c.m << " n " << c.n << " k "
                                      << c.k);
    Tensor a = Rand(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, ++seed);
    Tensor b = Rand(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, ++seed);
    Tensor grad_host = RandomTensor({c.m, c.n}, ++seed, -0.5f, 0.5f);  // f32: not rounded
    const std::vector<float> exact =
        ref::Gemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, a.ToVector(), b.ToVector(), 1.0f, grad_host.ToVector(), {});
    Tensor grad = Up(grad_host);
    gpu_->Gemm(c.ta, c.tb, 1.0f, UpAct(a), UpAct(b), 1.0f, grad);
    cpu_->Gemm(c.ta, c.tb, 1.0f, a, b, 1.0f, grad_host);
    const std::vector<float> got = Down(grad);
    ExpectClose("Gemm dW += (CPU twin)", got, grad_host.ToVector(), tol());
    ExpectClose("Gemm dW += (exact)", got, exact, ExactAccumulationTol(/*gemm=*/true));
  }
}

TEST_P(CudaBackendTest, GemmOnViewsWithOddOffsets) {
  // Rows 1.. of a tensor: the pointer is 4-byte (f32) or 2-byte (16-bit) aligned only; the plan must cope.
  Tensor big = Rand({65, 31}, 20);
  Tensor b = Rand({31, 24}, 21);
  Tensor dbig = UpAct(big);
  Tensor out = PoisonedAct({64, 24});
  Tensor want = Tensor::Empty({64, 24});
  gpu_->Gemm(false, false, 1.0f, dbig.Rows(1, 65), UpOperand(b), 0.0f, out);
  cpu_->Gemm(false, false, 1.0f, big.Rows(1, 65), b, 0.0f, want);
  ExpectClose("Gemm on a view", out, want);
}

TEST_P(CudaBackendTest, GemmBatchedMatchesTheCpu) {
  for (auto [ta, tb] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    const int64_t batch = 6, m = 20, n = 33, k = 40;
    Tensor a = Rand(ta ? Shape{batch, k, m} : Shape{batch, m, k}, 30);
    Tensor b = Rand(tb ? Shape{batch, n, k} : Shape{batch, k, n}, 31);
    Tensor da = UpAct(a), db = UpAct(b);
    for (bool f32_out : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta " << ta << " tb " << tb << (f32_out ? " f32 c" : " activation c"));
      Tensor c_host = Rand({batch, m, n}, 32);
      Tensor c = f32_out ? Up(c_host) : UpAct(c_host);
      gpu_->GemmBatched(ta, tb, 0.5f, da, db, 1.0f, c);
      cpu_->GemmBatched(ta, tb, 0.5f, a, b, 1.0f, c_host);
      ExpectClose("GemmBatched +=", c, c_host);
    }
  }
}

TEST_P(CudaBackendTest, BiasGradAccumulates) {
  const int64_t m = 1000, n = 77;
  Tensor dy = Rand({m, n}, 40);
  Tensor db_host = Rand({n}, 41);
  std::vector<double> exact(db_host.f32(), db_host.f32() + n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) exact[j] += dy.f32()[i * n + j];
  Tensor db = Up(db_host);
  gpu_->BiasGrad(UpAct(dy), db);
  cpu_->BiasGrad(dy, db_host);
  ExpectClose("BiasGrad", db, db_host, std::max(tol(), 1e-5));
  // fp32 column sums, added unrounded.
  ExpectClose("BiasGrad (exact)", Down(db), std::vector<float>(exact.begin(), exact.end()),
              ExactAccumulationTol(/*gemm=*/false));
}

TEST_P(CudaBackendTest, DeviceAllocatorReusesFreedBlocks) {
  const int64_t mallocs_before = gpu_->allocator().stats().raw_mallocs;
  void* first = nullptr;
  {
    Tensor t = gpu_->Empty({1 << 20});  // 4 MiB: a large block of its own
    first = t.raw();
  }
  Tensor again = gpu_->Empty({1 << 20});
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(gpu_->allocator().stats().raw_mallocs, mallocs_before + 1);
  EXPECT_GE(gpu_->allocator().stats().peak_allocated_bytes, size_t{4} << 20);
  gpu_->Fill(again, 1.0f);  // the reused memory works
  EXPECT_EQ(Down(again)[12345], 1.0f);
}

TEST_P(CudaBackendTest, AFailureIsKeptUntilSynchronizeAndLaterOpsAreSkipped) {
  Tensor x = Up(RandomTensor({100}, 50));
  Tensor huge = gpu_->Empty({int64_t{1} << 50});  // 4 PiB: no device has it
  gpu_->Fill(x, 3.0f);                            // skipped: an op failed before
  absl::Status status = gpu_->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(gpu_->Synchronize().ok()) << "the error is cleared once reported";
  EXPECT_NE(Down(x)[0], 3.0f);
  gpu_->Fill(x, 3.0f);
  EXPECT_EQ(Down(x)[0], 3.0f);
}

// A wrong dtype is a caller bug (backend.h): an activation not in
// activation_dtype(), a weight passed as its f32 value where its operand copy
// belongs (16-bit modes; a 16-bit one in fp32 modes), a 16-bit parameter
// gradient. Each CHECKs and aborts before anything is enqueued.
TEST_P(CudaBackendTest, ArgumentsInTheWrongDtypeAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes: no CUDA state crosses a fork
  const DType wrong_act = act() == DType::kF32 ? DType::kBF16 : DType::kF32;
  const DType sixteen = act() == DType::kF32 ? DType::kBF16 : act();
  Tensor x = UpAct(Rand({8, 16}, 70)), w = UpOperand(Rand({16, 8}, 71));
  Tensor x_wrong = gpu_->Zeros({8, 16}, wrong_act), w_wrong = gpu_->Zeros({16, 8}, wrong_act);
  Tensor y = PoisonedAct({8, 16}), z = PoisonedAct({8, 8});
  Tensor dbias_wrong = gpu_->Zeros({16}, sixteen);
  EXPECT_EXIT(gpu_->Add(x_wrong, x, y), ::testing::KilledBySignal(SIGABRT), "") << "activation";
  EXPECT_EXIT(gpu_->Gemm(false, false, 1.0f, x, w_wrong, 0.0f, z), ::testing::KilledBySignal(SIGABRT), "")
      << "weight operand";
  EXPECT_EXIT(gpu_->BiasGrad(x, dbias_wrong), ::testing::KilledBySignal(SIGABRT), "") << "parameter gradient";
  // The same calls with the right dtypes run.
  gpu_->Add(x, x, y);
  gpu_->Gemm(false, false, 1.0f, x, w, 0.0f, z);
  Tensor dbias = gpu_->Zeros({16});
  gpu_->BiasGrad(x, dbias);
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaBackendTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace ringmaster::engine::testing
