// CudaBackend layer ops against CpuBackend: activations, dropout, convolution,
// pooling, batch/layer norm, embedding, softmax cross-entropy (attention:
// cuda_attention_test.cc).
// Tolerances: cuda_backend_test_util.h.

#include <algorithm>

#include "engine/cuda/cuda_backend_test_util.h"

namespace ringmaster::engine::testing {
namespace {

TEST_P(CudaBackendTest, ReluAndGeluForwardAndBackward) {
  Tensor x = Rand({3, 1001}, 1, -3.0f, 3.0f), dy = Rand({3, 1001}, 2);
  Tensor dx_dev = Up(x), ddy = Up(dy);
  for (bool gelu : {false, true}) {
    Tensor y = Poisoned(x.shape()), dx = Poisoned(x.shape());
    Tensor yh = Tensor::Empty(x.shape()), dxh = Tensor::Empty(x.shape());
    if (gelu) {
      gpu_->GeluForward(dx_dev, y);
      gpu_->GeluBackward(dx_dev, ddy, dx);
      cpu_->GeluForward(x, yh);
      cpu_->GeluBackward(x, dy, dxh);
    } else {
      gpu_->ReluForward(dx_dev, y);
      gpu_->ReluBackward(y, ddy, dx);
      cpu_->ReluForward(x, yh);
      cpu_->ReluBackward(yh, dy, dxh);
    }
    ExpectClose(gelu ? "Gelu y" : "Relu y", y, yh);
    ExpectClose(gelu ? "Gelu dx" : "Relu dx", dx, dxh);
  }
}

TEST_P(CudaBackendTest, DropoutMaskIsBitwiseTheCpus) {
  Tensor x = Rand({7, 999}, 3), dy = Rand({7, 999}, 4);
  Tensor mask = Poisoned(x.shape()), y = Poisoned(x.shape()), dx = Poisoned(x.shape());
  Tensor mh = Tensor::Empty(x.shape()), yh = Tensor::Empty(x.shape()), dxh = Tensor::Empty(x.shape());
  gpu_->DropoutForward(Up(x), 0.3f, 0xfeedbeefull, mask, y);
  cpu_->DropoutForward(x, 0.3f, 0xfeedbeefull, mh, yh);
  EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(mask), mh));
  ExpectClose("Dropout y", y, yh);
  gpu_->DropoutBackward(Up(dy), mask, dx);
  cpu_->DropoutBackward(dy, mh, dxh);
  ExpectClose("Dropout dx", dx, dxh);
}

Conv2dGeometry Geo(int64_t k, int64_t s, int64_t p) {
  Conv2dGeometry g;
  g.kernel_h = g.kernel_w = k;
  g.stride_h = g.stride_w = s;
  g.pad_h = g.pad_w = p;
  return g;
}

TEST_P(CudaBackendTest, Conv2dForwardAndBackward) {
  struct Case {
    int64_t n, c, h, w, o;
    Conv2dGeometry g;
    bool bias;
  };
  const Case cases[] = {{4, 3, 12, 11, 8, Geo(3, 1, 1), true}, {2, 5, 9, 9, 6, Geo(3, 2, 0), false},
                        {3, 1, 8, 8, 4, Geo(5, 1, 2), true}, {2, 16, 7, 7, 32, Geo(1, 1, 0), true}};
  uint64_t seed = 10;
  for (const Case& c : cases) {
    const int64_t oh = Conv2dGeometry::OutSize(c.h, c.g.kernel_h, c.g.stride_h, c.g.pad_h);
    const int64_t ow = Conv2dGeometry::OutSize(c.w, c.g.kernel_w, c.g.stride_w, c.g.pad_w);
    Tensor x = Rand({c.n, c.c, c.h, c.w}, ++seed), w = Rand({c.o, c.c, c.g.kernel_h, c.g.kernel_w}, ++seed);
    Tensor b = Rand({c.o}, ++seed), dy = Rand({c.n, c.o, oh, ow}, ++seed);
    Tensor dx_, dw_, db_;
    Tensor y = Poisoned({c.n, c.o, oh, ow}), yh = Tensor::Empty({c.n, c.o, oh, ow});
    Tensor db_dev = Up(b);
    gpu_->Conv2dForward(Up(x), Up(w), c.bias ? &db_dev : nullptr, c.g, y);
    cpu_->Conv2dForward(x, w, c.bias ? &b : nullptr, c.g, yh);
    ExpectClose("Conv2d y", y, yh);
    // dx overwritten (poisoned); dw and dbias accumulate onto random values.
    Tensor dx = Poisoned(x.shape()), dxh = Tensor::Empty(x.shape());
    Tensor dwh = Rand(w.shape(), ++seed), dbh = Rand(b.shape(), ++seed);
    Tensor dw = Up(dwh), dbias = Up(dbh);
    gpu_->Conv2dBackward(Up(x), Up(w), Up(dy), c.g, &dx, dw, c.bias ? &dbias : nullptr);
    cpu_->Conv2dBackward(x, w, dy, c.g, &dxh, dwh, c.bias ? &dbh : nullptr);
    ExpectClose("Conv2d dx", dx, dxh);
    ExpectClose("Conv2d dw +=", dw, dwh);
    ExpectClose("Conv2d dbias +=", dbias, dbh);
  }
}

