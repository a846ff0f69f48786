#include "engine/core/reference_ops.h"

#include <cmath>

namespace ringmaster::engine::ref {

Vec Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const Vec& a, const Vec& b, float beta,
         const Vec& c, const Vec& bias) {
  Vec out(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        double av = ta ? a[p * m + i] : a[i * k + p];
        double bv = tb ? b[j * k + p] : b[p * n + j];
        s += av * bv;
      }
      double r = alpha * s + (bias.empty() ? 0.0 : bias[j]);
      if (beta != 0.0f) r += beta * static_cast<double>(c[i * n + j]);
      out[i * n + j] = static_cast<float>(r);
    }
  return out;
}

Vec Conv2d(const ConvShape& s, const Vec& x, const Vec& w, const Vec& bias) {
  const int64_t oh = s.oh(), ow = s.ow(), kh = s.g.kernel_h, kw = s.g.kernel_w;
  Vec y(s.n * s.o * oh * ow);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias.empty() ? 0.0 : bias[o];
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                int64_t ih = i * s.g.stride_h - s.g.pad_h + a, iw = j * s.g.stride_w - s.g.pad_w + b;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += static_cast<double>(x[((n * s.c + c) * s.h + ih) * s.w + iw]) *
                       w[((o * s.c + c) * kh + a) * kw + b];
              }
          y[((n * s.o + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

void Conv2dBackward(const ConvShape& s, const Vec& x, const Vec& w, const Vec& dy, Vec* dx, Vec* dw, Vec* db) {
  const int64_t oh = s.oh(), ow = s.ow(), kh = s.g.kernel_h, kw = s.g.kernel_w;
  std::vector<double> gx(x.size(), 0.0), gw(w.size(), 0.0), gb(s.o, 0.0);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double g = dy[((n * s.o + o) * oh + i) * ow + j];
          gb[o] += g;
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                int64_t ih = i * s.g.stride_h - s.g.pad_h + a, iw = j * s.g.stride_w - s.g.pad_w + b;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                int64_t xi = ((n * s.c + c) * s.h + ih) * s.w + iw, wi = ((o * s.c + c) * kh + a) * kw + b;
                gx[xi] += g * w[wi];
                gw[wi] += g * x[xi];
              }
        }
  dx->assign(gx.begin(), gx.end());
  dw->assign(gw.begin(), gw.end());
  db->assign(gb.begin(), gb.end());
}

Vec MaxPool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, const Vec& x) {
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  Vec y(n * c * oh * ow);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        float m = -INFINITY;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) m = std::fmax(m, x[(p * h + i * s + a) * w + j * s + b]);
        y[(p * oh + i) * ow + j] = m;
      }
  return y;
}

Vec MaxPoolBackward(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, const Vec& x, const Vec& dy) {
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  Vec dx(x.size(), 0.0f);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t best = -1;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) {
            int64_t idx = (p * h + i * s + a) * w + j * s + b;
            if (best < 0 || x[idx] > x[best]) best = idx;
          }
        dx[best] += dy[(p * oh + i) * ow + j];
      }
  return dx;
}

void BatchNorm(int64_t n, int64_t c, int64_t hw, const Vec& x, const Vec& gamma, const Vec& beta, float eps, Vec* y,
               Vec* mean, Vec* var) {
  y->assign(x.size(), 0.0f);
  mean->assign(c, 0.0f);
  var->assign(c, 0.0f);
  const double cnt = static_cast<double>(n * hw);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) s += x[(i * c + ch) * hw + j];
    double m = s / cnt;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) sq += (x[(i * c + ch) * hw + j] - m) * (x[(i * c + ch) * hw + j] - m);
    double v = sq / cnt;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        int64_t idx = (i * c + ch) * hw + j;
        (*y)[idx] = static_cast<float>((x[idx] - m) / std::sqrt(v + eps) * gamma[ch] + beta[ch]);
      }
    (*mean)[ch] = static_cast<float>(m);
    (*var)[ch] = static_cast<float>(v);
  }
}

void BatchNormBackward(int64_t n, int64_t c, int64_t hw, const Vec& x, const Vec& gamma, const Vec& dy, float eps,
                       Vec* dx, Vec* dgamma, Vec* dbeta) {
  Vec y, mean, var;
  BatchNorm(n, c, hw, x, gamma, Vec(c, 0.0f), eps, &y, &mean, &var);
  dx->assign(x.size(), 0.0f);
  dgamma->assign(c, 0.0f);
  dbeta->assign(c, 0.0f);
  const double cnt = static_cast<double>(n * hw);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double is = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps);
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        int64_t idx = (i * c + ch) * hw + j;
        double xhat = (x[idx] - mean[ch]) * is;
        sdy += dy[idx];
        sdyx += dy[idx] * xhat;
      }
    (*dbeta)[ch] = static_cast<float>(sdy);
    (*dgamma)[ch] = static_cast<float>(sdyx);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        int64_t idx = (i * c + ch) * hw + j;
        double xhat = (x[idx] - mean[ch]) * is;
        (*dx)[idx] = static_cast<float>(gamma[ch] * is * (dy[idx] - sdy / cnt - xhat * sdyx / cnt));
      }
  }
}

void LayerNorm(int64_t rows, int64_t c, const Vec& x, const Vec& gamma, const Vec& beta, float eps, Vec* y) {
  y->assign(x.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0, sq = 0.0;
    for (int64_t j = 0; j < c; ++j) s += x[r * c + j];
    double m = s / c;
    for (int64_t j = 0; j < c; ++j) sq += (x[r * c + j] - m) * (x[r * c + j] - m);
    double is = 1.0 / std::sqrt(sq / c + eps);
    for (int64_t j = 0; j < c; ++j) (*y)[r * c + j] = static_cast<float>((x[r * c + j] - m) * is * gamma[j] + beta[j]);
  }
}

