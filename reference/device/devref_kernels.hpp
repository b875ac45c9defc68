// Internal: the device reference's kernels (reference/device/devref.hpp says
// what they compute). Single source over kgate's runtime, like the production
// kernels, but they are references: fp64 throughout, one output element (or
// one fixed piece of a reduction) per work-item, sums in a fixed order that
// does not depend on the grid the device runs, 64-bit indexing everywhere.
//
// Convolutions sum each output's terms in the host references' order
// (detail::for_each_term) with the host's Dot2 (reference/compensated.hpp):
// the result is the host Impl::dot2 reference's, bit for bit, on every
// backend. GroupNorm sums fixed chunks of rows with Dot2 and merges the
// chunks in order: within an ulp or two of the host fast (Dot2) reference.
#pragma once

#include <cstdint>

#include "kernels/runtime/runtime.hpp"
#include "reference/compensated.hpp"
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/device/devref.hpp"

namespace kgate::ref::device {

namespace rt = kgate::rt;

inline constexpr unsigned kThreads = 256;
// Rows of a GroupNorm group (or of one channel of a sample) one workgroup sums.
inline constexpr std::int64_t kChunkRows = 4096;

KGATE_DEVICE double absd(double v) { return v < 0.0 ? -v : (v == 0.0 ? 0.0 : v); }

// The global index of this work-item and the grid's width in work-items
// (grid-stride loops: the grid is capped, the element count is not).
KGATE_DEVICE std::int64_t global_index() {
  return static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
}
KGATE_DEVICE std::int64_t grid_width() { return static_cast<std::int64_t>(rt::grid_dim().x) * kThreads; }

// A planted defect (devref.hpp, Defect) arrives as its int value.
KGATE_DEVICE bool planted(int plant, Defect d) { return plant == static_cast<int>(d); }

// ---------------------------------------------------------------------------
// Convolutions

struct ConvArgs {
  detail::ConvGeom g;
  const double* a;
  const double* b;
  const double* bt;    // contract: b as [tap][clg][cs] (devref_transpose_w), else nullptr
  const double* bias;  // forward with bias, else nullptr
  double* want;        // the sum of the terms (+ bias)
  double* abs;         // the same sum on magnitudes: the absolute companion
  std::int64_t n_out, out_channels;
  int plant;
};

// One kernel per contraction kind (a compile-time constant: one loop nest
// per kernel, which keeps the geometry's registers within budget).
template <detail::Kind Kind>
KGATE_KERNEL_BOUNDS(devref_conv, kThreads, ConvArgs p) {
  for (std::int64_t e = global_index(); e < p.n_out; e += grid_width()) {
    Dot2 acc, aacc;
    detail::for_each_term(
        p.g, Kind, p.a, p.b, e,
        [&](double x, double y) {
          acc.add_prod(x, y);
          aacc.add_prod(absd(x), absd(y));
        },
        p.bt);
    if (planted(p.plant, Defect::bump_last) && e == p.n_out - 1) acc.add(1.0);
    if (p.bias) {
      const double bv = p.bias[e % p.out_channels];
      acc.add(bv);
      aacc.add(absd(bv));
    }
    p.want[e] = acc.value();
    p.abs[e] = aacc.value();
  }
}

// The contraction's weights [cs][inner] (inner = taps * clg) transposed to
// [inner][cs]: neighbouring work-items of devref_conv<contract> (neighbouring
// output channels) then read neighbouring weights.
KGATE_KERNEL_BOUNDS(devref_transpose_w, kThreads, const double* w, double* wt, std::int64_t cs, std::int64_t inner) {
  for (std::int64_t e = global_index(); e < cs * inner; e += grid_width()) wt[e] = w[(e % cs) * inner + e / cs];
}

// db[c] = the sum of dy's elements of channel c, in element order.
KGATE_KERNEL_BOUNDS(devref_conv_db, kThreads, const double* dy, std::int64_t count, std::int64_t channels,
                    double* want, double* abs) {
  const std::int64_t c = global_index();
  if (c >= channels) return;
  Dot2 acc, aacc;
  for (std::int64_t i = c; i < count; i += channels) {
    const double v = dy[i];
    acc.add(v);
    aacc.add(absd(v));
  }
  want[c] = acc.value();
  abs[c] = aacc.value();
}

// ---------------------------------------------------------------------------
// GroupNorm. x is [N][S][C] (S spatial positions), group g holds channels
// [g*Cg, (g+1)*Cg); statistics are [N][G].

struct GnShape {
  std::int64_t N, C, G, Cg, S, M, chunks;
  KGATE_DEVICE std::int64_t row(std::int64_t n, std::int64_t g, std::int64_t s) const { return (n * S + s) * C + g * Cg; }
};

// Every work-item of the workgroup calls it with its N Dot2 sums; work-item
// 0 gets the workgroup's, each merged in a fixed tree (the same on every
// backend). ls and lc hold N * kThreads doubles.
template <int N>
KGATE_DEVICE void block_merge(Dot2 (&d)[N], const rt::lds_array<double>& ls, const rt::lds_array<double>& lc) {
  const unsigned t = rt::thread_idx().x;
  for (int k = 0; k < N; ++k) {
    ls[k * kThreads + t] = d[k].s;
    lc[k * kThreads + t] = d[k].c;
  }
  rt::barrier();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride)
      for (int k = 0; k < N; ++k) {
        Dot2 a;
        a.s = ls[k * kThreads + t];
        a.c = lc[k * kThreads + t];
        Dot2 b;
        b.s = ls[k * kThreads + t + stride];
        b.c = lc[k * kThreads + t + stride];
        a.merge(b);
        ls[k * kThreads + t] = a.s;
        lc[k * kThreads + t] = a.c;
      }
    rt::barrier();
  }
  for (int k = 0; k < N; ++k) {
    d[k].s = ls[k * kThreads];
    d[k].c = lc[k * kThreads];
  }
}

