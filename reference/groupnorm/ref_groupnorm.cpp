#include "reference/groupnorm/ref_groupnorm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/error.hpp"
#include "reference/mpfr_round.hpp"

namespace kgate::ref {

namespace {

std::string what(const GroupNormProblem& p) { return op_dir_name(Problem{p}) + " reference"; }

// Shape facts of a problem. Element (n, s, c) of x is at (n*S + s)*C + c; the
// group (n, g) is rows s = 0..S-1, channels [g*Cg, (g+1)*Cg).
struct Shape {
  std::int64_t N, C, G, Cg, S, M;
  explicit Shape(const GroupNormProblem& p)
      : N(p.n), C(p.c), G(p.groups), Cg(p.c / p.groups), S(p.spatial[0] * p.spatial[1] * p.spatial[2]),
        M(p.group_size()) {}
  std::int64_t row(std::int64_t n, std::int64_t g, std::int64_t s) const { return (n * S + s) * C + g * Cg; }
};

F64Vector gamma_of(const GroupNormProblem& p, const Inputs& in) {
  return p.affine ? to_f64(at(in, Role::gamma)) : F64Vector(static_cast<std::size_t>(p.c), 1.0);
}
F64Vector beta_of(const GroupNormProblem& p, const Inputs& in) {
  return p.affine ? to_f64(at(in, Role::beta)) : F64Vector(static_cast<std::size_t>(p.c), 0.0);
}

// The mean of a group from the IEEE sum of its M values. A group holding an
// infinity or a NaN (a non-finite sum) gets PyTorch's mean, whose running
// (Welford) update turns a second value after an infinity into NaN (Inf - Inf
// or Inf + NaN): the value itself for a one-element group, NaN otherwise.
double group_mean(double sum, std::int64_t M) {
  if (std::isfinite(sum)) return sum / static_cast<double>(M);
  return M == 1 ? sum : std::numeric_limits<double>::quiet_NaN();
}

// The fused ReLU: -0 becomes +0, NaN stays NaN.
double relu(double y) { return std::isnan(y) ? y : (y > 0.0 ? y : 0.0); }

// Whether backward keeps dy: [y_fwd > 0], y_fwd recomputed in fp64 from the
// given statistics. Every implementation uses this one mask.
bool relu_keeps(double x, double mu, double r, double gamma, double beta) {
  return (x - mu) * r * gamma + beta > 0.0;
}

// ---------------------------------------------------------------------------
// direct: the formulas as written.

Outputs fwd_direct(const GroupNormProblem& p, const Inputs& in) {
  const Shape sh(p);
  const F64Vector x = to_f64(at(in, Role::x)), ga = gamma_of(p, in), be = beta_of(p, in);
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, f64_like(s.dims));
  double* y = out.at(Role::y).as<double>();
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g) {
      double sum = 0.0;
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) sum += x[static_cast<std::size_t>(sh.row(n, g, s) + c)];
      const double mean = group_mean(sum, sh.M);
      double sq = 0.0;
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const double d = x[static_cast<std::size_t>(sh.row(n, g, s) + c)] - mean;
          sq += d * d;
        }
      const double var = sq / static_cast<double>(sh.M);
      const double rstd = 1.0 / std::sqrt(var + p.eps);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c, ch = g * sh.Cg + c;
          const double v = (x[static_cast<std::size_t>(i)] - mean) * rstd * ga[static_cast<std::size_t>(ch)] +
                           be[static_cast<std::size_t>(ch)];
          y[i] = p.relu ? relu(v) : v;
        }
      out.at(Role::mean).set(n * sh.G + g, mean);
      out.at(Role::rstd).set(n * sh.G + g, rstd);
    }
  return out;
}

