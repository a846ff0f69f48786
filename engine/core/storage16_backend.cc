#include "engine/core/storage16_backend.h"

#include <cmath>
#include <vector>

#include "engine/core/check.h"

namespace ringmaster::engine {

// One op's activation arguments: In widens a 16-bit tensor into an f32 copy
// (one copy per tensor, so arguments that alias stay aliased), Out hands out
// the f32 tensor the CPU op writes, narrowed back when the op ends. The
// narrowing must be exact: a value the CPU op left unrounded is a bug of that
// op's rounding, and is reported rather than rounded away.
class Storage16Backend::Op {
 public:
  Op(Storage16Backend& backend, const char* name) : backend_(backend), name_(name) { ++backend_.ops_; }
  ~Op() {
    for (Entry& e : entries_) {
      if (!e.out) continue;
      backend_.inner_.Convert(e.wide, e.act);
      const std::vector<float> wide = e.wide.ToVector(), narrow = e.act.ToVector();
      for (size_t i = 0; i < wide.size(); ++i) {
        ENGINE_CHECK(narrow[i] == wide[i] || (std::isnan(narrow[i]) && std::isnan(wide[i])),
                     "{}: element {} of an activation output is {}, not a {} value (the CPU op did not round it)",
                     name_, i, wide[i], DTypeName(e.act.dtype()));
      }
    }
  }

  Tensor In(const Tensor& act, const char* what) {
    Entry& e = Find(act, what);
    return e.wide;
  }
  Tensor Out(const Tensor& act, const char* what) {
    Entry& e = Find(act, what);
    e.out = true;
    return e.wide;
  }
  const Tensor* OutOrNull(const Tensor* act, const char* what, Tensor* storage) {
    if (act == nullptr) return nullptr;
    *storage = Out(*act, what);
    return storage;
  }
  const Tensor* InOrNull(const Tensor* act, const char* what, Tensor* storage) {
    if (act == nullptr) return nullptr;
    *storage = In(*act, what);
    return storage;
  }
  // An argument that is not an activation: f32, passed through.
  const Tensor& F32(const Tensor& t, const char* what) const {
    ENGINE_CHECK(t.dtype() == DType::kF32, "{}: {} must be f32 (not an activation), got {}", name_, what,
                 DTypeName(t.dtype()));
    return t;
  }

 private:
  struct Entry {
    Tensor act, wide;
    bool out = false;
  };
  Entry& Find(const Tensor& act, const char* what) {
    ENGINE_CHECK(act.dtype() == backend_.activation_dtype(), "{}: {} must be a {} activation, got {}", name_, what,
                 DTypeName(backend_.activation_dtype()), DTypeName(act.dtype()));
    for (Entry& e : entries_) {
      if (e.act.raw() == act.raw() && e.act.numel() == act.numel()) return e;
    }
    Entry e;
    e.act = act;
    e.wide = Tensor::Empty(act.shape(), DType::kF32);
    backend_.inner_.Convert(act, e.wide);
    entries_.push_back(std::move(e));
    return entries_.back();
  }

  Storage16Backend& backend_;
  const char* name_;
  std::vector<Entry> entries_;
};

Storage16Backend::Storage16Backend(DType compute_dtype, int num_threads)
    : inner_(CpuBackendConfig{num_threads, compute_dtype}) {
  ENGINE_CHECK(compute_dtype == DType::kF16 || compute_dtype == DType::kBF16,
               "Storage16Backend stores activations in f16 or bf16, not {}", DTypeName(compute_dtype));
}

void Storage16Backend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  Op op(*this, "Add");
  const Tensor wa = op.In(a, "a"), wb = op.In(b, "b");
  inner_.Add(wa, wb, op.Out(out, "out"));
}

void Storage16Backend::Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                            const Tensor& c, const Tensor* bias) {
  Op op(*this, "Gemm");
  const Tensor wa = op.In(a, "a"), wb = op.In(b, "b (a weight: its operand copy)");
  Tensor wbias;
  const Tensor* pbias = op.InOrNull(bias, "bias (its operand copy)", &wbias);
  if (c.dtype() == DType::kF32) {  // a parameter gradient
    inner_.Gemm(trans_a, trans_b, alpha, wa, wb, beta, c, pbias);
    return;
  }
  if (beta != 0.0f) op.In(c, "c");
  inner_.Gemm(trans_a, trans_b, alpha, wa, wb, beta, op.Out(c, "c"), pbias);
}