// The partial sums of one chunk of rows of group (n, g) = (block y / G, block
// y % G): pass 0 sums x and |x|, pass 1 sums (x - mean)^2. part holds two
// Dot2 (4 doubles) per (group, chunk).
template <int Pass>
KGATE_KERNEL_BOUNDS(devref_gn_sums, kThreads, GnShape sh, const double* x, const double* mean, double* part, int plant) {
  KGATE_LDS(ls, double, 2 * kThreads);
  KGATE_LDS(lc, double, 2 * kThreads);
  const std::int64_t ng = rt::block_idx().y, chunk = rt::block_idx().x;
  const std::int64_t n = ng / sh.G, g = ng % sh.G;
  const std::int64_t s0 = chunk * kChunkRows;
  const std::int64_t s1 = s0 + kChunkRows < sh.S ? s0 + kChunkRows : sh.S;
  const std::int64_t count = (s1 - s0) * sh.Cg;
  const double mu = Pass == 1 ? mean[ng] : 0.0;
  Dot2 ab[2];
  Dot2& a = ab[0];
  Dot2& b = ab[1];
  if (!(planted(plant, Defect::skip_chunk) && chunk == sh.chunks - 1 && ng == 0 && Pass == 0))
    for (std::int64_t e = rt::thread_idx().x; e < count; e += kThreads) {
      const double v = x[sh.row(n, g, s0 + e / sh.Cg) + e % sh.Cg];
      if (Pass == 0) {
        a.add(v);
        b.add(absd(v));
      } else {
        const double d = v - mu;
        a.add(d * d);
      }
    }
  block_merge(ab, ls, lc);
  if (rt::thread_idx().x == 0) {
    double* o = part + (ng * sh.chunks + chunk) * 4;
    o[0] = a.s;
    o[1] = a.c;
    o[2] = b.s;
    o[3] = b.c;
  }
}

// Merges a group's chunks in order (accumulator `which` of devref_gn_sums).
KGATE_DEVICE Dot2 merge_chunks(const GnShape& sh, const double* part, std::int64_t ng, int which) {
  Dot2 t;
  for (std::int64_t k = 0; k < sh.chunks; ++k) {
    Dot2 d;
    d.s = part[(ng * sh.chunks + k) * 4 + 2 * which];
    d.c = part[(ng * sh.chunks + k) * 4 + 2 * which + 1];
    t.merge(d);
  }
  return t;
}

// Per group: pass 0 gives mean and mean |x| (PyTorch's mean for a group
// holding an infinity or a NaN: the value itself for one element, else NaN);
// pass 1 gives the biased variance, rstd and kappa = |mean| / sqrt(var + eps).
template <int Pass>
KGATE_KERNEL_BOUNDS(devref_gn_stats, kThreads, GnShape sh, const double* part, double eps, double* mean,
                    double* mean_abs, double* var, double* rstd, double* kappa) {
  const std::int64_t ng = global_index();
  if (ng >= sh.N * sh.G) return;
  const double M = static_cast<double>(sh.M);
  if (Pass == 0) {
    const double sum = merge_chunks(sh, part, ng, 0).value();
    mean[ng] = finite(sum) ? sum / M : (sh.M == 1 ? sum : (sum - sum));  // sum - sum: NaN
    mean_abs[ng] = merge_chunks(sh, part, ng, 1).value() / M;
  } else {
    const double v = merge_chunks(sh, part, ng, 0).value() / M;
    var[ng] = v;
    rstd[ng] = 1.0 / ::sqrt(v + eps);
    kappa[ng] = absd(mean[ng]) / ::sqrt(v + eps);
  }
}