Outputs bwd_direct(const GroupNormProblem& p, const Inputs& in) {
  const Shape sh(p);
  const F64Vector x = to_f64(at(in, Role::x)), dy_in = to_f64(at(in, Role::dy));
  const F64Vector ga = gamma_of(p, in), be = beta_of(p, in);
  const F64Vector mean = to_f64(at(in, Role::mean)), rstd = to_f64(at(in, Role::rstd));
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, f64_like(s.dims));
  double* dx = out.at(Role::dx).as<double>();
  std::vector<double> dgamma(static_cast<std::size_t>(sh.C), 0.0), dbeta(static_cast<std::size_t>(sh.C), 0.0);
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g) {
      const double mu = mean[static_cast<std::size_t>(n * sh.G + g)], r = rstd[static_cast<std::size_t>(n * sh.G + g)];
      auto dy = [&](std::int64_t i, std::int64_t ch) {
        const double v = dy_in[static_cast<std::size_t>(i)];
        if (!p.relu) return v;
        return relu_keeps(x[static_cast<std::size_t>(i)], mu, r, ga[static_cast<std::size_t>(ch)],
                          be[static_cast<std::size_t>(ch)])
                   ? v
                   : 0.0;
      };
      double sum1 = 0.0, sum2 = 0.0;
      for (std::int64_t c = 0; c < sh.Cg; ++c) {
        const std::int64_t ch = g * sh.Cg + c;
        double sdyx = 0.0, sdy = 0.0;
        for (std::int64_t s = 0; s < sh.S; ++s) {
          const std::int64_t i = sh.row(n, g, s) + c;
          sdyx += dy(i, ch) * x[static_cast<std::size_t>(i)];
          sdy += dy(i, ch);
        }
        sum1 += ga[static_cast<std::size_t>(ch)] * sdyx;
        sum2 += ga[static_cast<std::size_t>(ch)] * sdy;
        dgamma[static_cast<std::size_t>(ch)] += (sdyx - sdy * mu) * r;
        dbeta[static_cast<std::size_t>(ch)] += sdy;
      }
      const double M = static_cast<double>(sh.M);
      const double c2 = (sum2 * mu - sum1) * r * r * r / M;
      const double c3 = -c2 * mu - sum2 * r / M;
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c, ch = g * sh.Cg + c;
          dx[i] = r * ga[static_cast<std::size_t>(ch)] * dy(i, ch) + c2 * x[static_cast<std::size_t>(i)] + c3;
        }
    }
  if (p.affine)
    for (std::int64_t c = 0; c < sh.C; ++c) {
      out.at(Role::dgamma).set(c, dgamma[static_cast<std::size_t>(c)]);
      out.at(Role::dbeta).set(c, dbeta[static_cast<std::size_t>(c)]);
    }
  return out;
}

// ---------------------------------------------------------------------------
// fast: compensated two-pass, threaded over (n, g), reading rows on the fly.

struct Stats {
  std::vector<double> mean, var, rstd, mean_abs;
};

Stats stats_fast(const GroupNormProblem& p, const Tensor& xt) {
  const Shape sh(p);
  Stats st;
  const std::size_t ng = static_cast<std::size_t>(sh.N * sh.G);
  st.mean.resize(ng);
  st.var.resize(ng);
  st.rstd.resize(ng);
  st.mean_abs.resize(ng);
  parallel_for(sh.N * sh.G, [&](std::int64_t item, int) {
    const std::int64_t n = item / sh.G, g = item % sh.G;
    std::vector<double> row(static_cast<std::size_t>(sh.Cg));
    // kLanes independent compensated sums (element j of a row goes to lane
    // j % kLanes) break the loop-carried dependency of one long TwoSum chain;
    // the lanes are then combined with another compensated sum.
    constexpr std::size_t kLanes = 8;
    Dot2 sum[kLanes], sum_abs[kLanes], sq[kLanes];
    // A group holding an infinity sums to the IEEE sum (+-Inf, or NaN for
    // both signs; group_mean): the lanes' error terms are then NaN and left
    // out.
    auto total = [](const Dot2* lanes) {
      Dot2 t;
      for (std::size_t l = 0; l < kLanes; ++l) t.add(lanes[l].s);
      if (std::isfinite(t.s))
        for (std::size_t l = 0; l < kLanes; ++l) t.add(lanes[l].c);
      return t.value();
    };
    for (std::int64_t s = 0; s < sh.S; ++s) {
      load_run(xt, sh.row(n, g, s), sh.Cg, row.data());
      for (std::size_t j = 0; j < row.size(); ++j) {
        sum[j % kLanes].add(row[j]);
        sum_abs[j % kLanes].add(std::fabs(row[j]));
      }
    }
    const double M = static_cast<double>(sh.M);
    const double mean = group_mean(total(sum), sh.M);
    for (std::int64_t s = 0; s < sh.S; ++s) {
      load_run(xt, sh.row(n, g, s), sh.Cg, row.data());
      for (std::size_t j = 0; j < row.size(); ++j) {
        const double d = row[j] - mean;
        sq[j % kLanes].add(d * d);  // nonnegative terms: the products' roundings cost u relative in all
      }
    }
    const std::size_t k = static_cast<std::size_t>(item);
    st.mean[k] = mean;
    st.var[k] = total(sq) / M;
    st.rstd[k] = 1.0 / std::sqrt(st.var[k] + p.eps);
    st.mean_abs[k] = total(sum_abs) / M;
  });
  return st;
}

