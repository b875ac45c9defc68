// Gate power, on a planted defect: a GroupNorm forward whose rstd is
// 1/(sqrt(var) + eps) (eps outside the root). Under the fills `kgate verify`
// ran before the pinning fills (gn_exact, signed: every variance far above
// eps) the oracle passes it; under the pinning fills (constant groups: var
// = 0; the near-eps sweep: var = eps) it fails. The production kernel passes
// all four.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/api.hpp"
#include "kernels/conv3d/conv3d.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/conv3d/combine.hpp"
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

// A kernel whose reduction differs from the plan it publishes: a Runner
// that publishes one plan of kgate's kernel and runs another (another split
// count: another slice map; no split: one chain where the plan says a
// tree). The signed and lattice fills cannot tell (any order is within the
// bounds, exact sums are exact in any order); the combine probe the gate
// adds to the default fills (reference/conv3d/combine.hpp) fails it, and
// passes the kernel that runs what it publishes.
class LyingRunner : public gate::Runner {
 public:
  LyingRunner(kernels::Plan published, kernels::Plan runs) : published_(std::move(published)), runs_(std::move(runs)) {}
  kernels::Support is_supported(const Problem& p) override { return kernels::is_supported(p); }
  kernels::Plan plan(const Problem&) override { return published_; }
  std::map<Role, Tensor> run(const Problem& p, const kernels::Plan&, const std::map<Role, Tensor>& in, int) override {
    return kernels::run(p, runs_, kernels::pointers(in));
  }
  std::string repro_flags() const override { return ""; }

 private:
  kernels::Plan published_, runs_;
};

TEST(GatePower, CombineProbeFailsAReductionThatDiffersFromThePublishedPlan) {
  struct Case {
    const char* d;
    std::int64_t published, runs;  // split counts (conv_split_plan)
  };
  for (rt::Target tg : {rt::Target::gfx942, rt::Target::sm90})
  for (const Case& c : {Case{"conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias", 4, 5},
                        Case{"conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias", 4, 1},
                        Case{"conv3d.bwd_weight bf16 n1 c32 k32 d6 h5 w7 kd3 p1 bias", 6, 7},
                        Case{"conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", 3, 1},
                        Case{"conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", 3, 9},
                        Case{"conv_transpose3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", 5, 1},
                        Case{"conv3d.bwd_data bf16 n1 c32 k32 d6 kd3 p1", 3, 4}}) {
    rt::host::ScopedConfig cfg(rt::host::config_for(tg, rt::host::config()));
    SCOPED_TRACE(std::string(c.d) + ": published " + std::to_string(c.published) + " splits, runs " + std::to_string(c.runs) +
                 (tg == rt::Target::sm90 ? " (sm90)" : " (gfx942)"));
    const Problem p = parse_descriptor(c.d);
    const ConvProblem& cp = std::get<ConvProblem>(p);
    const kernels::Plan published = kernels::conv_split_plan(cp, c.published);
    const std::vector<Fill> fills = gate::default_fills(p, 1, &published);
    ASSERT_EQ(fills.size(), 3u);
    ASSERT_EQ(fills.back().kind, FillKind::combine);
    // The probe is order-sensitive where it judges: the plan's tree differs
    // from the exact sum somewhere.
    const auto in = ref::make_inputs(p, fills.back());
    const std::string out(name(cp.outputs().front().role));
    const ref::Replay rp = ref::combine_replay(cp, cp.outputs().front().role, published.reduction.at(out), kernels::pointers(in));
    EXPECT_GT(rp.probed_count, 0);
    EXPECT_GT(rp.order_sensitive, 0);
    LyingRunner honest(published, published), lying(published, kernels::conv_split_plan(cp, c.runs));
    const gate::Result ok = gate::evaluate(p, fills, 0, {}, &honest);
    EXPECT_EQ(ok.state, oracle::State::passed) << ok.fills.back().detail;
    const gate::Result bad = gate::evaluate(p, fills, 0, {}, &lying);
    EXPECT_EQ(bad.state, oracle::State::failed);
    ASSERT_EQ(bad.fills.size(), 3u);
    EXPECT_EQ(bad.fills[0].state, oracle::State::passed);  // lattice: exact in any order
    EXPECT_EQ(bad.fills[1].state, oracle::State::passed);  // signed: within the bounds
    EXPECT_EQ(bad.fills[2].state, oracle::State::failed);  // the probe
    bool named = false;
    for (const auto& rr : bad.fills[2].roles)
      named = named || rr.report.tier1.reason.find("another order or with another slice map") != std::string::npos;
    EXPECT_TRUE(named);
  }
}

// The determinism reruns: a Runner whose every rerun flips the last bit of
// its first output element (a kernel that is not reproducible) is failed as
// nondeterministic on the order-dependent fills (signed; GroupNorm's
// gn_sweep too), which alone rerun where they run: an exact fill gives the
// same bits in every order. A selection of exact fills only reruns them.
class FlippingRunner : public gate::Runner {
 public:
  int reruns = 0;
  kernels::Support is_supported(const Problem& p) override { return kernels::is_supported(p); }
  kernels::Plan plan(const Problem& p) override { return kernels::plan(p); }
  std::map<Role, Tensor> run(const Problem& p, const kernels::Plan& plan, const std::map<Role, Tensor>& in,
                             int rerun) override {
    auto out = kernels::run(p, plan, kernels::pointers(in));
    if (rerun > 0) {
      ++reruns;
      Tensor& t = out.begin()->second;
      const double v = t.get(0);
      t.set(0, v == 0 ? 1.0 : -v);
    }
    return out;
  }
  std::string repro_flags() const override { return ""; }
};

TEST(GatePower, DeterminismRerunsRunOnTheOrderDependentFills) {
  struct Case {
    const char* d;
    int reruns;  // order-dependent fills of the default fills
  };
  for (const Case& c : {Case{"conv3d.fwd bf16 n1 c8 k8 d5 kd3 p1 bias", 1}, Case{"groupnorm.fwd bf16 n1 c16 g4 d5 relu", 2}}) {
    SCOPED_TRACE(c.d);
    const Problem p = parse_descriptor(c.d);
    const kernels::Plan plan = kernels::plan(p);
    const std::vector<Fill> fills = gate::default_fills(p, 1, &plan);
    FlippingRunner flip;
    const gate::Result r = gate::evaluate(p, fills, 1, {}, &flip);
    EXPECT_EQ(r.state, oracle::State::failed);
    EXPECT_EQ(flip.reruns, c.reruns);
    for (const gate::FillResult& fr : r.fills) {
      const bool exact = exact_in_any_order(fr.fill);
      const bool order_dependent = !exact && fr.fill.kind != FillKind::combine;
      EXPECT_EQ(fr.phase_seconds.count("rerun") > 0, order_dependent) << fill_string(fr.fill);
      if (order_dependent) {
        EXPECT_NE(fr.detail.find("nondeterministic: rerun 1"), std::string::npos) << fr.detail;
      }
    }
    // Exact fills alone: they rerun, and the flip is caught there.
    std::vector<Fill> exact;
    for (const Fill& f : fills)
      if (exact_in_any_order(f)) exact.push_back(f);
    FlippingRunner flip_exact;
    const gate::Result e = gate::evaluate(p, exact, 1, {}, &flip_exact);
    EXPECT_EQ(flip_exact.reruns, static_cast<int>(exact.size()));
    EXPECT_EQ(e.state, oracle::State::failed);
    EXPECT_NE(e.fills.front().detail.find("nondeterministic"), std::string::npos);
  }
}

}  // namespace
}  // namespace kgate
