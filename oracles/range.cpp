// Range checks (oracle.hpp, Range): where a correct kernel cannot be held to
// the fp64 reference, the comparison is refused instead of judged.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "oracles/oracle.hpp"
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
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (!std::isfinite(v))
      return std::string(name(role)) + "[" + std::to_string(i) + "] is " + sci(v) + " in " +
             std::string(name(t.dtype())) + " (the fill's values are beyond the dtype's range)";
  }
  return {};
}

std::string conv_range(Role output, const Tensor& abs_companion, const ReductionPlan& plan) {
  const double thr = largest_finite(plan.acc);
  double worst = 0;
  for (std::int64_t i = 0; i < abs_companion.numel(); ++i) worst = std::max(worst, abs_companion.get(i));
  if (!(worst <= thr)) return beyond(std::string(name(output)) + ": the sum of |products|", worst, plan.acc);
  return {};
}

std::string groupnorm_range(const GroupNormProblem& p, const GroupNormInputs& in, const ReductionPlan& plan) {
  const double thr = largest_finite(plan.acc);
  const std::int64_t N = p.n, C = p.c, G = p.groups, Cg = C / G;
  const std::int64_t S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  const double M = static_cast<double>(p.group_size());
  std::vector<double> dev2(N * G, 0), ax(N * G, 0), s1(N * G, 0), s2(N * G, 0);
  for (std::int64_t i = 0; i < in.x->numel(); ++i) {
    const std::int64_t ch = i % C, ng = (i / (S * C)) * G + ch / Cg;
    const double x = in.x->get(i), mu = in.mean->get(ng);
    dev2[ng] = std::max(dev2[ng], (x - mu) * (x - mu));
    ax[ng] = std::max(ax[ng], std::fabs(x));
    if (in.dy) {
      const double gd = std::fabs((in.gamma ? in.gamma->get(ch) : 1.0) * in.dy->get(i));
      s1[ng] += gd * std::fabs(x);
      s2[ng] += gd;
    }
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