Outputs fwd_fast(const GroupNormProblem& p, const Inputs& in) {
  const Shape sh(p);
  const Tensor& xt = at(in, Role::x);
  const F64Vector ga = gamma_of(p, in), be = beta_of(p, in);
  const Stats st = stats_fast(p, xt);
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, f64_like(s.dims));
  double* y = out.at(Role::y).as<double>();
  constexpr std::int64_t kRows = 4096;
  const std::int64_t chunks = (sh.S + kRows - 1) / kRows;
  parallel_for(sh.N * sh.G * chunks, [&](std::int64_t item, int) {
    const std::int64_t ng = item / chunks, chunk = item % chunks, n = ng / sh.G, g = ng % sh.G;
    const double mean = st.mean[static_cast<std::size_t>(ng)], rstd = st.rstd[static_cast<std::size_t>(ng)];
    const std::int64_t s1 = std::min(sh.S, (chunk + 1) * kRows);
    std::vector<double> xr(static_cast<std::size_t>(sh.Cg));
    const double* gg = ga.data() + g * sh.Cg;
    const double* bb = be.data() + g * sh.Cg;
    for (std::int64_t s = chunk * kRows; s < s1; ++s) {
      double* yr = y + sh.row(n, g, s);
      load_run(xt, sh.row(n, g, s), sh.Cg, xr.data());
      for (std::int64_t c = 0; c < sh.Cg; ++c) {
        const double v = (xr[static_cast<std::size_t>(c)] - mean) * rstd * gg[c] + bb[c];
        yr[c] = p.relu ? relu(v) : v;
      }
    }
  });
  for (std::int64_t k = 0; k < sh.N * sh.G; ++k) {
    out.at(Role::mean).set(k, st.mean[static_cast<std::size_t>(k)]);
    out.at(Role::rstd).set(k, st.rstd[static_cast<std::size_t>(k)]);
  }
  return out;
}

Outputs bwd_fast(const GroupNormProblem& p, const Inputs& in) {
  const Shape sh(p);
  const Tensor& xt = at(in, Role::x);
  const Tensor& dyt = at(in, Role::dy);
  const F64Vector ga = gamma_of(p, in), be = beta_of(p, in);
  const F64Vector mean = to_f64(at(in, Role::mean)), rstd = to_f64(at(in, Role::rstd));
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, f64_like(s.dims));
  double* dx = out.at(Role::dx).as<double>();
  // Per (n, g, channel): sum(dy*(x - mu)) and sum(dy), reduced over n in order.
  std::vector<double> sdyxc(static_cast<std::size_t>(sh.N * sh.C)), sdy(static_cast<std::size_t>(sh.N * sh.C));
  parallel_for(sh.N * sh.G, [&](std::int64_t item, int) {
    const std::int64_t n = item / sh.G, g = item % sh.G;
    const double mu = mean[static_cast<std::size_t>(item)], r = rstd[static_cast<std::size_t>(item)];
    const std::size_t cg = static_cast<std::size_t>(sh.Cg);
    std::vector<double> xr(cg), dyr(cg);
    std::vector<Dot2> a(cg), b(cg);
    auto load = [&](std::int64_t s) {
      load_run(xt, sh.row(n, g, s), sh.Cg, xr.data());
      load_run(dyt, sh.row(n, g, s), sh.Cg, dyr.data());
      if (p.relu)
        for (std::size_t c = 0; c < cg; ++c) {
          const std::size_t ch = static_cast<std::size_t>(g * sh.Cg) + c;
          if (!relu_keeps(xr[c], mu, r, ga[ch], be[ch])) dyr[c] = 0.0;
        }
    };
    for (std::int64_t s = 0; s < sh.S; ++s) {
      load(s);
      for (std::size_t c = 0; c < cg; ++c) {
        a[c].add_prod(dyr[c], xr[c] - mu);
        b[c].add(dyr[c]);
      }
    }
    Dot2 s1c, s2;  // sum_c gamma_c * sum(dy*(x - mu)), sum_c gamma_c * sum(dy)
    for (std::size_t c = 0; c < cg; ++c) {
      const std::size_t ch = static_cast<std::size_t>(g * sh.Cg) + c;
      const double av = a[c].value(), bv = b[c].value();
      s1c.add_prod(ga[ch], av);
      s2.add_prod(ga[ch], bv);
      sdyxc[static_cast<std::size_t>(n * sh.C) + ch] = av;
      sdy[static_cast<std::size_t>(n * sh.C) + ch] = bv;
    }
    const double M = static_cast<double>(sh.M);
    // dx = r*gamma*dy + c2*(x - mu) + c3', c2 = -sum1c*r^3/M, c3' = -sum2*r/M
    const double c2 = -s1c.value() * r * r * r / M;
    const double c3 = -s2.value() * r / M;
    for (std::int64_t s = 0; s < sh.S; ++s) {
      load(s);
      double* o = dx + sh.row(n, g, s);
      for (std::size_t c = 0; c < cg; ++c) {
        const std::size_t ch = static_cast<std::size_t>(g * sh.Cg) + c;
        o[c] = r * ga[ch] * dyr[c] + c2 * (xr[c] - mu) + c3;
      }
    }
  });
  if (p.affine)
    for (std::int64_t c = 0; c < sh.C; ++c) {
      Dot2 dg, db;
      for (std::int64_t n = 0; n < sh.N; ++n) {
        const std::size_t k = static_cast<std::size_t>(n * sh.C + c);
        dg.add_prod(sdyxc[k], rstd[static_cast<std::size_t>(n * sh.G + c / sh.Cg)]);
        db.add(sdy[k]);
      }
      out.at(Role::dgamma).set(c, dg.value());
      out.at(Role::dbeta).set(c, db.value());
    }
  return out;
}