void Storage16Backend::GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                                   float beta, const Tensor& c) {
  Op op(*this, "GemmBatched");
  const Tensor wa = op.In(a, "a"), wb = op.In(b, "b");
  if (c.dtype() == DType::kF32) {
    inner_.GemmBatched(trans_a, trans_b, alpha, wa, wb, beta, c);
    return;
  }
  if (beta != 0.0f) op.In(c, "c");
  inner_.GemmBatched(trans_a, trans_b, alpha, wa, wb, beta, op.Out(c, "c"));
}

void Storage16Backend::BiasGrad(const Tensor& dy, const Tensor& dbias) {
  Op op(*this, "BiasGrad");
  inner_.BiasGrad(op.In(dy, "dy"), op.F32(dbias, "dbias"));
}

void Storage16Backend::ReluForward(const Tensor& x, const Tensor& y) {
  Op op(*this, "ReluForward");
  const Tensor wx = op.In(x, "x");
  inner_.ReluForward(wx, op.Out(y, "y"));
}

void Storage16Backend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  Op op(*this, "ReluBackward");
  const Tensor wy = op.In(y, "y"), wdy = op.In(dy, "dy");
  inner_.ReluBackward(wy, wdy, op.Out(dx, "dx"));
}

void Storage16Backend::GeluForward(const Tensor& x, const Tensor& y) {
  Op op(*this, "GeluForward");
  const Tensor wx = op.In(x, "x");
  inner_.GeluForward(wx, op.Out(y, "y"));
}

void Storage16Backend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  Op op(*this, "GeluBackward");
  const Tensor wx = op.In(x, "x"), wdy = op.In(dy, "dy");
  inner_.GeluBackward(wx, wdy, op.Out(dx, "dx"));
}

void Storage16Backend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  Op op(*this, "DropoutForward");
  const Tensor wx = op.In(x, "x");
  inner_.DropoutForward(wx, p, key, op.F32(mask, "mask"), op.Out(y, "y"));
}

void Storage16Backend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  Op op(*this, "DropoutBackward");
  const Tensor wdy = op.In(dy, "dy");
  inner_.DropoutBackward(wdy, op.F32(mask, "mask"), op.Out(dx, "dx"));
}

void Storage16Backend::Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                                     const Tensor& y) {
  Op op(*this, "Conv2dForward");
  const Tensor wx = op.In(x, "x"), ww = op.In(w, "w (its operand copy)");
  Tensor wbias;
  const Tensor* pbias = op.InOrNull(bias, "bias (its operand copy)", &wbias);
  inner_.Conv2dForward(wx, ww, pbias, g, op.Out(y, "y"));
}

void Storage16Backend::Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                                      const Tensor* dx, const Tensor& dw, const Tensor* dbias) {
  Op op(*this, "Conv2dBackward");
  const Tensor wx = op.In(x, "x"), ww = op.In(w, "w (its operand copy)"), wdy = op.In(dy, "dy");
  Tensor wdx;
  const Tensor* pdx = op.OutOrNull(dx, "dx", &wdx);
  if (dbias != nullptr) op.F32(*dbias, "dbias");
  inner_.Conv2dBackward(wx, ww, wdy, g, pdx, op.F32(dw, "dw"), dbias);
}

void Storage16Backend::MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) {
  Op op(*this, "MaxPool2dForward");
  const Tensor wx = op.In(x, "x");
  inner_.MaxPool2dForward(wx, k, s, op.Out(y, "y"));
}

void Storage16Backend::MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) {
  Op op(*this, "MaxPool2dBackward");
  const Tensor wx = op.In(x, "x"), wdy = op.In(dy, "dy");
  inner_.MaxPool2dBackward(wx, wdy, k, s, op.Out(dx, "dx"));
}

void Storage16Backend::BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                               float momentum, float eps, const Tensor& running_mean,
                                               const Tensor& running_var, const Tensor& y, const Tensor& save_mean,
                                               const Tensor& save_invstd) {
  Op op(*this, "BatchNorm2dForwardTrain");
  const Tensor wx = op.In(x, "x");
  inner_.BatchNorm2dForwardTrain(wx, op.F32(gamma, "gamma"), op.F32(beta, "beta"), momentum, eps,
                                 op.F32(running_mean, "running_mean"), op.F32(running_var, "running_var"),
                                 op.Out(y, "y"), op.F32(save_mean, "save_mean"), op.F32(save_invstd, "save_invstd"));
}

void Storage16Backend::BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              const Tensor& running_mean, const Tensor& running_var, float eps,
                                              const Tensor& y) {
  Op op(*this, "BatchNorm2dForwardEval");
  const Tensor wx = op.In(x, "x");
  inner_.BatchNorm2dForwardEval(wx, op.F32(gamma, "gamma"), op.F32(beta, "beta"),
                                op.F32(running_mean, "running_mean"), op.F32(running_var, "running_var"), eps,
                                op.Out(y, "y"));
}