// y (ReLU'd when relu), xhat = (x - mean) * rstd, and y's companion
// |gamma| |xhat| + |beta|. gamma, beta: nullptr without affine.
KGATE_KERNEL_BOUNDS(devref_gn_fwd_apply, kThreads, GnShape sh, const double* x, const double* gamma, const double* beta,
                    const double* mean, const double* rstd, int relu, double* y, double* xhat, double* abs_y) {
  const std::int64_t count = sh.N * sh.S * sh.C;
  for (std::int64_t i = global_index(); i < count; i += grid_width()) {
    const std::int64_t ch = i % sh.C, ng = (i / (sh.S * sh.C)) * sh.G + ch / sh.Cg;
    const double ga = gamma ? gamma[ch] : 1.0, be = beta ? beta[ch] : 0.0;
    const double v = (x[i] - mean[ng]) * rstd[ng] * ga + be;
    y[i] = relu ? (v != v ? v : (v > 0.0 ? v : 0.0)) : v;
    const double xh = (x[i] - mean[ng]) * rstd[ng];
    xhat[i] = xh;
    abs_y[i] = absd(ga) * absd(xh) + absd(be);
  }
}

// Backward: dy masked by [y_fwd > 0] when relu, y_fwd recomputed from the
// given statistics (the host references' one mask).
KGATE_DEVICE double masked_dy(double dy, double x, double mu, double r, double ga, double be, int relu) {
  return !relu || (x - mu) * r * ga + be > 0.0 ? dy : 0.0;
}

struct GnBwdArgs {
  GnShape sh;
  const double *x, *dy, *gamma, *beta, *mean, *rstd;  // mean, rstd: the given (forward's) statistics
  int relu;
  double* part;  // 6 Dot2 per (n, channel, chunk)
};

// The sums of one chunk of rows of channel ch of sample n (block y = n*C + ch):
// sum dy (x - mu), sum dy, and for the companion sum |dy| |xhat'|, sum |dy|,
// sum |gamma dy|, sum |gamma dy| |xhat'| (xhat' = (x - mu) r).
KGATE_KERNEL_BOUNDS(devref_gn_bwd_sums, kThreads, GnBwdArgs p) {
  KGATE_LDS(ls, double, 6 * kThreads);
  KGATE_LDS(lc, double, 6 * kThreads);
  const GnShape& sh = p.sh;
  const std::int64_t nc = rt::block_idx().y, chunk = rt::block_idx().x;
  const std::int64_t n = nc / sh.C, ch = nc % sh.C, ng = n * sh.G + ch / sh.Cg;
  const std::int64_t s0 = chunk * kChunkRows;
  const std::int64_t s1 = s0 + kChunkRows < sh.S ? s0 + kChunkRows : sh.S;
  const double mu = p.mean[ng], r = p.rstd[ng];
  const double ga = p.gamma ? p.gamma[ch] : 1.0, be = p.beta ? p.beta[ch] : 0.0;
  Dot2 acc[6];
  for (std::int64_t s = s0 + rt::thread_idx().x; s < s1; s += kThreads) {
    const std::int64_t i = (n * sh.S + s) * sh.C + ch;
    const double xv = p.x[i];
    const double d = masked_dy(p.dy[i], xv, mu, r, ga, be, p.relu);
    const double xhp = absd((xv - mu) * r);
    acc[0].add_prod(d, xv - mu);
    acc[1].add(d);
    acc[2].add(absd(d) * xhp);
    acc[3].add(absd(d));
    acc[4].add(absd(ga * d));
    acc[5].add(absd(ga * d) * xhp);
  }
  block_merge(acc, ls, lc);
  if (rt::thread_idx().x == 0)
    for (int k = 0; k < 6; ++k) {
      double* o = p.part + ((nc * sh.chunks + chunk) * 6 + k) * 2;
      o[0] = acc[k].s;
      o[1] = acc[k].c;
    }
}

// The sum `k` of channel ch of sample n, its chunks merged in order.
KGATE_DEVICE Dot2 bwd_total(const GnShape& sh, const double* part, std::int64_t nc, int k) {
  Dot2 t;
  for (std::int64_t c = 0; c < sh.chunks; ++c) {
    Dot2 d;
    d.s = part[((nc * sh.chunks + c) * 6 + k) * 2];
    d.c = part[((nc * sh.chunks + c) * 6 + k) * 2 + 1];
    t.merge(d);
  }
  return t;
}