// ---------------------------------------------------------------------------
// mpfr

struct Mp {
  mpfr_t v;
  explicit Mp(mpfr_prec_t prec) { mpfr_init2(v, prec); mpfr_set_zero(v, 1); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
  operator mpfr_ptr() { return v; }
};

mpfr_prec_t work_precision(std::int64_t M, mpfr_prec_t exact) {
  const mpfr_prec_t lg = static_cast<mpfr_prec_t>(std::ceil(std::log2(static_cast<double>(M) + 2)));
  return std::max<mpfr_prec_t>(256 + lg, exact + 64);
}

Outputs fwd_mpfr(const GroupNormProblem& p, const Inputs& in, DType t) {
  const Shape sh(p);
  const Tensor& xt = at(in, Role::x);
  check_mpfr_size(4.0 * static_cast<double>(xt.numel()), what(p));
  const F64Vector x = to_f64(xt), ga = gamma_of(p, in), be = beta_of(p, in);
  const mpfr_prec_t exact = exact_precision(std::nullopt, std::nullopt, exp_range(xt), static_cast<double>(sh.M));
  const mpfr_prec_t P = work_precision(sh.M, exact);
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, Tensor(t, s.dims));
  Tensor& y = out.at(Role::y);
  Mp sum(P), mean(P), acc(P), d(P), var(P), rs(P), v(P);
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g) {
      mpfr_set_zero(sum, 1);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c)
          mpfr_add_d(sum, sum, x[static_cast<std::size_t>(sh.row(n, g, s) + c)], MPFR_RNDN);  // exact
      mpfr_div_si(mean, sum, static_cast<long>(sh.M), MPFR_RNDN);
      if (!mpfr_number_p(sum)) mpfr_set_d(mean, group_mean(mpfr_get_d(sum, MPFR_RNDN), sh.M), MPFR_RNDN);
      mpfr_set_zero(acc, 1);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          mpfr_d_sub(d, x[static_cast<std::size_t>(sh.row(n, g, s) + c)], mean, MPFR_RNDN);
          mpfr_fma(acc, d, d, acc, MPFR_RNDN);
        }
      mpfr_div_si(var, acc, static_cast<long>(sh.M), MPFR_RNDN);
      mpfr_add_d(rs, var, p.eps, MPFR_RNDN);
      mpfr_rec_sqrt(rs, rs, MPFR_RNDN);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c, ch = g * sh.Cg + c;
          mpfr_d_sub(v, x[static_cast<std::size_t>(i)], mean, MPFR_RNDN);
          mpfr_mul(v, v, rs, MPFR_RNDN);
          mpfr_mul_d(v, v, ga[static_cast<std::size_t>(ch)], MPFR_RNDN);
          mpfr_add_d(v, v, be[static_cast<std::size_t>(ch)], MPFR_RNDN);
          if (p.relu && !mpfr_nan_p(v) && mpfr_sgn(v) <= 0) mpfr_set_zero(v, 1);
          y.set(i, mpfr_round_to(v, t));
        }
      out.at(Role::mean).set(n * sh.G + g, mpfr_round_to(mean, t));
      out.at(Role::rstd).set(n * sh.G + g, mpfr_round_to(rs, t));
    }
  return out;
}

