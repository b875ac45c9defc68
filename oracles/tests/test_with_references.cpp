// The oracle on the real references (reference/conv3d, reference/groupnorm):
// the simulated reference of the self-tests agrees with them, and a correct
// simulated kernel passes the oracle against the real reference and its
// absolute companion. This is how the gate calls the oracle.
#include <gtest/gtest.h>

#include <cmath>

#include "oracles/oracle.hpp"
#include "oracles/sim/sim.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"

namespace kgate::oracle {
namespace {

using sim::Order;

std::vector<ConvProblem> problems() {
  std::vector<ConvProblem> v;
  for (ConvOp op : {ConvOp::conv3d, ConvOp::conv_transpose3d})
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}) {
      ConvProblem p;
      p.op = op;
      p.dir = dir;
      p.n = 2;
      p.cin = 4;
      p.cout = 6;
      p.groups = 2;
      p.in = {3, 4, 5};
      p.kernel = {2, 3, 2};
      p.stride = {2, 1, 2};
      p.pad_front = {1, 0, 1};
      p.pad_back = {0, 1, 1};
      p.dilation = {1, 2, 1};
      p.bias = dir != ConvDir::bwd_data;
      p.src = DType::bf16;
      p.dst = DType::fp32;
      v.push_back(p);
    }
  return v;
}

TEST(OracleWithReferences, ConvSimulationMatchesTheReferenceAndPasses) {
  for (const ConvProblem& p : problems()) {
    for (FillKind fk : {FillKind::signed_, FillKind::lattice}) {
      Fill f;
      f.kind = fk;
      f.seed = 21;
      if (fk == FillKind::lattice) f = lattice_fill(Problem{p}, 21);
      const sim::ConvCase c = sim::make_conv_case(p, f);
      const auto ins = p.inputs();
      ref::Inputs in{{ins[0].role, std::cref(c.in0)}, {ins[1].role, std::cref(c.in1)}};
      if (p.dir == ConvDir::fwd && p.bias) in.emplace(Role::b, std::cref(c.bias));
      const ref::Outputs out = ref::run_reference(Problem{p}, in, ref::Impl::direct);
      const ref::Outputs abs = ref::abs_companion(Problem{p}, in);
      const Tensor& r = out.at(c.out);
      const Tensor& a = abs.at(c.out);
      ASSERT_EQ(r.dims(), c.ref.dims());
      for (std::int64_t i = 0; i < r.numel(); ++i) {
        ASSERT_NEAR(r.get(i), c.ref.get(i), 1e-12 * (c.abs.get(i) + 1)) << to_descriptor(p) << " @" << i;
        ASSERT_NEAR(a.get(i), c.abs.get(i), 1e-12 * (c.abs.get(i) + 1)) << to_descriptor(p) << " @" << i;
      }
      for (Order o : {Order::sequential, Order::mfma}) {
        ReductionPlan plan = sim::plan_of({o}, c.kmax, p.src);
        if (c.bias.numel()) plan.epilogue_ops = 1;
        const Tensor y = sim::run_conv(c, {o});
        const Report rep = compare_conv(p, c.out, r, a, y, plan, f, c.bias.numel() ? &c.bias : nullptr);
        EXPECT_EQ(rep.state, State::passed) << to_table(rep);
        if (fk == FillKind::lattice) {
          EXPECT_EQ(rep.tier1.state, State::passed) << to_table(rep);
        }
      }
      // db of bwd_weight: sum of dy, a reduction without products.
      if (p.dir == ConvDir::bwd_weight && p.bias) {
        const Tensor& dy = c.in0.dims() == p.y_dims() ? c.in0 : c.in1;
        const std::int64_t cout = p.cout;
        Tensor db(p.dst, {cout});
        std::vector<float> acc(cout, 0.0f);
        for (std::int64_t i = 0; i < dy.numel(); ++i) acc[i % cout] += static_cast<float>(dy.get(i));
        for (std::int64_t ch = 0; ch < cout; ++ch) db.set(ch, acc[ch]);
        const ReductionPlan plan = ReductionPlan::sequential(dy.numel() / cout);
        const Report rep = compare_conv(p, Role::db, out.at(Role::db), abs.at(Role::db), db, plan, f);
        EXPECT_EQ(rep.state, State::passed) << to_table(rep);
        db.set(0, db.get(0) + 0.5);
        EXPECT_EQ(compare_conv(p, Role::db, out.at(Role::db), abs.at(Role::db), db, plan, f).state, State::failed);
      }
    }
  }
}

