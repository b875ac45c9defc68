// Gate power, on a planted defect: a GroupNorm forward whose rstd is
// 1/(sqrt(var) + eps) (eps outside the root). Under the fills `kgate verify`
// ran before the pinning fills (gn_exact, signed: every variance far above
// eps) the oracle passes it; under the pinning fills (constant groups: var
// = 0; the near-eps sweep: var = eps) it fails. The production kernel passes
// all four.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"
#include "tools/gate.hpp"

namespace kgate {
namespace {

// The oracle's verdict on the defective kernel's rstd and y under one fill.
oracle::State judge_defect(const GroupNormProblem& g, const Fill& f) {
  const Problem p = g;
  const auto in = ref::make_inputs(p, f);
  const ref::Inputs rin = ref::refs(in);
  const ref::Outputs want = ref::run_reference(p, rin, ref::Impl::fast);
  const ref::GroupNormCompanion comp = ref::groupnorm_companion(g, rin);
  const std::int64_t C = g.c, Cg = g.c / g.groups, S = g.spatial[0] * g.spatial[1] * g.spatial[2];
  Tensor rstd(DType::fp32, {g.n, g.groups}), y(g.dst, g.x_dims());
  for (std::int64_t ng = 0; ng < rstd.numel(); ++ng)
    rstd.set(ng, static_cast<float>(1.0 / (std::sqrt(comp.var.get(ng)) + g.eps)));
  const Tensor& x = in.at(Role::x);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t ch = i % C, ng = (i / (S * C)) * g.groups + ch / Cg;
    double v = (x.get(i) - comp.mean.get(ng)) * rstd.get(ng);
    if (g.affine) v = v * in.at(Role::gamma).get(ch) + in.at(Role::beta).get(ch);
    y.set(i, g.relu && !(v > 0) ? 0.0 : v);
  }
  oracle::GroupNormInputs gi;
  gi.x = &x;
  gi.gamma = g.affine ? &in.at(Role::gamma) : nullptr;
  gi.beta = g.affine ? &in.at(Role::beta) : nullptr;
  gi.mean = &comp.mean;
  gi.rstd = &comp.rstd;
  gi.var = &comp.var;
  const kernels::Plan plan = kernels::plan(p);
  oracle::State s = oracle::State::passed;
  for (const auto& [role, cand] : {std::pair<Role, const Tensor*>{Role::rstd, &rstd}, {Role::y, &y}}) {
    const auto r = oracle::compare_groupnorm(g, role, want.at(role), *cand, gi, plan.reduction.at(std::string(name(role))), f);
    if (gate::verdict(r) != oracle::State::passed) s = gate::verdict(r);
  }
  return s;
}

TEST(GatePower, PinningFillsFailAnRstdWithEpsOutsideTheRoot) {
  for (const char* d : {"groupnorm.fwd bf16 n1 c64 g8 d16 relu", "groupnorm.fwd fp32 n2 c32 g4 d6 h5 w7"}) {
    const Problem p = parse_descriptor(d);
    const auto& g = std::get<GroupNormProblem>(p);
    const std::vector<Fill> fills = gate::default_fills(p, 1);
    ASSERT_EQ(fills.size(), 4u);  // gn_exact, signed, then the two pinning fills
    EXPECT_EQ(judge_defect(g, fills[0]), oracle::State::passed) << d << ": gn_exact already fails it";
    EXPECT_EQ(judge_defect(g, fills[1]), oracle::State::passed) << d << ": signed already fails it";
    EXPECT_EQ(judge_defect(g, fills[2]), oracle::State::failed) << d << " " << fill_string(fills[2]);
    EXPECT_EQ(judge_defect(g, fills[3]), oracle::State::failed) << d << " " << fill_string(fills[3]);
    // The production kernel passes every one of them.
    EXPECT_EQ(gate::evaluate(p, fills, 0).state, oracle::State::passed) << d;
  }
}

}  // namespace
}  // namespace kgate