void Storage16Backend::BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                           const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                                           const Tensor& dgamma, const Tensor& dbeta) {
  Op op(*this, "BatchNorm2dBackward");
  const Tensor wx = op.In(x, "x"), wdy = op.In(dy, "dy");
  inner_.BatchNorm2dBackward(wx, wdy, op.F32(gamma, "gamma"), op.F32(save_mean, "save_mean"),
                             op.F32(save_invstd, "save_invstd"), op.Out(dx, "dx"), op.F32(dgamma, "dgamma"),
                             op.F32(dbeta, "dbeta"));
}

void Storage16Backend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                        const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  Op op(*this, "LayerNormForward");
  const Tensor wx = op.In(x, "x");
  inner_.LayerNormForward(wx, op.F32(gamma, "gamma"), op.F32(beta, "beta"), eps, op.Out(y, "y"),
                          op.F32(mean, "mean"), op.F32(rstd, "rstd"));
}

void Storage16Backend::LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                                         const Tensor& dbeta) {
  Op op(*this, "LayerNormBackward");
  const Tensor wx = op.In(x, "x"), wdy = op.In(dy, "dy");
  inner_.LayerNormBackward(wx, wdy, op.F32(gamma, "gamma"), op.F32(mean, "mean"), op.F32(rstd, "rstd"),
                           op.Out(dx, "dx"), op.F32(dgamma, "dgamma"), op.F32(dbeta, "dbeta"));
}

void Storage16Backend::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                         const Tensor& y) {
  Op op(*this, "LinearGeluForward");
  const Tensor wx = op.In(x, "x"), ww = op.In(w, "w (its operand copy)"), wb = op.In(bias, "bias (its operand copy)");
  inner_.LinearGeluForward(wx, ww, wb, op.Out(pre, "pre"), op.Out(y, "y"));
}

void Storage16Backend::AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                           float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                                           const Tensor& rstd) {
  Op op(*this, "AddLayerNormForward");
  const Tensor wa = op.In(a, "a"), wb = op.In(b, "b");
  inner_.AddLayerNormForward(wa, wb, op.F32(gamma, "gamma"), op.F32(beta, "beta"), eps, op.Out(sum, "sum"),
                             op.Out(y, "y"), op.F32(mean, "mean"), op.F32(rstd, "rstd"));
}

void Storage16Backend::AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                            const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                                            const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  Op op(*this, "AddLayerNormBackward");
  const Tensor wx = op.In(x, "x"), wdy = op.In(dy, "dy"), wres = op.In(residual, "residual");
  inner_.AddLayerNormBackward(wx, wdy, op.F32(gamma, "gamma"), op.F32(mean, "mean"), op.F32(rstd, "rstd"), wres,
                              op.Out(dx, "dx"), op.F32(dgamma, "dgamma"), op.F32(dbeta, "dbeta"));
}

void Storage16Backend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                        const Tensor& out) {
  Op op(*this, "EmbeddingForward");
  inner_.EmbeddingForward(tokens, op.F32(wte, "wte"), op.F32(wpe, "wpe"), op.Out(out, "out"));
}

void Storage16Backend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                         const Tensor& dwpe) {
  Op op(*this, "EmbeddingBackward");
  inner_.EmbeddingBackward(tokens, op.In(dout, "dout"), op.F32(dwte, "dwte"), op.F32(dwpe, "dwpe"));
}

void Storage16Backend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) {
  Op op(*this, "AttentionForward");
  const Tensor wqkv = op.In(qkv, "qkv");
  inner_.AttentionForward(wqkv, n_head, op.F32(saved, "saved"), op.Out(out, "out"));
}

void Storage16Backend::AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out,
                                         const Tensor& dout, int64_t n_head, const Tensor& dqkv) {
  Op op(*this, "AttentionBackward");
  const Tensor wqkv = op.In(qkv, "qkv"), wout = op.In(out, "out"), wdout = op.In(dout, "dout");
  inner_.AttentionBackward(wqkv, op.F32(saved, "saved"), wout, wdout, n_head, op.Out(dqkv, "dqkv"));
}

void Storage16Backend::SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets,
                                                int32_t ignore_index, const Tensor& count, float grad_scale,
                                                const Tensor& loss, const Tensor* dlogits) {
  Op op(*this, "SoftmaxCrossEntropyChunk");
  const Tensor wlogits = op.In(logits, "logits");
  Tensor wd;
  const Tensor* pd = op.OutOrNull(dlogits, "dlogits", &wd);
  inner_.SoftmaxCrossEntropyChunk(wlogits, v, targets, ignore_index, op.F32(count, "count"), grad_scale,
                                  op.F32(loss, "loss"), pd);
}

}  // namespace ringmaster::engine
