// GroupNorm tolerances (docs/NUMERICS.md, GroupNorm) and compare_groupnorm.
//
// Notation per (n, g): M elements, mu = mean, r = rstd, var (biased),
// meanabs = mean |x|; u = unit roundoff of the fp32 arithmetic (or of
// plan.acc), D = plan.depth() of the group reduction, g_c = gamma_c (1 when
// !affine), u_out = output_u(dst).
//
// Forward y: see oracle.hpp. Statistics outputs: mean within
// gamma_{D+1} meanabs (+ u|mu| for the fp32 store), rstd within
// r (0.5 dvar + 4u).
//
// Backward (derivation). With the fed mu, r (exact inputs to both sides):
//   sum1 = sum_i g_c dy_i x_i,  sum2 = sum_i g_c dy_i      (over the group)
//   T = sum2 mu - sum1,  c2 = T r^3 / M,  c3 = -c2 mu - sum2 r / M
//   dx_i = r g_c dy_i + c2 x_i + c3.
// First-order error propagation, each operation rounding once in u:
//   d_sum1 <= gamma_{D+2} S1 (S1 = sum |g dy x|: two multiplies then D adds)
//   d_sum2 <= gamma_{D+1} S2 (S2 = sum |g dy|)
//   d_T  <= |mu| d_sum2 + d_sum1 + gamma_2 (|sum2 mu| + |sum1|)
//   d_c2 <= (d_T + gamma_6 (|T| + d_T)) r^3 / M          (r*r*r*T/M in any order)
//   d_c3 <= d_c2 |mu| + d_sum2 r / M + gamma_6 (|c2 mu| + |sum2| r / M)
//   d_dx_i <= d_c2 |x_i| + d_c3 + gamma_6 (r |g dy_i| + |c2 x_i| + |c3|)
// and the result is multiplied by (1 + 8u) for the second-order terms, then
// u_out |dx_i| + eta_out is added for the store (eta_out: half the subnormal
// quantum of dx's dtype, output_subnormal_floor; y's bound adds it too). dgamma_c = sum_n r (sum dy x - mu
// sum dy) is bounded by gamma_{D+4} sum_n r sum |dy| (|x| + |mu|) and
// dbeta_c = sum dy by gamma_D sum |dy|, D the depth of the per-channel
// reduction over N*D*H*W. With the fused ReLU, dy is masked by [y_fwd > 0]
// as the reference does; elements whose y_fwd lies within a forward tolerance
// of 0 may be masked either way by a correct kernel and add their full |term|
// to the bounds (relu_mask below).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "oracles/bounds.hpp"
#include "oracles/oracle.hpp"
#include "reference/parallel.hpp"
#include "reference/descriptor.hpp"

