#include "reference/conv3d/ref_conv.hpp"

#include <algorithm>

#include "reference/conv3d/conv_fast.hpp"
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/error.hpp"
#include "reference/mpfr_round.hpp"

namespace kgate::ref {

namespace {

using detail::ConvGeom;
using detail::DirPlan;
using detail::Kind;

std::string what(const ConvProblem& p) { return op_dir_name(Problem{p}) + " reference"; }

Dims dims_of(const std::vector<TensorSpec>& specs, Role r) {
  for (const auto& s : specs)
    if (s.role == r) return s.dims;
  throw std::logic_error("conv reference: no output " + std::string(kgate::name(r)));
}

// db[c] = sum over every element of dy with channel c, in element order.
template <class Acc>
void db_terms(const F64Vector& dy, std::int64_t channels, std::int64_t c, Acc&& acc) {
  for (std::size_t i = static_cast<std::size_t>(c); i < dy.size(); i += static_cast<std::size_t>(channels)) acc(dy[i]);
}

// direct, dot2 and mpfr: one pass over the terms of each output element.
// `mp_round` is the dtype the MPFR values are rounded to (fp64 for conv()).
Outputs conv_by_terms(const ConvProblem& p, const Inputs& in, Impl impl, DType mp_round) {
  const ConvGeom g = detail::make_geom(p);
  const DirPlan plan = detail::dir_plan(p);
  const auto outs = p.outputs();
  const F64Vector a = to_f64(at(in, plan.a));
  const F64Vector b = to_f64(at(in, plan.b));
  F64Vector bias;
  if (plan.bias_on_out) bias = to_f64(at(in, Role::b));
  const Dims od = dims_of(outs, plan.out);
  const std::int64_t out_channels = od.back();
  const F64Vector& dy = plan.dy_is_small ? a : b;  // wgrad: a is small, b large
  const std::int64_t dy_channels = plan.dy_is_small ? g.cs : g.cl;

  Outputs result;
  if (impl == Impl::mpfr) {
    check_mpfr_size(p.flops() / 2, "this convolution");
    const double terms = static_cast<double>(std::max<std::int64_t>(p.reduction_length(), 1)) + 1;
    std::optional<ExpRange> ea = exp_range(at(in, plan.a)), eb = exp_range(at(in, plan.b)), ec;
    if (plan.bias_on_out) ec = exp_range(at(in, Role::b));
    const mpfr_prec_t prec = exact_precision(ea, eb, ec, terms);
    Tensor o(mp_round, od);
    MpAcc acc(prec);
    for (std::int64_t e = 0; e < o.numel(); ++e) {
      acc.zero();
      detail::for_each_term(g, plan.kind, a.data(), b.data(), e, [&](double x, double y) { acc.fma(x, y); });
      if (plan.bias_on_out) acc.add(bias[static_cast<std::size_t>(e % out_channels)]);
      o.set(e, mpfr_round_to(acc.get(), mp_round));
    }
    result.emplace(plan.out, std::move(o));
    if (plan.db) {
      Tensor d(mp_round, {dy_channels});
      MpAcc dacc(exact_precision(std::nullopt, std::nullopt, exp_range(at(in, Role::dy)),
                                 static_cast<double>(dy.size()) + 1));
      for (std::int64_t c = 0; c < dy_channels; ++c) {
        dacc.zero();
        db_terms(dy, dy_channels, c, [&](double v) { dacc.add(v); });
        d.set(c, mpfr_round_to(dacc.get(), mp_round));
      }
      result.emplace(Role::db, std::move(d));
    }
    return result;
  }

  Tensor o = f64_like(od);
  double* op = o.as<double>();
  constexpr std::int64_t kChunk = 256;
  const std::int64_t n = o.numel();
  parallel_for((n + kChunk - 1) / kChunk, [&](std::int64_t chunk, int) {
    const std::int64_t hi = std::min(n, (chunk + 1) * kChunk);
    for (std::int64_t e = chunk * kChunk; e < hi; ++e) {
      if (impl == Impl::dot2) {
        Dot2 acc;
        detail::for_each_term(g, plan.kind, a.data(), b.data(), e, [&](double x, double y) { acc.add_prod(x, y); });
        if (plan.bias_on_out) acc.add(bias[static_cast<std::size_t>(e % out_channels)]);
        op[e] = acc.value();
      } else {
        double acc = 0.0;
        detail::for_each_term(g, plan.kind, a.data(), b.data(), e, [&](double x, double y) { acc += x * y; });
        if (plan.bias_on_out) acc += bias[static_cast<std::size_t>(e % out_channels)];
        op[e] = acc;
      }
    }
  });
  result.emplace(plan.out, std::move(o));
  if (plan.db) {
    Tensor d = f64_like({dy_channels});
    for (std::int64_t c = 0; c < dy_channels; ++c) {
      if (impl == Impl::dot2) {
        Dot2 acc;
        db_terms(dy, dy_channels, c, [&](double v) { acc.add(v); });
        d.set(c, acc.value());
      } else {
        double acc = 0.0;
        db_terms(dy, dy_channels, c, [&](double v) { acc += v; });
        d.set(c, acc);
      }
    }
    result.emplace(Role::db, std::move(d));
  }
  return result;
}

}  // namespace

Outputs conv(const ConvProblem& p, const Inputs& in, Impl impl) {
  p.validate();
  check_inputs(p.inputs(), in, what(p));
  if (impl == Impl::fast) return detail::conv_fast(p, in);
  return conv_by_terms(p, in, impl, DType::fp64);
}

Outputs conv_abs(const ConvProblem& p, const Inputs& in, Impl impl) {
  p.validate();
  check_inputs(p.inputs(), in, what(p));
  Outputs abs_in;
  for (const auto& s : p.inputs()) abs_in.emplace(s.role, abs_of(at(in, s.role)));
  return conv(p, refs(abs_in), impl);
}

Outputs conv_mpfr_rounded(const ConvProblem& p, const Inputs& in, DType t) {
  p.validate();
  check_inputs(p.inputs(), in, what(p));
  return conv_by_terms(p, in, Impl::mpfr, t);
}

}  // namespace kgate::ref