// Per group (n, g): dx = r gamma dy + c2 (x - mu) + c3 with c2 = -sum1 r^3 / M,
// c3 = -sum2 r / M (sum1 = sum_c gamma_c sum dy (x - mu), sum2 = sum_c gamma_c
// sum dy), and the companion's group means of |gamma dy| and |gamma dy xhat'|.
// coef holds c2, c3, those two means per group; per (n, channel) sums: sums.
KGATE_KERNEL_BOUNDS(devref_gn_bwd_group, kThreads, GnBwdArgs p, double* coef, double* sums) {
  const GnShape& sh = p.sh;
  const std::int64_t ng = global_index();
  if (ng >= sh.N * sh.G) return;
  const std::int64_t n = ng / sh.G, g = ng % sh.G;
  const double r = p.rstd[ng], M = static_cast<double>(sh.M);
  Dot2 s1, s2, sg, sgx;
  for (std::int64_t c = 0; c < sh.Cg; ++c) {
    const std::int64_t ch = g * sh.Cg + c, nc = n * sh.C + ch;
    const double ga = p.gamma ? p.gamma[ch] : 1.0;
    const double a = bwd_total(sh, p.part, nc, 0).value(), b = bwd_total(sh, p.part, nc, 1).value();
    s1.add_prod(ga, a);
    s2.add_prod(ga, b);
    sg.merge(bwd_total(sh, p.part, nc, 4));
    sgx.merge(bwd_total(sh, p.part, nc, 5));
    sums[nc * 4 + 0] = a;
    sums[nc * 4 + 1] = b;
    sums[nc * 4 + 2] = bwd_total(sh, p.part, nc, 2).value();
    sums[nc * 4 + 3] = bwd_total(sh, p.part, nc, 3).value();
  }
  coef[ng * 4 + 0] = -s1.value() * r * r * r / M;
  coef[ng * 4 + 1] = -s2.value() * r / M;
  coef[ng * 4 + 2] = sg.value() / M;
  coef[ng * 4 + 3] = sgx.value() / M;
}

// Per channel: dgamma = sum_n sum dy (x - mu) r, dbeta = sum_n sum dy, and
// their companions sum_n sum |dy xhat'|, sum_n sum |dy|.
KGATE_KERNEL_BOUNDS(devref_gn_bwd_channel, kThreads, GnBwdArgs p, const double* sums, double* dgamma, double* dbeta,
                    double* abs_dgamma, double* abs_dbeta) {
  const GnShape& sh = p.sh;
  const std::int64_t ch = global_index();
  if (ch >= sh.C) return;
  Dot2 dg, db, adg, adb;
  for (std::int64_t n = 0; n < sh.N; ++n) {
    const std::int64_t nc = n * sh.C + ch;
    dg.add_prod(sums[nc * 4 + 0], p.rstd[n * sh.G + ch / sh.Cg]);
    db.add(sums[nc * 4 + 1]);
    adg.add(sums[nc * 4 + 2]);
    adb.add(sums[nc * 4 + 3]);
  }
  dgamma[ch] = dg.value();
  dbeta[ch] = db.value();
  abs_dgamma[ch] = adg.value();
  abs_dbeta[ch] = adb.value();
}

// dx and its companion r (|gamma dy| + mean_g |gamma dy| + |xhat'| mean_g |gamma dy xhat'|).
KGATE_KERNEL_BOUNDS(devref_gn_bwd_apply, kThreads, GnBwdArgs p, const double* coef, double* dx, double* abs_dx) {
  const GnShape& sh = p.sh;
  const std::int64_t count = sh.N * sh.S * sh.C;
  for (std::int64_t i = global_index(); i < count; i += grid_width()) {
    const std::int64_t ch = i % sh.C, ng = (i / (sh.S * sh.C)) * sh.G + ch / sh.Cg;
    const double mu = p.mean[ng], r = p.rstd[ng];
    const double ga = p.gamma ? p.gamma[ch] : 1.0, be = p.beta ? p.beta[ch] : 0.0;
    const double xv = p.x[i];
    const double d = masked_dy(p.dy[i], xv, mu, r, ga, be, p.relu);
    dx[i] = r * ga * d + coef[ng * 4 + 0] * (xv - mu) + coef[ng * 4 + 1];
    abs_dx[i] = r * (absd(ga * d) + coef[ng * 4 + 2] + absd((xv - mu) * r) * coef[ng * 4 + 3]);
  }
}

}  // namespace kgate::ref::device