namespace kgate::oracle {

namespace {

double get_or(const Tensor* t, std::int64_t i, double dflt) { return t ? t->get(i) : dflt; }

// Sums of `width` accumulators over the elements [0, n): fn(i, acc) adds
// element i's terms into acc[0, width). One partial per chunk of elements,
// merged in chunk order (reference/parallel.hpp): the same sums for any
// number of element threads.
template <class F>
std::vector<double> chunked_sums(std::int64_t n, std::size_t width, const F& fn) {
  std::vector<std::vector<double>> parts(static_cast<std::size_t>(chunk_count(n)));
  parallel_chunks(n, [&](std::int64_t lo, std::int64_t hi, std::int64_t chunk) {
    std::vector<double> acc(width, 0.0);
    for (std::int64_t i = lo; i < hi; ++i) fn(i, acc.data());
    parts[static_cast<std::size_t>(chunk)] = std::move(acc);
  });
  std::vector<double> total(width, 0.0);
  for (const auto& part : parts)
    for (std::size_t k = 0; k < width; ++k) total[k] += part[k];
  return total;
}

// Backward with the fused ReLU: dy is masked by [y_fwd > 0], y_fwd recomputed
// from x and the fed mean, rstd, gamma, beta (reference/groupnorm). A kernel
// recomputes y_fwd in its own arithmetic, so where |y_fwd| is within the
// forward tolerance the mask is ambiguous: such elements count with either
// mask (their |dy| terms are added to the uncertainty of every sum).
struct ReluMask {
  std::vector<char> on, ambiguous;
};
ReluMask relu_mask(const GroupNormProblem& p, const GroupNormInputs& in, double u) {
  const std::int64_t n = in.x->numel(), C = p.c, G = p.groups, Cg = C / G;
  const std::int64_t S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  ReluMask m;
  m.on.assign(n, 1);
  m.ambiguous.assign(n, 0);
  if (!p.relu) return m;
  const double g8 = gamma(8, u);
  for_each_element(n, [&](std::int64_t i) {
    const std::int64_t ch = i % C, ng = (i / (S * C)) * G + ch / Cg;
    const double mu = in.mean->get(ng), r = in.rstd->get(ng), x = in.x->get(i);
    const double g = get_or(in.gamma, ch, 1.0), b = get_or(in.beta, ch, 0.0);
    const double y = g * ((x - mu) * r) + b;
    const double tol = g8 * (std::fabs(g) * r * (std::fabs(x) + std::fabs(mu)) + std::fabs(b));
    m.on[i] = y > 0;
    m.ambiguous[i] = std::fabs(y) <= tol;
  });
  return m;
}

}  // namespace

Report compare_groupnorm(const GroupNormProblem& p, Role output, const Tensor& reference, const Tensor& candidate,
                         const GroupNormInputs& in, const ReductionPlan& plan, const Fill& fill,
                         const Options& opt) {
  plan.validate();
  if (plan.narrow_partials() || plan.operand_bits > 0)
    throw std::invalid_argument("compare_groupnorm: the bounds assume fp32 statistics (no narrow partials, no operand rounding)");
  if (!in.x || !in.mean || !in.rstd) throw std::invalid_argument("compare_groupnorm: x, mean and rstd are required");
  const bool bwd = p.dir == GnDir::bwd;
  if (bwd && !in.dy) throw std::invalid_argument("compare_groupnorm: backward needs dy");
  if (!bwd && !in.var) throw std::invalid_argument("compare_groupnorm: forward needs var");
  const std::int64_t N = p.n, C = p.c, G = p.groups, Cg = C / G;
  const std::int64_t S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  const std::int64_t M = p.group_size();
  const double u = unit_roundoff(plan.acc);
  const std::int64_t D = plan.depth();
  const double u_out = output_u(candidate.dtype());
  const double eta_out = output_subnormal_floor(candidate.dtype());  // y, dx below the smallest normal
  const double Dd = static_cast<double>(D);

  ElementwiseCheck c;
  c.what = op_dir_name(Problem{p}) + " " + std::string(name(output));
  c.descriptor = to_descriptor(p);
  c.fill = fill_string(fill) + " seed=" + std::to_string(fill.seed);
  c.plan = to_string(plan);
  c.dst = candidate.dtype();
  c.dims = reference.dims();
  c.depth = D;
  c.u_acc = u;
  c.u_out = u_out;
  c.tier3_reason = "GroupNorm: the statistics' errors are shared by a whole group, not independent per element";
  const std::int64_t n = reference.numel(), n_x = in.x->numel();
  c.bound2.assign(n, 0.0);
  c.scale.assign(n, 0.0);
  const double sqd = std::sqrt(Dd);

  // Per-(n,g) mean |x|.
  std::vector<double> meanabs = chunked_sums(n_x, static_cast<std::size_t>(N * G), [&](std::int64_t i, double* acc) {
    acc[(i / (S * C)) * G + (i % C) / Cg] += std::fabs(in.x->get(i));
  });
  for (auto& v : meanabs) v /= static_cast<double>(M);

  auto dvar_of = [&](std::int64_t ng) {
    const double var = in.var->get(ng), ma = meanabs[ng];
    const double ve = var + p.eps;
    const double gm = gamma(Dd, u) * ma;
    return (gamma(Dd + 4, u) * (3 * var + 4 * std::sqrt(var) * ma) + gm * gm + 2 * u * ve) / ve;
  };

  if (!bwd && output == Role::y) {
    const bool exact = fill.kind == FillKind::gn_exact && fill.constant && plan.exact_epilogue;
    if (exact) c.exact_ok.assign(n, 1);
    else if (!plan.exact_epilogue)
      c.tier1_reason = "the plan may fold the mean into a shift (x*s + (beta - mean*s)), inexact on constant groups";
    else c.tier1_reason = "GroupNorm y is exact only for constant groups (gn_exact constant=1)";
    // 5 rounded steps after the statistics (x - mu, * r, rsqrt, * gamma, + beta), or the plan's epilogue count.
    const double g5 = gamma(Dd + std::max(5, plan.epilogue_ops + 1), u);
    std::vector<double> dvar(N * G);
    for (std::int64_t ng = 0; ng < N * G; ++ng) dvar[ng] = dvar_of(ng);
    if (p.relu) {
      // Outputs the ReLU clamps beyond doubt are zero by construction: the
      // trust check judges the zero share of the others.
      const ReluMask mask = relu_mask(p, in, u);
      c.relu_clamped.assign(n, 0);
      for_each_element(n, [&](std::int64_t i) { c.relu_clamped[i] = !mask.on[i] && !mask.ambiguous[i]; });
    }
    for_each_element(n, [&](std::int64_t i) {
      const std::int64_t ch = i % C, b = i / (S * C), ng = b * G + ch / Cg;
      const double r = in.rstd->get(ng), mu = in.mean->get(ng);
      const double x = in.x->get(i);
      const double gc = std::fabs(get_or(in.gamma, ch, 1.0)), bc = std::fabs(get_or(in.beta, ch, 0.0));
      const double y = std::fabs(reference.get(i));
      const double xhat = std::fabs((x - mu) * r);
      const double cond = gc * r * (std::fabs(x) + meanabs[ng]);
      c.bound2[i] = gc * (g5 * r * (std::fabs(x) + meanabs[ng]) + 0.5 * xhat * dvar[ng]) * (1 + 4 * u) +
                    u * (bc + y) + u_out * y + eta_out;
      c.scale[i] = u * sqd * cond;
    });
  } else if (!bwd && output == Role::mean) {
    c.tier1_reason = "statistics are not exact in general";
    for (std::int64_t i = 0; i < n; ++i) {
      c.bound2[i] = gamma(Dd + 1, u) * meanabs[i] + u * std::fabs(reference.get(i));
      c.scale[i] = u * sqd * meanabs[i];
    }
  } else if (!bwd && output == Role::rstd) {
    c.tier1_reason = "statistics are not exact in general";
    for (std::int64_t i = 0; i < n; ++i) {
      const double r = std::fabs(reference.get(i));
      c.bound2[i] = r * (0.5 * dvar_of(i) + 4 * u);
      c.scale[i] = u * sqd * r;
    }
  } else if (bwd && output == Role::dx) {
    c.tier1_reason = "GroupNorm backward involves r^3/M: not exact in general";
    const double g6 = gamma(6, u), g2 = gamma(2, u);
    const double gs1 = gamma(Dd + 2, u), gs2 = gamma(Dd + 1, u);
    const ReluMask mask = relu_mask(p, in, u);
    // Per (n, g): sum1, sum2, their absolute sums s1a, s2a, and the
    // ambiguous-mask mass amb1, amb2, as six rows of N * G accumulators.
    const std::int64_t NG = N * G;
    const std::vector<double> sums = chunked_sums(n, static_cast<std::size_t>(6 * NG), [&](std::int64_t i, double* acc) {
      const std::int64_t ch = i % C, b = i / (S * C), ng = b * G + ch / Cg;
      const double gd = get_or(in.gamma, ch, 1.0) * in.dy->get(i);
      const double x = in.x->get(i);
      if (mask.ambiguous[i]) {
        acc[4 * NG + ng] += std::fabs(gd * x);
        acc[5 * NG + ng] += std::fabs(gd);
      }
      if (!mask.on[i] && !mask.ambiguous[i]) return;
      acc[2 * NG + ng] += std::fabs(gd * x);
      acc[3 * NG + ng] += std::fabs(gd);
      if (!mask.on[i]) return;
      acc[ng] += gd * x;
      acc[NG + ng] += gd;
    });
    const double* sum1 = sums.data();
    const double *sum2 = sum1 + NG, *s1a = sum1 + 2 * NG, *s2a = sum1 + 3 * NG, *amb1 = sum1 + 4 * NG,
                 *amb2 = sum1 + 5 * NG;
    std::vector<double> c2(N * G), c3(N * G), dc2(N * G), dc3(N * G);
    const double Md = static_cast<double>(M);
    for (std::int64_t ng = 0; ng < N * G; ++ng) {
      const double mu = in.mean->get(ng), r = in.rstd->get(ng);
      const double T = sum2[ng] * mu - sum1[ng];
      c2[ng] = T * r * r * r / Md;
      c3[ng] = -c2[ng] * mu - sum2[ng] * r / Md;
      const double ds1 = gs1 * s1a[ng] + amb1[ng], ds2 = gs2 * s2a[ng] + amb2[ng];
      const double dT = std::fabs(mu) * ds2 + ds1 + g2 * (std::fabs(sum2[ng] * mu) + std::fabs(sum1[ng]));
      dc2[ng] = (dT + g6 * (std::fabs(T) + dT)) * r * r * r / Md;
      dc3[ng] = dc2[ng] * std::fabs(mu) + ds2 * r / Md +
                g6 * (std::fabs(c2[ng] * mu) + std::fabs(sum2[ng]) * r / Md);
    }
    for_each_element(n, [&](std::int64_t i) {
      const std::int64_t ch = i % C, b = i / (S * C), ng = b * G + ch / Cg;
      const double r = in.rstd->get(ng), x = std::fabs(in.x->get(i));
      const double gd = std::fabs(get_or(in.gamma, ch, 1.0) * in.dy->get(i));
      const double ac2 = std::fabs(c2[ng]) + dc2[ng], ac3 = std::fabs(c3[ng]) + dc3[ng];
      double e = dc2[ng] * x + dc3[ng] + g6 * (r * gd + ac2 * x + ac3);
      if (mask.ambiguous[i]) e += r * gd;  // its own r*gamma*dy may be in or out
      c.bound2[i] = e * (1 + 8 * u) + u_out * std::fabs(reference.get(i)) + eta_out;
      c.scale[i] = u * sqd * (r * gd + ac2 * x + ac3);
    });
  } else if (bwd && (output == Role::dgamma || output == Role::dbeta)) {
    c.tier1_reason = "GroupNorm parameter gradients are not exact in general";
    const ReluMask mask = relu_mask(p, in, u);
    // Per channel: the absolute sum a and its ambiguous-mask part amb.
    const std::vector<double> sums = chunked_sums(n_x, static_cast<std::size_t>(2 * C), [&](std::int64_t i, double* acc) {
      const std::int64_t ch = i % C, ng = (i / (S * C)) * G + ch / Cg;
      if (!mask.on[i] && !mask.ambiguous[i]) return;
      const double dy = std::fabs(in.dy->get(i));
      const double t = output == Role::dbeta
                           ? dy
                           : in.rstd->get(ng) * dy * (std::fabs(in.x->get(i)) + std::fabs(in.mean->get(ng)));
      acc[ch] += t;
      if (mask.ambiguous[i]) acc[C + ch] += t;
    });
    const double *a = sums.data(), *amb = a + C;
    const double rel = gamma(Dd + (output == Role::dgamma ? 4 : 0), u);
    for (std::int64_t ch = 0; ch < n; ++ch) {
      c.bound2[ch] = rel * a[ch] * (1 + 4 * u) + amb[ch] + u_out * std::fabs(reference.get(ch));
      c.scale[ch] = u * sqd * a[ch];
    }
  } else {
    throw std::invalid_argument("compare_groupnorm: " + std::string(name(output)) + " is not an output of " +
                                op_dir_name(Problem{p}));
  }
  if (c.exact_ok.empty() && c.tier1_reason.empty()) c.tier1_reason = "not applicable";
  return decide(c, reference, candidate, opt);
}

}  // namespace kgate::oracle
