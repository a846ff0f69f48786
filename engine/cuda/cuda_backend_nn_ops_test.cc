// CudaBackend layer ops against CpuBackend: activations, dropout, convolution,
// pooling, batch/layer norm, embedding, and the loss: CountTargets and the
// softmax cross-entropy, whole and chunk by chunk over a padded vocabulary, in
// place and loss-only (attention: cuda_attention_test.cc). Activations in the
// activation dtype, weights as their operand copies.
// Tolerances: cuda_backend_test_util.h.

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "engine/cuda/cuda_backend_test_util.h"

namespace ringmaster::engine::testing {
namespace {

TEST_P(CudaBackendTest, ReluAndGeluForwardAndBackward) {
  Tensor x = Rand({3, 1001}, 1, -3.0f, 3.0f), dy = Rand({3, 1001}, 2);
  Tensor dx_dev = UpAct(x), ddy = UpAct(dy);
  for (bool gelu : {false, true}) {
    Tensor y = PoisonedAct(x.shape()), dx = PoisonedAct(x.shape());
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
  Tensor mask = Poisoned(x.shape()), y = PoisonedAct(x.shape()), dx = PoisonedAct(x.shape());
  Tensor mh = Tensor::Empty(x.shape()), yh = Tensor::Empty(x.shape()), dxh = Tensor::Empty(x.shape());
  gpu_->DropoutForward(UpAct(x), 0.3f, 0xfeedbeefull, mask, y);
  cpu_->DropoutForward(x, 0.3f, 0xfeedbeefull, mh, yh);
  EXPECT_TRUE(BitwiseEqual(gpu_->ToHost(mask), mh));
  ExpectClose("Dropout y", y, yh);
  gpu_->DropoutBackward(UpAct(dy), mask, dx);
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
    // x and dy activations; w and b their operand copies; dw and dbias f32.
    Tensor x_dev = UpAct(x), w_dev = UpOperand(w), dy_dev = UpAct(dy);
    Tensor y = PoisonedAct({c.n, c.o, oh, ow}), yh = Tensor::Empty({c.n, c.o, oh, ow});
    Tensor db_dev = UpOperand(b);
    gpu_->Conv2dForward(x_dev, w_dev, c.bias ? &db_dev : nullptr, c.g, y);
    cpu_->Conv2dForward(x, w, c.bias ? &b : nullptr, c.g, yh);
    ExpectClose("Conv2d y", y, yh);
    // dx overwritten (poisoned); dw and dbias accumulate onto random values.
    Tensor dx = PoisonedAct(x.shape()), dxh = Tensor::Empty(x.shape());
    Tensor dwh = Rand(w.shape(), ++seed), dbh = Rand(b.shape(), ++seed);
    Tensor dw = Up(dwh), dbias = Up(dbh);
    gpu_->Conv2dBackward(x_dev, w_dev, dy_dev, c.g, &dx, dw, c.bias ? &dbias : nullptr);
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
  gpu_->Conv2dBackward(UpAct(x), UpOperand(w), UpAct(dy), Geo(3, 1, 1), nullptr, dw, nullptr);
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
    Tensor y = PoisonedAct({3, 4, oh, ow}), yh = Tensor::Empty({3, 4, oh, ow});
    Tensor dx = PoisonedAct(x.shape()), dxh = Tensor::Empty(x.shape());
    Tensor dx_in = UpAct(x);
    gpu_->MaxPool2dForward(dx_in, k, s, y);
    cpu_->MaxPool2dForward(x, k, s, yh);
    gpu_->MaxPool2dBackward(dx_in, UpAct(dy), k, s, dx);
    cpu_->MaxPool2dBackward(x, dy, k, s, dxh);
    // The maximum is one of the inputs: the same value on both sides (16-bit storage holds it exactly).
    EXPECT_EQ(Down(y), yh.ToVector()) << "k " << k << " s " << s;
    ExpectClose("MaxPool dx", dx, dxh, 1e-6);
  }
}

TEST_P(CudaBackendTest, BatchNormTrainEvalAndBackward) {
  const Shape shape{6, 5, 7, 9};
  Tensor x = Rand(shape, 50, -2.0f, 3.0f), gamma = Rand({5}, 51), beta = Rand({5}, 52);
  Tensor rm_h = Rand({5}, 53), rv_h = Rand({5}, 54, 0.5f, 2.0f);
  Tensor rm = Up(rm_h), rv = Up(rv_h);
  Tensor y = PoisonedAct(shape), sm = Poisoned({5}), si = Poisoned({5});
  Tensor yh = Tensor::Empty(shape), smh = Tensor::Empty({5}), sih = Tensor::Empty({5});
  // gamma and beta: the f32 parameter values (norms take no operand copies).
  Tensor dx_in = UpAct(x), dgamma_in = Up(gamma), dbeta_in = Up(beta);
  gpu_->BatchNorm2dForwardTrain(dx_in, dgamma_in, dbeta_in, 0.1f, 1e-5f, rm, rv, y, sm, si);
  cpu_->BatchNorm2dForwardTrain(x, gamma, beta, 0.1f, 1e-5f, rm_h, rv_h, yh, smh, sih);
  ExpectClose("BN y", y, yh);
  ExpectClose("BN save_mean", sm, smh, 1e-5);
  ExpectClose("BN save_invstd", si, sih, 1e-5);
  ExpectClose("BN running_mean (PyTorch momentum)", rm, rm_h, 1e-5);
  ExpectClose("BN running_var (unbiased)", rv, rv_h, 1e-5);

  Tensor ye = PoisonedAct(shape), yeh = Tensor::Empty(shape);
  gpu_->BatchNorm2dForwardEval(dx_in, dgamma_in, dbeta_in, rm, rv, 1e-5f, ye);
  cpu_->BatchNorm2dForwardEval(x, gamma, beta, rm_h, rv_h, 1e-5f, yeh);
  ExpectClose("BN eval y", ye, yeh);

  Tensor dy = Rand(shape, 55);
  Tensor dx = PoisonedAct(shape), dxh = Tensor::Empty(shape);
  Tensor dgh = Rand({5}, 56), dbh = Rand({5}, 57);
  Tensor dg = Up(dgh), db = Up(dbh);
  gpu_->BatchNorm2dBackward(dx_in, UpAct(dy), dgamma_in, sm, si, dx, dg, db);
  cpu_->BatchNorm2dBackward(x, dy, gamma, smh, sih, dxh, dgh, dbh);
  ExpectClose("BN dx", dx, dxh);
  ExpectClose("BN dgamma +=", dg, dgh, std::max(tol(), 1e-4));
  ExpectClose("BN dbeta +=", db, dbh, std::max(tol(), 1e-5));
}

TEST_P(CudaBackendTest, LayerNormForwardAndBackward) {
  for (int64_t c : {64, 768, 1000}) {
    const int64_t rows = 37;
    Tensor x = Rand({rows, c}, 60, -2.0f, 2.0f), gamma = Rand({c}, 61), beta = Rand({c}, 62);
    Tensor y = PoisonedAct({rows, c}), mean = Poisoned({rows}), rstd = Poisoned({rows});
    Tensor yh = Tensor::Empty({rows, c}), mh = Tensor::Empty({rows}), rh = Tensor::Empty({rows});
    Tensor dx_in = UpAct(x), dgamma_in = Up(gamma);
    gpu_->LayerNormForward(dx_in, dgamma_in, Up(beta), 1e-5f, y, mean, rstd);
    cpu_->LayerNormForward(x, gamma, beta, 1e-5f, yh, mh, rh);
    ExpectClose("LN y", y, yh);
    ExpectClose("LN mean", mean, mh, 1e-5);
    ExpectClose("LN rstd", rstd, rh, 1e-5);
    Tensor dy = Rand({rows, c}, 63);
    Tensor dx = PoisonedAct({rows, c}), dxh = Tensor::Empty({rows, c});
    Tensor dgh = Rand({c}, 64), dbh = Rand({c}, 65);
    Tensor dg = Up(dgh), db = Up(dbh);
    gpu_->LayerNormBackward(dx_in, UpAct(dy), dgamma_in, mean, rstd, dx, dg, db);
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
  Tensor out = PoisonedAct({b, t, c}), outh = Tensor::Empty({b, t, c});
  Tensor dtokens = Up(tokens);
  gpu_->EmbeddingForward(dtokens, Up(wte), Up(wpe), out);
  cpu_->EmbeddingForward(tokens, wte, wpe, outh);
  ExpectClose("Embedding out", out, outh);
  Tensor dout = Rand({b, t, c}, 73);
  Tensor dwteh = Rand({v, c}, 74), dwpeh = Rand({t + 3, c}, 75);
  Tensor dwte = Up(dwteh), dwpe = Up(dwpeh);
  gpu_->EmbeddingBackward(dtokens, UpAct(dout), dwte, dwpe);
  cpu_->EmbeddingBackward(tokens, dout, dwteh, dwpeh);
  ExpectClose("Embedding dwte +=", dwte, dwteh, std::max(tol(), 1e-6));
  ExpectClose("Embedding dwpe +=", dwpe, dwpeh, std::max(tol(), 1e-6));
}

// Targets for m rows of a v-column classifier: row i -> (i * 7919) % v, the
// last row -> v - 1 (the last real column), rows in `ignored` -> kIgnore.
constexpr int32_t kIgnore = -100;
Tensor Targets(int64_t m, int64_t v, std::initializer_list<int64_t> ignored) {
  std::vector<int32_t> t(m);
  for (int64_t i = 0; i < m; ++i) t[i] = static_cast<int32_t>((i * 7919) % v);
  t[m - 1] = static_cast<int32_t>(v - 1);
  for (int64_t i : ignored) t[i] = kIgnore;
  return Tensor::FromInts({m}, t);
}

TEST_P(CudaBackendTest, SoftmaxCrossEntropyWithIgnoredRowsAndGradScale) {
  for (int64_t v : {10, 1000, 50257}) {
    const int64_t m = 9;
    Tensor logits = Rand({m, v}, 90, -4.0f, 4.0f);
    Tensor targets = Targets(m, v, {2, 7});
    Tensor loss = Poisoned({1}), dl = PoisonedAct({m, v});
    Tensor lossh = Tensor::Empty({1}), dlh = Tensor::Empty({m, v});
    gpu_->SoftmaxCrossEntropy(UpAct(logits), Up(targets), kIgnore, 1024.0f, loss, dl);
    cpu_->SoftmaxCrossEntropy(logits, targets, kIgnore, 1024.0f, lossh, dlh);
    ExpectClose("xent loss", loss, lossh, 1e-5);
    ExpectClose("xent dlogits", dl, dlh);
  }
  // Every row ignored: loss 0 and zero gradients.
  Tensor logits = Rand({3, 50}, 91);
  Tensor targets = Tensor::FromInts({3}, {-1, -1, -1});
  Tensor loss = Poisoned({1}), dl = PoisonedAct({3, 50});
  gpu_->SoftmaxCrossEntropy(UpAct(logits), Up(targets), -1, 1.0f, loss, dl);
  EXPECT_EQ(Down(loss)[0], 0.0f);
  EXPECT_EQ(Down(dl), std::vector<float>(150, 0.0f));
}

TEST_P(CudaBackendTest, CountTargetsCountsTheTargetsNotIgnored) {
  // One element; fewer than a warp; many blocks' worth (the count is exact below 2^24).
  for (int64_t n : {1, 7, 1000, 70001}) {
    std::vector<int32_t> t(n);
    Rng rng(80 + n);
    int64_t want = 0;
    for (int32_t& id : t) {
      id = static_cast<int32_t>(rng.Next() % 5) - 1;  // -1 (ignored) one time in five
      want += id != -1;
    }
    Tensor targets = Tensor::FromInts({n}, t);
    Tensor count = Poisoned({1}), counth = Tensor::Empty({1});
    gpu_->CountTargets(Up(targets), -1, count);
    cpu_->CountTargets(targets, -1, counth);
    EXPECT_EQ(Down(count)[0], static_cast<float>(want)) << n << " targets";
    EXPECT_EQ(counth.f32()[0], static_cast<float>(want)) << n << " targets (CPU twin)";
  }
  // Any shape (a language model's [B, T]); all ignored counts 0.
  Tensor tokens = Tensor::FromInts({2, 3}, {5, kIgnore, 0, 7, kIgnore, 1});
  Tensor count = Poisoned({1});
  gpu_->CountTargets(Up(tokens), kIgnore, count);
  EXPECT_EQ(Down(count)[0], 4.0f);
  gpu_->CountTargets(Up(Tensor::FromInts({3}, {-1, -1, -1})), -1, count);
  EXPECT_EQ(Down(count)[0], 0.0f);
}

// The padded vocabulary: logits [m, ld] of which v columns are real. The
// padding holds 40, far above the real logits (at most 4): read into the
// softmax it would add about 36 to each row's loss. Its gradient columns must
// be exactly zero (poisoned before), the loss must be that of the real columns
// alone (the same op on a contiguous [m, v] copy), and the chunk adds to the
// loss it is given.
TEST_P(CudaBackendTest, SoftmaxCrossEntropyChunkIgnoresPaddedColumns) {
  struct Case {
    int64_t m, v, ld;
  };
  // ld a multiple of the vector width (16 bytes) or not; GPT-2's 50,257 padded to 50,304.
  const Case cases[] = {{9, 1000, 1024}, {5, 997, 1001}, {4, 50257, 50304}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " v " << c.v << " ld " << c.ld);
    Tensor real = Rand({c.m, c.v}, ++seed, -4.0f, 4.0f);
    Tensor padded = Tensor::Empty({c.m, c.ld});
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.ld; ++j) padded.f32()[i * c.ld + j] = j < c.v ? real.f32()[i * c.v + j] : 40.0f;
    Tensor targets = Targets(c.m, c.v, {1});
    Tensor dtargets = Up(targets);
    Tensor count = Poisoned({1}), counth = Tensor::Empty({1});
    gpu_->CountTargets(dtargets, kIgnore, count);
    cpu_->CountTargets(targets, kIgnore, counth);
    const float start = 0.25f;
    Tensor loss = Up(Tensor::FromVector({1}, {start})), lossh = Tensor::FromVector({1}, {start});
    Tensor dl = PoisonedAct({c.m, c.ld}), dlh = Tensor::Empty({c.m, c.ld});
    gpu_->SoftmaxCrossEntropyChunk(UpAct(padded), c.v, dtargets, kIgnore, count, 8.0f, loss, &dl);
    cpu_->SoftmaxCrossEntropyChunk(padded, c.v, targets, kIgnore, counth, 8.0f, lossh, &dlh);
    ExpectClose("chunk loss", loss, lossh, 1e-5);
    ExpectClose("chunk dlogits", dl, dlh);
    const std::vector<float> grad = Down(dl);
    int64_t padding_nonzero = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.v; j < c.ld; ++j) padding_nonzero += grad[i * c.ld + j] != 0.0f;
    EXPECT_EQ(padding_nonzero, 0) << "padded columns of dlogits must be exactly 0";
    // The real columns alone, as an unpadded classifier.
    Tensor loss_real = Up(Tensor::FromVector({1}, {start})), dl_real = PoisonedAct({c.m, c.v});
    gpu_->SoftmaxCrossEntropyChunk(UpAct(real), c.v, dtargets, kIgnore, count, 8.0f, loss_real, &dl_real);
    ExpectClose("padded loss vs the real columns' loss", Down(loss), Down(loss_real), 1e-5);
    std::vector<float> grad_real_columns;
    for (int64_t i = 0; i < c.m; ++i)
      grad_real_columns.insert(grad_real_columns.end(), grad.begin() + i * c.ld, grad.begin() + i * c.ld + c.v);
    ExpectClose("padded dlogits vs the real columns' dlogits", grad_real_columns, Down(dl_real), tol());
  }
}