TEST_P(CudaBackendTest, Conv2dBackwardWithoutDx) {
  Tensor x = Rand({2, 3, 8, 8}, 30), w = Rand({4, 3, 3, 3}, 31), dy = Rand({2, 4, 8, 8}, 32);
  Tensor dwh = Tensor::Zeros(w.shape());
  Tensor dw = gpu_->Zeros(w.shape());
  gpu_->Conv2dBackward(Up(x), Up(w), Up(dy), Geo(3, 1, 1), nullptr, dw, nullptr);
  cpu_->Conv2dBackward(x, w, dy, Geo(3, 1, 1), nullptr, dwh, nullptr);
  ExpectClose("Conv2d dw (no dx)", dw, dwh);
}

TEST_P(CudaBackendTest, MaxPoolRoutesToTheFirstMaximumWithTies) {
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 1}}) {
    // ReLU'd values: many windows are all zero, so ties are common.
    Tensor pre = Rand({3, 4, 11, 10}, 40);
    Tensor x = Tensor::Empty(pre.shape());
    cpu_->ReluForward(pre, x);
    const int64_t oh = (11 - k) / s + 1, ow = (10 - k) / s + 1;
    Tensor dy = Rand({3, 4, oh, ow}, 41);
    Tensor y = Poisoned({3, 4, oh, ow}), yh = Tensor::Empty({3, 4, oh, ow});
    Tensor dx = Poisoned(x.shape()), dxh = Tensor::Empty(x.shape());
    Tensor dx_in = Up(x);
    gpu_->MaxPool2dForward(dx_in, k, s, y);
    cpu_->MaxPool2dForward(x, k, s, yh);
    gpu_->MaxPool2dBackward(dx_in, Up(dy), k, s, dx);
    cpu_->MaxPool2dBackward(x, dy, k, s, dxh);
    EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(y), yh)) << "k " << k << " s " << s;
    ExpectClose("MaxPool dx", dx, dxh, 1e-6);
  }
}

TEST_P(CudaBackendTest, BatchNormTrainEvalAndBackward) {
  const Shape shape{6, 5, 7, 9};
  Tensor x = Rand(shape, 50, -2.0f, 3.0f), gamma = Rand({5}, 51), beta = Rand({5}, 52);
  Tensor rm_h = Rand({5}, 53), rv_h = Rand({5}, 54, 0.5f, 2.0f);
  Tensor rm = Up(rm_h), rv = Up(rv_h);
  Tensor y = Poisoned(shape), sm = Poisoned({5}), si = Poisoned({5});
  Tensor yh = Tensor::Empty(shape), smh = Tensor::Empty({5}), sih = Tensor::Empty({5});
  Tensor dx_in = Up(x), dgamma_in = Up(gamma), dbeta_in = Up(beta);
  gpu_->BatchNorm2dForwardTrain(dx_in, dgamma_in, dbeta_in, 0.1f, 1e-5f, rm, rv, y, sm, si);
  cpu_->BatchNorm2dForwardTrain(x, gamma, beta, 0.1f, 1e-5f, rm_h, rv_h, yh, smh, sih);
  ExpectClose("BN y", y, yh);
  ExpectClose("BN save_mean", sm, smh, 1e-5);
  ExpectClose("BN save_invstd", si, sih, 1e-5);
  ExpectClose("BN running_mean (PyTorch momentum)", rm, rm_h, 1e-5);
  ExpectClose("BN running_var (unbiased)", rv, rv_h, 1e-5);

  Tensor ye = Poisoned(shape), yeh = Tensor::Empty(shape);
  gpu_->BatchNorm2dForwardEval(dx_in, dgamma_in, dbeta_in, rm, rv, 1e-5f, ye);
  cpu_->BatchNorm2dForwardEval(x, gamma, beta, rm_h, rv_h, 1e-5f, yeh);
  ExpectClose("BN eval y", ye, yeh);

  Tensor dy = Rand(shape, 55);
  Tensor dx = Poisoned(shape), dxh = Tensor::Empty(shape);
  Tensor dgh = Rand({5}, 56), dbh = Rand({5}, 57);
  Tensor dg = Up(dgh), db = Up(dbh);
  gpu_->BatchNorm2dBackward(dx_in, Up(dy), dgamma_in, sm, si, dx, dg, db);
  cpu_->BatchNorm2dBackward(x, dy, gamma, smh, sih, dxh, dgh, dbh);
  ExpectClose("BN dx", dx, dxh);
  ExpectClose("BN dgamma +=", dg, dgh, std::max(tol(), 1e-4));
  ExpectClose("BN dbeta +=", db, dbh, std::max(tol(), 1e-5));
}