Outputs bwd_mpfr(const GroupNormProblem& p, const Inputs& in, DType t) {
  const Shape sh(p);
  const Tensor& xt = at(in, Role::x);
  const Tensor& dyt = at(in, Role::dy);
  check_mpfr_size(6.0 * static_cast<double>(xt.numel()), what(p));
  const F64Vector x = to_f64(xt), dy_in = to_f64(dyt), ga = gamma_of(p, in), be = beta_of(p, in);
  const F64Vector mean = to_f64(at(in, Role::mean)), rstd = to_f64(at(in, Role::rstd));
  const mpfr_prec_t exact =
      exact_precision(exp_range(dyt), exp_range(xt), exp_range(dyt), static_cast<double>(sh.M * sh.N) + 1);
  const mpfr_prec_t P = work_precision(sh.M, exact);
  Outputs out;
  for (const auto& s : p.outputs()) out.emplace(s.role, Tensor(t, s.dims));
  Tensor& dx = out.at(Role::dx);
  F64Vector dy(dy_in.size());
  std::vector<std::unique_ptr<Mp>> dgamma, dbeta;
  for (std::int64_t c = 0; c < sh.C; ++c) {
    dgamma.push_back(std::make_unique<Mp>(P));
    dbeta.push_back(std::make_unique<Mp>(P));
  }
  Mp sdyx(P), sdy(P), sum1(P), sum2(P), tmp(P), r3(P), c2(P), c3(P), v(P), mu(P), r(P);
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g) {
      const double mud = mean[static_cast<std::size_t>(n * sh.G + g)], rd = rstd[static_cast<std::size_t>(n * sh.G + g)];
      mpfr_set_d(mu, mud, MPFR_RNDN);
      mpfr_set_d(r, rd, MPFR_RNDN);
      mpfr_set_zero(sum1, 1);
      mpfr_set_zero(sum2, 1);
      for (std::int64_t c = 0; c < sh.Cg; ++c) {
        const std::int64_t ch = g * sh.Cg + c;
        const double gc = ga[static_cast<std::size_t>(ch)];
        mpfr_set_zero(sdyx, 1);
        mpfr_set_zero(sdy, 1);
        for (std::int64_t s = 0; s < sh.S; ++s) {
          const std::size_t i = static_cast<std::size_t>(sh.row(n, g, s) + c);
          double dv = dy_in[i];
          if (p.relu && !relu_keeps(x[i], mud, rd, gc, be[static_cast<std::size_t>(ch)])) dv = 0.0;
          dy[i] = dv;
          mpfr_set_d(tmp, dv, MPFR_RNDN);
          mpfr_mul_d(tmp, tmp, x[i], MPFR_RNDN);  // exact: P >= 106
          mpfr_add(sdyx, sdyx, tmp, MPFR_RNDN);   // exact: P >= exact
          mpfr_add_d(sdy, sdy, dv, MPFR_RNDN);
        }
        mpfr_mul_d(tmp, sdyx, gc, MPFR_RNDN);
        mpfr_add(sum1, sum1, tmp, MPFR_RNDN);
        mpfr_mul_d(tmp, sdy, gc, MPFR_RNDN);
        mpfr_add(sum2, sum2, tmp, MPFR_RNDN);
        // dgamma_c += (sdyx - sdy*mu) * r; dbeta_c += sdy
        mpfr_mul(tmp, sdy, mu, MPFR_RNDN);
        mpfr_sub(tmp, sdyx, tmp, MPFR_RNDN);
        mpfr_mul(tmp, tmp, r, MPFR_RNDN);
        mpfr_add(*dgamma[static_cast<std::size_t>(ch)], *dgamma[static_cast<std::size_t>(ch)], tmp, MPFR_RNDN);
        mpfr_add(*dbeta[static_cast<std::size_t>(ch)], *dbeta[static_cast<std::size_t>(ch)], sdy, MPFR_RNDN);
      }
      // c2 = (sum2*mu - sum1) * r^3 / M;  c3 = -c2*mu - sum2*r/M
      mpfr_mul(r3, r, r, MPFR_RNDN);
      mpfr_mul(r3, r3, r, MPFR_RNDN);
      mpfr_mul(c2, sum2, mu, MPFR_RNDN);
      mpfr_sub(c2, c2, sum1, MPFR_RNDN);
      mpfr_mul(c2, c2, r3, MPFR_RNDN);
      mpfr_div_si(c2, c2, static_cast<long>(sh.M), MPFR_RNDN);
      mpfr_mul(c3, c2, mu, MPFR_RNDN);
      mpfr_mul(tmp, sum2, r, MPFR_RNDN);
      mpfr_div_si(tmp, tmp, static_cast<long>(sh.M), MPFR_RNDN);
      mpfr_add(c3, c3, tmp, MPFR_RNDN);
      mpfr_neg(c3, c3, MPFR_RNDN);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c, ch = g * sh.Cg + c;
          // dx = r*gamma*dy + c2*x + c3
          mpfr_mul_d(v, r, ga[static_cast<std::size_t>(ch)], MPFR_RNDN);
          mpfr_mul_d(v, v, dy[static_cast<std::size_t>(i)], MPFR_RNDN);
          mpfr_mul_d(tmp, c2, x[static_cast<std::size_t>(i)], MPFR_RNDN);
          mpfr_add(v, v, tmp, MPFR_RNDN);
          mpfr_add(v, v, c3, MPFR_RNDN);
          dx.set(i, mpfr_round_to(v, t));
        }
    }
  if (p.affine)
    for (std::int64_t c = 0; c < sh.C; ++c) {
      out.at(Role::dgamma).set(c, mpfr_round_to(*dgamma[static_cast<std::size_t>(c)], t));
      out.at(Role::dbeta).set(c, mpfr_round_to(*dbeta[static_cast<std::size_t>(c)], t));
    }
  return out;
}