// dlogits == logits (the classifier's one buffer) gives what a separate
// dlogits gets; dlogits null adds the same loss and leaves the logits alone.
TEST_P(CudaBackendTest, SoftmaxCrossEntropyChunkInPlaceAndLossOnly) {
  const int64_t m = 6, v = 300, ld = 320;
  Tensor logits = Rand({m, ld}, 110, -4.0f, 4.0f);
  Tensor targets = Targets(m, v, {3});
  Tensor dtargets = Up(targets);
  Tensor count = Poisoned({1}), counth = Tensor::Empty({1});
  gpu_->CountTargets(dtargets, kIgnore, count);
  cpu_->CountTargets(targets, kIgnore, counth);

  Tensor loss_apart = gpu_->Zeros({1}), dl_apart = PoisonedAct({m, ld});
  gpu_->SoftmaxCrossEntropyChunk(UpAct(logits), v, dtargets, kIgnore, count, 2.0f, loss_apart, &dl_apart);

  Tensor z = UpAct(logits), loss_in_place = gpu_->Zeros({1});
  gpu_->SoftmaxCrossEntropyChunk(z, v, dtargets, kIgnore, count, 2.0f, loss_in_place, &z);
  Tensor zh = Clone(logits), lossh = Tensor::Zeros({1});
  cpu_->SoftmaxCrossEntropyChunk(zh, v, targets, kIgnore, counth, 2.0f, lossh, &zh);
  ExpectClose("in-place loss", loss_in_place, lossh, 1e-5);
  ExpectClose("in-place dlogits (CPU twin)", z, zh);
  ExpectClose("in-place dlogits (separate dlogits)", Down(z), Down(dl_apart), tol());
  ExpectClose("in-place loss (separate dlogits)", Down(loss_in_place), Down(loss_apart), 1e-5);

  Tensor untouched = UpAct(logits), loss_only = gpu_->Zeros({1});
  gpu_->SoftmaxCrossEntropyChunk(untouched, v, dtargets, kIgnore, count, 2.0f, loss_only, nullptr);
  ExpectClose("loss-only loss", Down(loss_only), Down(loss_apart), 1e-5);
  EXPECT_EQ(Down(untouched), logits.ToVector()) << "loss only must not write the logits";
}