TEST_P(CudaBackendTest, LayerNormForwardAndBackward) {
  for (int64_t c : {64, 768, 1000}) {
    const int64_t rows = 37;
    Tensor x = Rand({rows, c}, 60, -2.0f, 2.0f), gamma = Rand({c}, 61), beta = Rand({c}, 62);
    Tensor y = Poisoned({rows, c}), mean = Poisoned({rows}), rstd = Poisoned({rows});
    Tensor yh = Tensor::Empty({rows, c}), mh = Tensor::Empty({rows}), rh = Tensor::Empty({rows});
    Tensor dx_in = Up(x), dgamma_in = Up(gamma);
    gpu_->LayerNormForward(dx_in, dgamma_in, Up(beta), 1e-5f, y, mean, rstd);
    cpu_->LayerNormForward(x, gamma, beta, 1e-5f, yh, mh, rh);
    ExpectClose("LN y", y, yh);
    ExpectClose("LN mean", mean, mh, 1e-5);
    ExpectClose("LN rstd", rstd, rh, 1e-5);
    Tensor dy = Rand({rows, c}, 63);
    Tensor dx = Poisoned({rows, c}), dxh = Tensor::Empty({rows, c});
    Tensor dgh = Rand({c}, 64), dbh = Rand({c}, 65);
    Tensor dg = Up(dgh), db = Up(dbh);
    gpu_->LayerNormBackward(dx_in, Up(dy), dgamma_in, mean, rstd, dx, dg, db);
    cpu_->LayerNormBackward(x, dy, gamma, mh, rh, dxh, dgh, dbh);
    ExpectClose("LN dx", dx, dxh);
    ExpectClose("LN dgamma +=", dg, dgh, std::max(tol(), 1e-5));
    ExpectClose("LN dbeta +=", db, dbh, std::max(tol(), 1e-5));
  }
}

TEST_P(CudaBackendTest, EmbeddingForwardAndBackward) {
  const int64_t b = 4, t = 33, v = 101, c = 48;
  std::vector<int32_t> ids(b * t);
  Rng rng(70);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.Next() % 7);  // few ids: many repeats
  ids[5] = v - 1;
  Tensor tokens = Tensor::FromInts({b, t}, ids);
  Tensor wte = Rand({v, c}, 71), wpe = Rand({t + 3, c}, 72);
  Tensor out = Poisoned({b, t, c}), outh = Tensor::Empty({b, t, c});
  Tensor dtokens = Up(tokens);
  gpu_->EmbeddingForward(dtokens, Up(wte), Up(wpe), out);
  cpu_->EmbeddingForward(tokens, wte, wpe, outh);
  ExpectClose("Embedding out", out, outh);
  Tensor dout = Rand({b, t, c}, 73);
  Tensor dwteh = Rand({v, c}, 74), dwpeh = Rand({t + 3, c}, 75);
  Tensor dwte = Up(dwteh), dwpe = Up(dwpeh);
  gpu_->EmbeddingBackward(dtokens, Up(dout), dwte, dwpe);
  cpu_->EmbeddingBackward(tokens, dout, dwteh, dwpeh);
  ExpectClose("Embedding dwte +=", dwte, dwteh, std::max(tol(), 1e-6));
  ExpectClose("Embedding dwpe +=", dwpe, dwpeh, std::max(tol(), 1e-6));
}

TEST_P(CudaBackendTest, SoftmaxCrossEntropyWithIgnoredRowsAndGradScale) {
  for (int64_t v : {10, 1000, 50257}) {
    const int64_t m = 9;
    Tensor logits = Rand({m, v}, 90, -4.0f, 4.0f);
    std::vector<int32_t> t(m);
    for (int64_t i = 0; i < m; ++i) t[i] = static_cast<int32_t>((i * 7919) % v);
    t[2] = -100;
    t[7] = -100;
    Tensor targets = Tensor::FromInts({m}, t);
    Tensor loss = Poisoned({1}), dl = Poisoned({m, v});
    Tensor lossh = Tensor::Empty({1}), dlh = Tensor::Empty({m, v});
    gpu_->SoftmaxCrossEntropy(Up(logits), Up(targets), -100, 1024.0f, loss, dl);
    cpu_->SoftmaxCrossEntropy(logits, targets, -100, 1024.0f, lossh, dlh);
    ExpectClose("xent loss", loss, lossh, 1e-5);
    ExpectClose("xent dlogits", dl, dlh);
  }
  // Every row ignored: loss 0 and zero gradients.
  Tensor logits = Rand({3, 50}, 91);
  Tensor targets = Tensor::FromInts({3}, {-1, -1, -1});
  Tensor loss = Poisoned({1}), dl = Poisoned({3, 50});
  gpu_->SoftmaxCrossEntropy(Up(logits), Up(targets), -1, 1.0f, loss, dl);
  EXPECT_EQ(Down(loss)[0], 0.0f);
  EXPECT_EQ(Down(dl), std::vector<float>(150, 0.0f));
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaBackendTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace ringmaster::engine::testing