Outputs run(const GroupNormProblem& p, const Inputs& in, Impl impl, DType mp_round) {
  p.validate();
  check_inputs(p.inputs(), in, what(p));
  const bool fwd = p.dir == GnDir::fwd;
  switch (impl) {
    case Impl::direct: return fwd ? fwd_direct(p, in) : bwd_direct(p, in);
    case Impl::fast:
    case Impl::dot2: return fwd ? fwd_fast(p, in) : bwd_fast(p, in);
    case Impl::mpfr: return fwd ? fwd_mpfr(p, in, mp_round) : bwd_mpfr(p, in, mp_round);
  }
  return {};
}

}  // namespace

Outputs groupnorm(const GroupNormProblem& p, const Inputs& in, Impl impl) { return run(p, in, impl, DType::fp64); }

Outputs groupnorm_mpfr_rounded(const GroupNormProblem& p, const Inputs& in, DType t) {
  return run(p, in, Impl::mpfr, t);
}

Outputs groupnorm_derived_inputs(const GroupNormProblem& bwd, const Inputs& in, Impl impl) {
  GroupNormProblem fwd = bwd;
  fwd.dir = GnDir::fwd;
  Inputs fin;
  for (const auto& s : fwd.inputs()) fin.emplace(s.role, std::cref(at(in, s.role)));
  // The statistics specs share one dtype (fp32); MPFR rounds once to it.
  DType t = DType::fp64;
  for (const auto& s : bwd.inputs())
    if (s.derived) t = s.dtype;
  const Outputs o = impl == Impl::mpfr ? groupnorm_mpfr_rounded(fwd, fin, t) : groupnorm(fwd, fin, impl);
  Outputs result;
  for (const auto& s : bwd.inputs())
    if (s.derived) result.emplace(s.role, o.at(s.role).to(s.dtype));
  return result;
}