void LayerNormBackward(int64_t rows, int64_t c, const Vec& x, const Vec& gamma, const Vec& dy, float eps, Vec* dx,
                       Vec* dgamma, Vec* dbeta) {
  dx->assign(x.size(), 0.0f);
  std::vector<double> gg(c, 0.0), gb(c, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0, sq = 0.0;
    for (int64_t j = 0; j < c; ++j) s += x[r * c + j];
    double m = s / c;
    for (int64_t j = 0; j < c; ++j) sq += (x[r * c + j] - m) * (x[r * c + j] - m);
    double is = 1.0 / std::sqrt(sq / c + eps);
    double sdn = 0.0, sdnx = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      double xhat = (x[r * c + j] - m) * is, dn = dy[r * c + j] * static_cast<double>(gamma[j]);
      sdn += dn;
      sdnx += dn * xhat;
      gg[j] += dy[r * c + j] * xhat;
      gb[j] += dy[r * c + j];
    }
    for (int64_t j = 0; j < c; ++j) {
      double xhat = (x[r * c + j] - m) * is;
      (*dx)[r * c + j] = static_cast<float>(is * (dy[r * c + j] * static_cast<double>(gamma[j]) - sdn / c - xhat * sdnx / c));
    }
  }
  dgamma->assign(gg.begin(), gg.end());
  dbeta->assign(gb.begin(), gb.end());
}

namespace {

// Causal softmax probabilities p[b][h][i][j] (j <= i) in double.
std::vector<double> AttentionProbs(int64_t b, int64_t t, int64_t c, int64_t nh, const Vec& qkv) {
  const int64_t hd = c / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> p(b * nh * t * t, 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        double* row = &p[((bi * nh + h) * t + i) * t];
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int64_t d = 0; d < hd; ++d)
            s += static_cast<double>(qkv[(bi * t + i) * 3 * c + h * hd + d]) * qkv[(bi * t + j) * 3 * c + c + h * hd + d];
          row[j] = s * scale;
          mx = std::max(mx, row[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += (row[j] = std::exp(row[j] - mx));
        for (int64_t j = 0; j <= i; ++j) row[j] /= sum;
      }
  return p;
}

}  // namespace

Vec Attention(int64_t b, int64_t t, int64_t c, int64_t nh, const Vec& qkv) {
  const int64_t hd = c / nh;
  std::vector<double> p = AttentionProbs(b, t, c, nh, qkv);
  Vec out(b * t * c, 0.0f);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i)
        for (int64_t d = 0; d < hd; ++d) {
          double s = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            s += p[((bi * nh + h) * t + i) * t + j] * qkv[(bi * t + j) * 3 * c + 2 * c + h * hd + d];
          out[(bi * t + i) * c + h * hd + d] = static_cast<float>(s);
        }
  return out;
}

Vec AttentionBackward(int64_t b, int64_t t, int64_t c, int64_t nh, const Vec& qkv, const Vec& dout) {
  const int64_t hd = c / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> p = AttentionProbs(b, t, c, nh, qkv);
  std::vector<double> g(qkv.size(), 0.0);
  auto Q = [&](int64_t bi, int64_t i, int64_t h, int64_t d) { return (bi * t + i) * 3 * c + h * hd + d; };
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const double* pr = &p[((bi * nh + h) * t + i) * t];
        std::vector<double> dp(i + 1, 0.0);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < hd; ++d) {
            double go = dout[(bi * t + i) * c + h * hd + d];
            dp[j] += go * qkv[Q(bi, j, h, d) + 2 * c];
            g[Q(bi, j, h, d) + 2 * c] += pr[j] * go;
          }
        double dot = 0.0;
        for (int64_t j = 0; j <= i; ++j) dot += pr[j] * dp[j];
        for (int64_t j = 0; j <= i; ++j) {
          double ds = pr[j] * (dp[j] - dot) * scale;
          for (int64_t d = 0; d < hd; ++d) {
            g[Q(bi, i, h, d)] += ds * qkv[Q(bi, j, h, d) + c];
            g[Q(bi, j, h, d) + c] += ds * qkv[Q(bi, i, h, d)];
          }
        }
      }
  return Vec(g.begin(), g.end());
}

float SoftmaxCrossEntropy(int64_t m, int64_t v, const Vec& logits, const std::vector<int32_t>& targets, int32_t ignore,
                          Vec* dlogits) {
  dlogits->assign(m * v, 0.0f);
  int64_t count = 0;
  for (int32_t y : targets) count += y != ignore;
  double total = 0.0;
  for (int64_t r = 0; r < m; ++r) {
    if (targets[r] == ignore) continue;
    double mx = -1e300, sum = 0.0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, static_cast<double>(logits[r * v + j]));
    for (int64_t j = 0; j < v; ++j) sum += std::exp(logits[r * v + j] - mx);
    total += std::log(sum) + mx - logits[r * v + targets[r]];
    for (int64_t j = 0; j < v; ++j)
      (*dlogits)[r * v + j] =
          static_cast<float>((std::exp(logits[r * v + j] - mx) / sum - (j == targets[r] ? 1.0 : 0.0)) / count);
  }
  return count == 0 ? 0.0f : static_cast<float>(total / count);
}

float Gelu(float x) {
  double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return static_cast<float>(0.5 * x * (1.0 + std::tanh(u)));
}

float GeluGrad(float x) {
  const double h = 1e-4;
  double xp = x + h, xm = x - h;
  auto f = [](double v) { return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); };
  return static_cast<float>((f(xp) - f(xm)) / (2 * h));
}

}  // namespace ringmaster::engine::ref
