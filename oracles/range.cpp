// Range checks (oracle.hpp, Range): where a correct kernel cannot be held to
// the fp64 reference, the comparison is refused instead of judged.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "oracles/oracle.hpp"
#include "reference/parallel.hpp"
#include "reference/descriptor.hpp"

namespace kgate::oracle {

namespace {

std::string sci(double v) {
  std::ostringstream o;
  o.precision(3);
  o << v;
  return o.str();
}

std::string beyond(const std::string& what, double v, DType acc) {
  return what + " reaches " + sci(v) + ", beyond " + std::string(name(acc)) + "'s largest finite value " +
         sci(largest_finite(acc)) + ": a correct kernel accumulating in " + std::string(name(acc)) + " may overflow";
}

}  // namespace

std::string nonfinite_input(Role role, const Tensor& t) {
  // The first non-finite element: each chunk's first, the lowest of them.
  std::vector<std::int64_t> first(static_cast<std::size_t>(chunk_count(t.numel())), -1);
  parallel_chunks(t.numel(), [&](std::int64_t lo, std::int64_t hi, std::int64_t chunk) {
    for (std::int64_t i = lo; i < hi; ++i)
      if (!std::isfinite(t.get(i))) {
        first[static_cast<std::size_t>(chunk)] = i;
        return;
      }
  });
  for (const std::int64_t i : first)
    if (i >= 0)
      return std::string(name(role)) + "[" + std::to_string(i) + "] is " + sci(t.get(i)) + " in " +
             std::string(name(t.dtype())) + " (the fill's values are beyond the dtype's range)";
  return {};
}

std::string conv_range(Role output, const Tensor& abs_companion, const ReductionPlan& plan) {
  const double thr = largest_finite(plan.acc);
  std::vector<double> worsts(static_cast<std::size_t>(chunk_count(abs_companion.numel())), 0.0);
  parallel_chunks(abs_companion.numel(), [&](std::int64_t lo, std::int64_t hi, std::int64_t chunk) {
    double w = 0;
    for (std::int64_t i = lo; i < hi; ++i) w = std::max(w, abs_companion.get(i));
    worsts[static_cast<std::size_t>(chunk)] = w;
  });
  double worst = 0;
  for (const double w : worsts) worst = std::max(worst, w);
  if (!(worst <= thr)) return beyond(std::string(name(output)) + ": the sum of |products|", worst, plan.acc);
  return {};
}

std::string groupnorm_range(const GroupNormProblem& p, const GroupNormInputs& in, const ReductionPlan& plan) {
  const double thr = largest_finite(plan.acc);
  const std::int64_t N = p.n, C = p.c, G = p.groups, Cg = C / G;
  const std::int64_t S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  const double M = static_cast<double>(p.group_size());
  // Per (n, g): max (x - mean)^2, max |x|, sum |gamma dy x|, sum |gamma dy|;
  // one partial per chunk, merged in chunk order.
  const std::int64_t NG = N * G;
  std::vector<std::vector<double>> parts(static_cast<std::size_t>(chunk_count(in.x->numel())));
  parallel_chunks(in.x->numel(), [&](std::int64_t lo, std::int64_t hi, std::int64_t chunk) {
    std::vector<double> q(static_cast<std::size_t>(4 * NG), 0.0);
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t ch = i % C, ng = (i / (S * C)) * G + ch / Cg;
      const double x = in.x->get(i), mu = in.mean->get(ng);
      q[ng] = std::max(q[ng], (x - mu) * (x - mu));
      q[NG + ng] = std::max(q[NG + ng], std::fabs(x));
      if (in.dy) {
        const double gd = std::fabs((in.gamma ? in.gamma->get(ch) : 1.0) * in.dy->get(i));
        q[2 * NG + ng] += gd * std::fabs(x);
        q[3 * NG + ng] += gd;
      }
    }
    parts[static_cast<std::size_t>(chunk)] = std::move(q);
  });
  std::vector<double> dev2(NG, 0), ax(NG, 0), s1(NG, 0), s2(NG, 0);
  for (const auto& q : parts)
    for (std::int64_t ng = 0; ng < NG; ++ng) {
      dev2[ng] = std::max(dev2[ng], q[ng]);
      ax[ng] = std::max(ax[ng], q[NG + ng]);
      s1[ng] += q[2 * NG + ng];
      s2[ng] += q[3 * NG + ng];
    }
  for (std::int64_t ng = 0; ng < N * G; ++ng) {
    const std::string grp = "group " + std::to_string(ng);
    if (!(M * dev2[ng] <= thr)) return beyond(grp + ": M * max (x - mean)^2", M * dev2[ng], plan.acc);
    if (!(M * ax[ng] <= thr)) return beyond(grp + ": M * max |x|", M * ax[ng], plan.acc);
    if (!in.dy) continue;
    const double r = in.rstd->get(ng), r3 = r * r * r;
    if (!(s1[ng] <= thr)) return beyond(grp + ": sum |gamma dy x|", s1[ng], plan.acc);
    const double t = r3 * std::max(1.0, s1[ng] + std::fabs(in.mean->get(ng)) * s2[ng]);
    if (!(t <= thr)) return beyond(grp + ": rstd^3 * sum |gamma dy (x - mean)|", t, plan.acc);
  }
  return {};
}

}  // namespace kgate::oracle