// A library that rounds its convolution to the output dtype and then adds
// the bias in that dtype (PyTorch's conv_transpose3d with bias under bf16
// autocast on the H200: every y equals bf16(bf16(conv) + b)) rounds twice;
// where the bias cancels the sum, the first rounding is far above the
// single-rounding bound. The oracle fails it unless the plan declares it
// (ReductionPlan::rounded_before_epilogue), and a single rounding passes
// both ways.
TEST(OracleWithReferences, BiasAddedToARoundedSumIsJudgedByItsPlan) {
  const ConvProblem p = std::get<ConvProblem>(parse_descriptor("conv_transpose3d.fwd bf16 n1 c64 k8 d3 kd2 s2 bias"));
  Fill f;
  f.kind = FillKind::signed_;
  f.seed = 7;
  const sim::ConvCase c = sim::make_conv_case(p, f);
  Tensor once(DType::bf16, c.ref.dims()), twice(DType::bf16, c.ref.dims());
  for (std::int64_t i = 0; i < c.ref.numel(); ++i) {
    const double b = c.bias.get(i % p.cout);
    once.set(i, c.ref.get(i));
    // The sum rounded to bf16, then the bias added and rounded (set rounds).
    twice.set(i, static_cast<double>(kgate::bf16_bits_to_fp32(kgate::fp64_to_bf16_bits(c.ref.get(i) - b))) + b);
  }
  ReductionPlan plan = ReductionPlan::sequential(c.kmax);
  plan.epilogue_ops = 1;
  EXPECT_EQ(compare_conv(p, c.out, c.ref, c.abs, once, plan, f, &c.bias).state, State::passed);
  const Report strict = compare_conv(p, c.out, c.ref, c.abs, twice, plan, f, &c.bias);
  EXPECT_EQ(strict.state, State::failed) << to_table(strict);
  EXPECT_EQ(strict.tier2.state, State::failed) << to_table(strict);
  plan.rounded_before_epilogue = true;
  EXPECT_EQ(compare_conv(p, c.out, c.ref, c.abs, twice, plan, f, &c.bias).state, State::passed);
  EXPECT_EQ(compare_conv(p, c.out, c.ref, c.abs, once, plan, f, &c.bias).state, State::passed);
}

TEST(OracleWithReferences, GroupNormSimulationMatchesTheReferenceAndPasses) {
  GroupNormProblem p;
  p.n = 2;
  p.c = 12;
  p.groups = 3;
  p.spatial = {2, 3, 5};
  p.src = DType::bf16;
  p.dst = DType::fp32;
  Fill f;
  f.kind = FillKind::gn_sweep;
  f.mean = 10;
  f.sigma = 1;
  f.seed = 5;
  for (int variant = 0; variant < 4; ++variant) {
    const GnDir dir = variant % 2 ? GnDir::bwd : GnDir::fwd;
    p.dir = dir;
    p.relu = variant >= 2;
    const sim::GnCase gc = sim::make_gn_case(p, f);
    ref::Inputs in{{Role::x, std::cref(gc.x)}, {Role::gamma, std::cref(gc.gamma)}, {Role::beta, std::cref(gc.beta)}};
    if (dir == GnDir::bwd) in.emplace(Role::dy, std::cref(gc.dy));
    const ref::Outputs derived = ref::derived_inputs(Problem{p}, in);
    for (const auto& [role, t] : derived) in.emplace(role, std::cref(t));
    const ref::Outputs out = ref::run_reference(Problem{p}, in, ref::Impl::fast);
    const sim::GnOutputs o = sim::run_gn(gc, true);
    const ReductionPlan plan = sim::gn_plan(p.group_size(), true);
    GroupNormInputs gi;
    gi.x = &gc.x;
    gi.gamma = &gc.gamma;
    gi.beta = &gc.beta;
    if (dir == GnDir::fwd) {
      const ref::GroupNormCompanion comp = ref::groupnorm_companion(p, in);
      gi.mean = &comp.mean;
      gi.rstd = &comp.rstd;
      gi.var = &comp.var;
      for (Role r : {Role::y, Role::mean, Role::rstd}) {
        const Tensor& cand = r == Role::y ? o.y : r == Role::mean ? o.mean : o.rstd;
        const Report rep = compare_groupnorm(p, r, out.at(r), cand, gi, plan, f);
        EXPECT_EQ(rep.state, State::passed) << to_table(rep);
      }
    } else {
      gi.dy = &gc.dy;
      gi.mean = &derived.at(Role::mean);
      gi.rstd = &derived.at(Role::rstd);
      const Report rep = compare_groupnorm(p, Role::dx, out.at(Role::dx), o.y, gi, plan, f);
      EXPECT_EQ(rep.state, State::passed) << to_table(rep);
      const ReductionPlan cplan = sim::gn_plan(p.n * p.spatial[0] * p.spatial[1] * p.spatial[2], true);
      EXPECT_EQ(compare_groupnorm(p, Role::dgamma, out.at(Role::dgamma), o.dgamma, gi, cplan, f).state, State::passed);
      EXPECT_EQ(compare_groupnorm(p, Role::dbeta, out.at(Role::dbeta), o.dbeta, gi, cplan, f).state, State::passed);
    }
  }
}

}  // namespace
}  // namespace kgate::oracle