// A batch in chunks of rows (the classifier's loop): one count over the whole
// batch, every chunk adding to one loss. The chunks' loss is the one-chunk
// loss and their dlogits rows are the one-chunk rows; a chunk whose rows are
// all ignored adds nothing and gets zero rows.
TEST_P(CudaBackendTest, SoftmaxCrossEntropyChunksAddUpToTheWholeBatch) {
  const int64_t m = 10, v = 500, ld = 512;
  Tensor logits = Rand({m, ld}, 120, -4.0f, 4.0f);
  Tensor targets = Targets(m, v, {2, 4, 5});
  Tensor z = UpAct(logits), dtargets = Up(targets);
  Tensor count = Poisoned({1});
  gpu_->CountTargets(dtargets, kIgnore, count);
  EXPECT_EQ(Down(count)[0], 7.0f);

  Tensor loss_whole = gpu_->Zeros({1}), dl_whole = PoisonedAct({m, ld});
  gpu_->SoftmaxCrossEntropyChunk(z, v, dtargets, kIgnore, count, 4.0f, loss_whole, &dl_whole);
  Tensor loss_chunks = gpu_->Zeros({1}), dl_chunks = PoisonedAct({m, ld});
  for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 4}, {4, 6}, {6, 10}}) {  // rows 4 and 5: all ignored
    const Tensor dl_rows = dl_chunks.Rows(r0, r1);
    gpu_->SoftmaxCrossEntropyChunk(z.Rows(r0, r1), v, dtargets.Rows(r0, r1), kIgnore, count, 4.0f,
                                   loss_chunks, &dl_rows);
  }
  Tensor lossh = Tensor::Empty({1}), dlh = Tensor::Empty({m, ld});
  Tensor logits_v = Tensor::Empty({m, v});  // the CPU twin of the whole batch, unpadded
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < v; ++j) logits_v.f32()[i * v + j] = logits.f32()[i * ld + j];
  Tensor dlh_v = Tensor::Empty({m, v});
  cpu_->SoftmaxCrossEntropy(logits_v, targets, kIgnore, 4.0f, lossh, dlh_v);
  ExpectClose("chunks' loss vs one chunk", Down(loss_chunks), Down(loss_whole), 1e-5);
  ExpectClose("chunks' loss vs the CPU twin", loss_chunks, lossh, 1e-5);
  ExpectClose("chunks' dlogits vs one chunk", Down(dl_chunks), Down(dl_whole), tol());
  const std::vector<float> chunked = Down(dl_chunks);
  for (int64_t i : {4, 5}) {
    EXPECT_EQ(std::vector<float>(chunked.begin() + i * ld, chunked.begin() + (i + 1) * ld),
              std::vector<float>(ld, 0.0f))
        << "ignored row " << i;
  }
  std::vector<float> real_columns;
  for (int64_t i = 0; i < m; ++i)
    real_columns.insert(real_columns.end(), chunked.begin() + i * ld, chunked.begin() + i * ld + v);
  ExpectClose("chunks' dlogits vs the CPU twin", real_columns, dlh_v.ToVector(), tol());
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaBackendTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace ringmaster::engine::testing