GroupNormCompanion groupnorm_companion(const GroupNormProblem& p, const Inputs& in) {
  p.validate();
  check_inputs(p.inputs(), in, what(p));
  const Shape sh(p);
  const Tensor& xt = at(in, Role::x);
  const F64Vector ga = gamma_of(p, in), be = beta_of(p, in);
  const Stats st = stats_fast(p, xt);
  GroupNormCompanion r;
  r.group_size = sh.M;
  const Dims sd{sh.N, sh.G};
  r.mean = f64_like(sd);
  r.var = f64_like(sd);
  r.rstd = f64_like(sd);
  r.mean_abs = f64_like(sd);
  r.kappa = f64_like(sd);
  for (std::int64_t k = 0; k < sh.N * sh.G; ++k) {
    const std::size_t u = static_cast<std::size_t>(k);
    r.mean.set(k, st.mean[u]);
    r.var.set(k, st.var[u]);
    r.rstd.set(k, st.rstd[u]);
    r.mean_abs.set(k, st.mean_abs[u]);
    r.kappa.set(k, std::fabs(st.mean[u]) / std::sqrt(st.var[u] + p.eps));
  }
  const F64Vector x = to_f64(xt);
  r.xhat = f64_like(xt.dims());
  double* xh = r.xhat.as<double>();
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g)
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c;
          const std::size_t k = static_cast<std::size_t>(n * sh.G + g);
          xh[i] = (x[static_cast<std::size_t>(i)] - st.mean[k]) * st.rstd[k];
        }
  for (const auto& s : p.outputs()) r.abs.emplace(s.role, f64_like(s.dims));
  if (p.dir == GnDir::fwd) {
    double* y = r.abs.at(Role::y).as<double>();
    for (std::int64_t i = 0; i < xt.numel(); ++i) {
      const std::size_t ch = static_cast<std::size_t>(i % sh.C);
      y[i] = std::fabs(ga[ch]) * std::fabs(xh[i]) + std::fabs(be[ch]);
    }
    for (std::int64_t k = 0; k < sh.N * sh.G; ++k) {
      r.abs.at(Role::mean).set(k, st.mean_abs[static_cast<std::size_t>(k)]);
      r.abs.at(Role::rstd).set(k, st.rstd[static_cast<std::size_t>(k)]);
    }
    return r;
  }
  const F64Vector dy_in = to_f64(at(in, Role::dy));
  const F64Vector mean = to_f64(at(in, Role::mean)), rstd = to_f64(at(in, Role::rstd));
  double* adx = r.abs.at(Role::dx).as<double>();
  std::vector<double> adg(static_cast<std::size_t>(sh.C), 0.0), adb(static_cast<std::size_t>(sh.C), 0.0);
  for (std::int64_t n = 0; n < sh.N; ++n)
    for (std::int64_t g = 0; g < sh.G; ++g) {
      const double mu = mean[static_cast<std::size_t>(n * sh.G + g)], rr = rstd[static_cast<std::size_t>(n * sh.G + g)];
      auto dy = [&](std::int64_t i) {
        const std::size_t ch = static_cast<std::size_t>(i % sh.C);
        const double v = dy_in[static_cast<std::size_t>(i)];
        return !p.relu || relu_keeps(x[static_cast<std::size_t>(i)], mu, rr, ga[ch], be[ch]) ? v : 0.0;
      };
      double s_gdy = 0.0, s_gdyx = 0.0;
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c;
          const std::size_t ch = static_cast<std::size_t>(g * sh.Cg + c);
          const double xhp = std::fabs((x[static_cast<std::size_t>(i)] - mu) * rr);
          const double a = std::fabs(ga[ch] * dy(i));
          s_gdy += a;
          s_gdyx += a * xhp;
          adg[ch] += std::fabs(dy(i)) * xhp;
          adb[ch] += std::fabs(dy(i));
        }
      const double M = static_cast<double>(sh.M);
      for (std::int64_t s = 0; s < sh.S; ++s)
        for (std::int64_t c = 0; c < sh.Cg; ++c) {
          const std::int64_t i = sh.row(n, g, s) + c;
          const std::size_t ch = static_cast<std::size_t>(g * sh.Cg + c);
          const double xhp = std::fabs((x[static_cast<std::size_t>(i)] - mu) * rr);
          adx[i] = rr * (std::fabs(ga[ch] * dy(i)) + s_gdy / M + xhp * s_gdyx / M);
        }
    }
  if (p.affine)
    for (std::int64_t c = 0; c < sh.C; ++c) {
      r.abs.at(Role::dgamma).set(c, adg[static_cast<std::size_t>(c)]);
      r.abs.at(Role::dbeta).set(c, adb[static_cast<std::size_t>(c)]);
    }
  return r;
}

}  // namespace kgate::ref
