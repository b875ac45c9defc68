// Every check of the oracle has a test that makes it fail (a rule of the project), and the
// simulation pieces the self-tests rely on are themselves checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <limits>
#include <stdexcept>

#include "oracles/bounds.hpp"
#include "oracles/oracle.hpp"
#include "oracles/sim/sim.hpp"
#include "reference/descriptor.hpp"
#include "reference/parallel.hpp"

namespace kgate::oracle {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using sim::ConvCase;
using sim::Order;
using sim::Strategy;

ConvProblem small_fwd(DType t) {
  ConvProblem p;
  p.cin = 4;
  p.cout = 6;
  p.in = {3, 4, 5};
  p.kernel = {3, 3, 3};
  p.pad_front = p.pad_back = {1, 1, 1};
  p.src = p.dst = t;
  return p;
}

Fill signed_fill(std::uint64_t seed) {
  Fill f;
  f.kind = FillKind::signed_;
  f.seed = seed;
  return f;
}

Report run(const ConvCase& c, const Tensor& y, const ReductionPlan& plan) {
  return compare_conv(c.p, c.out, c.ref, c.abs, y, plan, c.fill);
}

// Direct use of the core with hand-made bounds: 4 elements, bound 1 each.
ElementwiseCheck core(DType dst = DType::fp32) {
  ElementwiseCheck c;
  c.what = "test";
  c.dst = dst;
  c.dims = {4};
  c.depth = 1;
  c.bound2.assign(4, 1.0);
  c.scale.assign(4, 1.0);
  return c;
}
Tensor tensor(DType t, std::initializer_list<double> v) {
  Tensor x(t, {static_cast<std::int64_t>(v.size())});
  std::int64_t i = 0;
  for (double e : v) x.set(i++, e);
  return x;
}

TEST(OracleChecks, Tier1PassesCorrectLatticeAndFailsOneUlp) {
  const ConvProblem p = small_fwd(DType::bf16);
  const ConvCase c = sim::make_conv_case(p, lattice_fill(Problem{p}, 3));
  const ReductionPlan plan = sim::plan_of({Order::reversed}, c.kmax, p.src);
  Tensor y = sim::run_conv(c, {Order::reversed});
  Report r = run(c, y, plan);
  ASSERT_EQ(r.tier1.state, State::passed) << to_table(r);
  EXPECT_EQ(r.tier1.checked, y.numel());
  EXPECT_EQ(r.state, State::passed);
  // One element one bf16 ulp off: tier 1 fails, with its coordinates.
  const std::int64_t i = 37;
  const double v = y.get(i);
  y.set(i, v == 0 ? 1.0 : v * (1 + std::ldexp(1.0, -7)));
  r = run(c, y, plan);
  EXPECT_EQ(r.tier1.state, State::failed);
  EXPECT_EQ(r.tier1.violations, 1);
  EXPECT_EQ(r.state, State::failed);
  ASSERT_FALSE(r.tier1.worst.empty());
  EXPECT_EQ(r.tier1.worst[0].index, i);
  EXPECT_EQ(r.tier1.worst[0].coord, unravel(i, y.dims()));
}

TEST(OracleChecks, Tier1ExcludesElementsBeyondTheExactRange) {
  const ConvProblem p = small_fwd(DType::bf16);
  ConvCase c = sim::make_conv_case(p, lattice_fill(Problem{p}, 4));
  c.abs.set(5, 1e6);  // A_5 > 2^8: exactness not guaranteed, not guessed
  const Tensor y = sim::run_conv(c, {Order::sequential});
  const Report r = run(c, y, sim::plan_of({Order::sequential}, c.kmax, p.src));
  EXPECT_EQ(r.tier1.excluded, 1);
  EXPECT_EQ(r.tier1.checked, y.numel() - 1);
}

TEST(OracleChecks, Tier1NotApplicableToRandomFills) {
  const ConvProblem p = small_fwd(DType::fp32);
  const ConvCase c = sim::make_conv_case(p, signed_fill(5));
  const Report r = run(c, sim::run_conv(c, {Order::pairwise}), sim::plan_of({Order::pairwise}, c.kmax, p.src));
  EXPECT_EQ(r.tier1.state, State::not_applicable);
  EXPECT_NE(r.tier1.reason.find("lattice"), std::string::npos);
  EXPECT_EQ(r.state, State::passed) << to_table(r);
}

TEST(OracleChecks, Tier2FailsJustAboveTheBoundAndPassesJustBelow) {
  ElementwiseCheck c = core();
  const Tensor ref = tensor(DType::fp64, {1, 2, 3, 4});
  Report r = decide(c, ref, tensor(DType::fp32, {1, 2, 3, 4.99}));
  EXPECT_EQ(r.tier2.state, State::passed);
  EXPECT_NEAR(r.tier2.max_margin, 0.99, 1e-6);
  r = decide(c, ref, tensor(DType::fp32, {1, 2, 3, 5.01}));
  EXPECT_EQ(r.tier2.state, State::failed);
  EXPECT_EQ(r.state, State::failed);
  EXPECT_EQ(r.tier2.worst[0].index, 3);
}

// gamma_D(u) with D*u >= 1 (an fp32 sum of 2^24 terms in an unknown order)
// is +Inf, and Inf * 0 is NaN: such a "bound" neither passes nor fails a
// kernel. Tier 2 does not apply; with no other tier the output is not
// verified (untrusted), whatever the candidate holds.
TEST(OracleChecks, InfiniteBoundIsNotApplicableNeverPassedOrFailed) {
  ASSERT_TRUE(std::isinf(gamma(std::ldexp(1.0, 24), std::ldexp(1.0, -24))));
  ElementwiseCheck c = core();
  c.depth = std::int64_t{1} << 24;
  c.u_acc = std::ldexp(1.0, -24);
  c.bound2 = {kInf, kInf, std::numeric_limits<double>::quiet_NaN(), kInf};
  const Tensor ref = tensor(DType::fp64, {1, 2, 0, 4});
  for (const Tensor& cand : {tensor(DType::fp32, {1, 2, 0, 4}), tensor(DType::fp32, {1, 2, 0.5, 40})}) {
    const Report r = decide(c, ref, cand);
    EXPECT_EQ(r.tier2.state, State::not_applicable);
    EXPECT_EQ(r.tier2.violations, 0);
    EXPECT_NE(r.tier2.reason.find("no finite rigorous bound"), std::string::npos) << r.tier2.reason;
    EXPECT_EQ(r.trust.state, State::untrusted);
    EXPECT_TRUE(r.trust.proves_nothing);
    EXPECT_NE(r.trust.reason.find("no tier bounds this comparison"), std::string::npos) << r.trust.reason;
    EXPECT_EQ(r.state, State::untrusted);
  }
  // An infinite candidate is no longer excused by an infinite "bound".
  const Report inf = decide(c, ref, tensor(DType::fp32, {1, 2, 0, kInf}));
  EXPECT_EQ(inf.specials.state, State::failed);
  EXPECT_EQ(inf.state, State::failed);
  // One finite element does not make the others bounded.
  c.bound2 = {1.0, 1.0, 1.0, kInf};
  EXPECT_EQ(decide(c, ref, tensor(DType::fp32, {1, 2, 0, 4})).tier2.state, State::not_applicable);
}

// Tier 1 still verifies a lattice fill where tier 2 has no bound: exact is
// exact in any order. An element tier 1 excludes stays unverified.
TEST(OracleChecks, Tier1AloneVerifiesWhereNoRigorousBoundExists) {
  ElementwiseCheck c = core();
  c.bound2.assign(4, kInf);
  c.exact_ok.assign(4, 1);
  const Tensor ref = tensor(DType::fp64, {1, 2, 3, 4});
  Report r = decide(c, ref, tensor(DType::fp32, {1, 2, 3, 4}));
  EXPECT_EQ(r.tier1.state, State::passed);
  EXPECT_EQ(r.tier2.state, State::not_applicable);
  EXPECT_EQ(r.state, State::passed) << to_table(r);
  r = decide(c, ref, tensor(DType::fp32, {1, 2, 3, 4.5}));
  EXPECT_EQ(r.state, State::failed);
  c.exact_ok[3] = 0;
  r = decide(c, ref, tensor(DType::fp32, {1, 2, 3, 4}));
  EXPECT_EQ(r.state, State::untrusted);
  EXPECT_NE(r.trust.reason.find("tier 1 checked 3 of 4"), std::string::npos) << r.trust.reason;
}

TEST(OracleChecks, Tier3FailsInsideTheTier2Bound) {
  ElementwiseCheck c = core();
  c.bound3.assign(4, 0.1);
  const Report r = decide(c, tensor(DType::fp64, {1, 2, 3, 4}), tensor(DType::fp32, {1, 2, 3, 4.5}));
  EXPECT_EQ(r.tier2.state, State::passed);
  EXPECT_EQ(r.tier3.state, State::failed);
  EXPECT_EQ(r.state, State::failed);
}

TEST(OracleChecks, Tier3NotApplicableToTruncatingMfma) {
  const ConvProblem p = small_fwd(DType::bf16);
  const ConvCase c = sim::make_conv_case(p, signed_fill(6));
  const Report r = run(c, sim::run_conv(c, {Order::mfma}), sim::plan_of({Order::mfma}, c.kmax, p.src));
  EXPECT_EQ(r.tier3.state, State::not_applicable);
  EXPECT_NE(r.tier3.reason.find("truncat"), std::string::npos);
  EXPECT_EQ(r.state, State::passed) << to_table(r);
}

TEST(OracleChecks, Tier3NotApplicableBeyondTheSequentialLimit) {
  const ConvProblem p = small_fwd(DType::bf16);
  const ConvCase c = sim::make_conv_case(p, signed_fill(6));
  Options o;
  o.tier3_max_sequential = 16;  // below this problem's L = 108
  const Report r = compare_conv(p, c.out, c.ref, c.abs, sim::run_conv(c, {Order::sequential}),
                                sim::plan_of({Order::sequential}, c.kmax, p.src), c.fill, nullptr, o);
  EXPECT_EQ(r.tier3.state, State::not_applicable);
  EXPECT_NE(r.tier3.reason.find("stagnation"), std::string::npos);
}

TEST(OracleChecks, NanAndInfDisagreementFails) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  ElementwiseCheck c = core();
  // Both NaN, both +Inf: agreement.
  Report r = decide(c, tensor(DType::fp64, {nan, inf, 3, 4}), tensor(DType::fp32, {nan, inf, 3, 4}));
  EXPECT_EQ(r.specials.state, State::passed);
  EXPECT_EQ(r.state, State::passed) << to_table(r);
  // NaN in the candidate only.
  r = decide(c, tensor(DType::fp64, {1, 2, 3, 4}), tensor(DType::fp32, {1, nan, 3, 4}));
  EXPECT_EQ(r.specials.state, State::failed);
  EXPECT_EQ(r.specials.nan_mismatch, 1);
  EXPECT_EQ(r.specials.first_index, 1);
  EXPECT_EQ(r.tier2.state, State::failed);
  // NaN in the reference only.
  r = decide(c, tensor(DType::fp64, {nan, 2, 3, 4}), tensor(DType::fp32, {1, 2, 3, 4}));
  EXPECT_EQ(r.specials.nan_mismatch, 1);
  EXPECT_EQ(r.state, State::failed);
  // Inf of the wrong sign; Inf where the reference is small.
  r = decide(c, tensor(DType::fp64, {inf, 2, 3, 4}), tensor(DType::fp32, {-inf, 2, 3, 4}));
  EXPECT_EQ(r.specials.inf_mismatch, 1);
  r = decide(c, tensor(DType::fp64, {1, 2, 3, 4}), tensor(DType::fp32, {1, 2, inf, 4}));
  EXPECT_EQ(r.specials.inf_mismatch, 1);
  EXPECT_EQ(r.state, State::failed);
  // A finite reference beyond bf16's overflow threshold may come back as Inf.
  ElementwiseCheck b = core(DType::bf16);
  r = decide(b, tensor(DType::fp64, {3.4e38, 2, 3, 4}), tensor(DType::bf16, {inf, 2, 3, 4}));
  EXPECT_EQ(r.specials.state, State::passed) << to_table(r);
}

TEST(OracleChecks, PoisonLeftInTheOutputFails) {
  const ConvProblem p = small_fwd(DType::fp16);
  const ConvCase c = sim::make_conv_case(p, signed_fill(7));
  Tensor y(DType::fp16, c.ref.dims());
  sim::poison(y);
  const Report r = run(c, y, sim::plan_of({Order::sequential}, c.kmax, p.src));
  EXPECT_EQ(r.specials.nan_mismatch, y.numel());
  EXPECT_EQ(r.state, State::failed);
}

TEST(OracleChecks, AllZeroCandidateIsUntrusted) {
  const ConvProblem p = small_fwd(DType::bf16);
  const ConvCase c = sim::make_conv_case(p, signed_fill(8));
  const Tensor zeros(DType::bf16, c.ref.dims());
  const Report r = run(c, zeros, sim::plan_of({Order::sequential}, c.kmax, p.src));
  EXPECT_EQ(r.trust.state, State::untrusted);
  EXPECT_NE(r.state, State::passed);
}

TEST(OracleChecks, ZeroHeavyReferenceIsUntrustedEvenWhenEqual) {
  ElementwiseCheck big = core();
  big.dims = {40};
  big.bound2.assign(40, 1.0);
  big.scale.assign(40, 1.0);
  Tensor ref0(DType::fp64, {40}), cand0(DType::fp32, {40});
  ref0.set(7, 1.0);
  cand0.set(7, 1.0);
  Options o;
  const Report r = decide(big, ref0, cand0, o);  // 97.5% zeros
  EXPECT_EQ(r.tier2.state, State::passed);
  EXPECT_EQ(r.trust.state, State::untrusted);
  EXPECT_EQ(r.state, State::untrusted);
  // Candidate zeros: trusted where the reference lies within its bound of
  // zero, untrusted where it stands clear of it.
  ElementwiseCheck c = core();
  c.bound2.assign(4, 0.6);
  const Report z = decide(c, tensor(DType::fp64, {0.5, 0.5, 0.5, 1}), tensor(DType::fp32, {0, 0, 0.5, 1}), o);
  EXPECT_EQ(z.tier2.state, State::passed);
  EXPECT_EQ(z.state, State::passed);  // |ref| 0.5 is within the bound 0.6 of zero
  c.bound2.assign(4, 0.4);
  Tensor cz = tensor(DType::fp32, {0, 0, 0.5, 1});
  const Report w = decide(c, tensor(DType::fp64, {0.5, 0.5, 0.5, 1}), cz, o);
  EXPECT_EQ(w.trust.state, State::untrusted);  // zeros where |ref| 0.5 exceeds the bound 0.4
  EXPECT_EQ(w.tier2.state, State::failed);
}

// The fp16 underflow case RapidCheck found: a correct kernel's output of
// noise level (|ref| far below its bound) rounds to zero. Every element is
// within its bound of zero, so a candidate of zeros would pass as well: the
// tiers pass, and the comparison proves nothing (not a candidate's fault).
TEST(OracleChecks, ReferenceWithinTheBoundOfZeroProvesNothing) {
  ElementwiseCheck c = core(DType::fp16);
  c.bound2 = {0.47, 0.47, 2.1, 2.1};
  const Report r = decide(c, tensor(DType::fp64, {4.967e-08, -4.967e-08, 5.96e-07, -5.96e-07}),
                          tensor(DType::fp16, {0, -5.96046448e-08, 5.96046448e-07, -5.96046448e-07}), Options{});
  EXPECT_EQ(r.tier2.state, State::passed);
  EXPECT_EQ(r.trust.state, State::untrusted);
  EXPECT_TRUE(r.trust.proves_nothing) << r.trust.reason;
  // One element clear of its bound: 75% zero-like, judged; the candidate's
  // zero there fails tier 2 and the candidate's zeros are counted (cand 0.25).
  c.bound2 = {0.47, 0.47, 2.1, 1e-9};
  const Report q = decide(c, tensor(DType::fp64, {4.967e-08, -4.967e-08, 5.96e-07, -5.96e-07}),
                          tensor(DType::fp16, {0, 0, 5.96046448e-07, 0}), Options{});
  EXPECT_EQ(q.tier2.state, State::failed);
  EXPECT_DOUBLE_EQ(q.trust.cand_zero_fraction, 0.75);
  EXPECT_DOUBLE_EQ(q.trust.ref_zero_fraction, 0.75);
}

// "Within its bound of zero" is where a zero candidate passes every tier
// that applies: a tier-2 bound looser than the reference alone does not make
// an element zero-like when tier 3 (or tier 1 on an exact element) would
// fail a zero there (the long dot products of the oracle self-test).
TEST(OracleChecks, ZeroLikeMeansAZeroCandidatePassesEveryTier) {
  const Tensor ref = tensor(DType::fp64, {1, -1, 2, -2});
  const Tensor cand = tensor(DType::fp32, {1, -1, 2, -2});
  ElementwiseCheck c = core();
  c.bound2.assign(4, 3.0);  // every |ref| inside the rigorous bound
  const Report loose = decide(c, ref, cand, Options{});
  EXPECT_EQ(loose.trust.state, State::untrusted);
  EXPECT_TRUE(loose.trust.proves_nothing) << loose.trust.reason;
  c.bound3.assign(4, 0.5);  // the probabilistic bound pins every element
  const Report pinned = decide(c, ref, cand, Options{});
  EXPECT_EQ(pinned.trust.state, State::passed) << pinned.trust.reason;
  EXPECT_DOUBLE_EQ(pinned.trust.ref_zero_fraction, 0.0);
  c.bound3.clear();
  c.exact_ok.assign(4, 1);  // tier 1 on every element: a zero fails it
  const Report exact = decide(c, ref, cand, Options{});
  EXPECT_EQ(exact.trust.state, State::passed) << exact.trust.reason;
}

// GroupNorm + ReLU: outputs the ReLU clamps are zero by construction and do
// not count as the reference's zeros; an output the ReLU clamps almost
// everywhere proves nothing; one it clamps by half is judged on the rest.
TEST(OracleChecks, FusedReluZeroShareCountsTheUnclampedElements) {
  const GroupNormProblem p = std::get<GroupNormProblem>(parse_descriptor("groupnorm.fwd fp32 n1 c4 g1 d5 h1 w1 relu"));
  const std::int64_t n = 20;
  Tensor x(DType::fp32, {1, 5, 1, 1, 4}), gamma(DType::fp32, {4}), beta(DType::fp32, {4});
  double sum = 0, sq = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x.set(i, static_cast<double>(i) - 9.5);
    sum += x.get(i);
  }
  const double mu = sum / n;
  for (std::int64_t i = 0; i < n; ++i) sq += (x.get(i) - mu) * (x.get(i) - mu);
  const double var = sq / n;
  Tensor mean(DType::fp64, {1, 1}), rstd(DType::fp64, {1, 1}), vt(DType::fp64, {1, 1});
  mean.set(0, mu);
  vt.set(0, var);
  rstd.set(0, 1 / std::sqrt(var + p.eps));
  const ReductionPlan plan = sim::gn_plan(p.group_size(), false);
  auto judge = [&](double b, bool zero_unclamped) {
    Tensor want(DType::fp64, x.dims()), got(DType::fp32, x.dims());
    for (std::int64_t ch = 0; ch < 4; ++ch) {
      gamma.set(ch, 1.0);
      beta.set(ch, b);
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const double y = std::max(0.0, (x.get(i) - mu) * rstd.get(0) + b);
      want.set(i, y);
      got.set(i, zero_unclamped ? 0.0 : y);
    }
    GroupNormInputs in{&x, nullptr, &gamma, &beta, &mean, &rstd, &vt};
    Fill f;
    f.kind = FillKind::signed_;
    return compare_groupnorm(p, Role::y, want, got, in, plan, f);
  };
  const Report half = judge(0.0, false);  // about half the outputs clamped
  EXPECT_EQ(half.state, State::passed) << to_table(half);
  EXPECT_NEAR(half.trust.relu_clamped_fraction, 0.5, 0.01);
  EXPECT_DOUBLE_EQ(half.trust.ref_zero_fraction, 0.0);
  const Report all = judge(-100.0, false);  // every output clamped
  EXPECT_EQ(all.tier2.state, State::passed);
  EXPECT_EQ(all.state, State::untrusted);
  EXPECT_TRUE(all.trust.proves_nothing);
  EXPECT_NE(all.trust.reason.find("ReLU clamps"), std::string::npos) << all.trust.reason;
  const Report lazy = judge(0.0, true);  // a candidate of zeros where the ReLU passes values
  EXPECT_EQ(lazy.state, State::failed);
  EXPECT_DOUBLE_EQ(lazy.trust.cand_zero_fraction, 1.0);
}

TEST(OracleChecks, ShapeMismatchAndBadInputsThrow) {
  ElementwiseCheck c = core();
  EXPECT_THROW(decide(c, tensor(DType::fp64, {1, 2, 3, 4}), tensor(DType::fp32, {1, 2, 3})), std::invalid_argument);
  EXPECT_THROW(decide(c, tensor(DType::fp32, {1, 2, 3, 4}), tensor(DType::fp32, {1, 2, 3, 4})), std::invalid_argument);
}

TEST(OracleChecks, TableAndJsonCarryTheEvidence) {
  const ConvProblem p = small_fwd(DType::bf16);
  const ConvCase c = sim::make_conv_case(p, signed_fill(9));
  Tensor y = sim::run_conv(c, {Order::sequential});
  y.set(3, y.get(3) + 1.0);
  const Report r = run(c, y, sim::plan_of({Order::sequential}, c.kmax, p.src));
  const std::string t = to_table(r);
  EXPECT_NE(t.find("conv3d.fwd y: failed"), std::string::npos) << t;
  EXPECT_NE(t.find("tier2 rigorous"), std::string::npos);
  EXPECT_NE(t.find("worst elements"), std::string::npos);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["tier2"]["state"], "failed");
  EXPECT_EQ(j["tier2"]["worst"][0]["index"], 3);
  EXPECT_EQ(j["tier2"]["worst"][0]["coord"], nlohmann::json(unravel(3, y.dims())));
  EXPECT_TRUE(j.contains("stats"));
  EXPECT_TRUE(j.contains("trust"));
  EXPECT_TRUE(j.contains("nan_inf"));
  EXPECT_EQ(j["descriptor"], r.descriptor);
}

TEST(OracleChecks, StatisticsReportDrift) {
  // A biased candidate inside the bounds shows a nonzero signed mean.
  ElementwiseCheck c = core();
  const Report r = decide(c, tensor(DType::fp64, {1, 2, 3, 4}), tensor(DType::fp32, {1.5, 2.5, 3.5, 4.5}));
  EXPECT_EQ(r.state, State::passed);
  EXPECT_DOUBLE_EQ(r.stats.mean_signed_scaled, 0.5);
  EXPECT_DOUBLE_EQ(r.stats.max_scaled, 0.5);
  EXPECT_DOUBLE_EQ(r.stats.mean_signed_error, 0.5);
}

TEST(OracleChecks, GroupNormConstantGroupsAreExactAndDxBoundFails) {
  GroupNormProblem p;
  p.n = 2;
  p.c = 8;
  p.groups = 2;
  p.spatial = {2, 3, 4};
  p.src = DType::bf16;
  Fill f;
  f.kind = FillKind::gn_exact;
  f.mean = 100;
  f.constant = true;
  f.seed = 3;
  sim::GnCase gc = sim::make_gn_case(p, f);
  sim::GnOutputs o = sim::run_gn(gc, false);
  GroupNormInputs in{&gc.x, nullptr, &gc.gamma, &gc.beta, &gc.mean, &gc.rstd, &gc.var};
  const ReductionPlan plan = sim::gn_plan(p.group_size(), false);
  Report r = compare_groupnorm(p, Role::y, gc.y_ref, o.y, in, plan, f);
  EXPECT_EQ(r.tier1.state, State::passed) << to_table(r);
  o.y.set(0, o.y.get(0) + 1e-3);
  r = compare_groupnorm(p, Role::y, gc.y_ref, o.y, in, plan, f);
  EXPECT_EQ(r.tier1.state, State::failed);

  p.dir = GnDir::bwd;
  Fill s;
  s.kind = FillKind::signed_;
  s.seed = 4;
  gc = sim::make_gn_case(p, s);
  o = sim::run_gn(gc, true);
  GroupNormInputs bi{&gc.x, &gc.dy, &gc.gamma, &gc.beta, &gc.mean_fed, &gc.rstd_fed, nullptr};
  r = compare_groupnorm(p, Role::dx, gc.y_ref, o.y, bi, sim::gn_plan(p.group_size(), true), s);
  EXPECT_EQ(r.state, State::passed) << to_table(r);
  const double b = r.tier2.worst[0].bound;
  const std::int64_t at = r.tier2.worst[0].index;
  Tensor bad = o.y.to(DType::fp32);
  bad.set(at, gc.y_ref.get(at) + 3 * b + 0.02 * std::fabs(gc.y_ref.get(at)));
  Tensor bad_bf = bad.to(DType::bf16);
  r = compare_groupnorm(p, Role::dx, gc.y_ref, bad_bf, bi, sim::gn_plan(p.group_size(), true), s);
  EXPECT_EQ(r.tier2.state, State::failed) << to_table(r);
  EXPECT_THROW(compare_groupnorm(p, Role::y, gc.y_ref, o.y, bi, plan, s), std::invalid_argument);
}

}  // namespace
}  // namespace kgate::oracle

namespace kgate::sim {

TEST(SimModel, Cdna3ChunkTruncatesWhereIeeeRounds) {
  // 1 + 1.5*2^-24: the chunk keeps 24 fractional bits (2^-24, truncated),
  // then 1 + 2^-24 is a tie that rounds to even: 1. IEEE gives 1 + 2^-23.
  const double p[8] = {1.0, 1.5 * std::ldexp(1.0, -24), 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(cdna3_chunk(0.0f, p, 8), 1.0f);
  EXPECT_EQ(static_cast<float>(p[0] + p[1]), 1.0f + std::ldexp(1.0f, -23));
  // Integers are exact.
  const double q[8] = {1, 2, 3, 4, -5, 6, 7, 8};
  EXPECT_EQ(cdna3_chunk(100.0f, q, 8), 126.0f);
}

TEST(SimModel, ReferenceDotIsExactForFloats) {
  const float a[3] = {1e8f, 1.0f, -1e8f}, b[3] = {1.0f, 1.0f, 1.0f};
  double v, abs;
  reference_dot(a, b, 3, &v, &abs);
  EXPECT_EQ(v, 1.0);
  EXPECT_EQ(abs, 2e8 + 1);
}

TEST(SimModel, AllConvDirectionsAgreeWithEachOther) {
  // <dy, conv(x, w)> = <dx(dy, w), x> = <dw(x, dy), w>: the three directions
  // of the simulated reference are adjoint (the test of the term enumeration).
  for (ConvOp op : {ConvOp::conv3d, ConvOp::conv_transpose3d}) {
    ConvProblem p;
    p.op = op;
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
    p.src = p.dst = DType::fp32;
    Fill f;
    f.kind = FillKind::signed_;
    f.seed = 5;
    ConvProblem fw = p, bd = p, bw = p;
    bd.dir = ConvDir::bwd_data;
    bw.dir = ConvDir::bwd_weight;
    const ConvCase cf = make_conv_case(fw, f), cd = make_conv_case(bd, f), cw = make_conv_case(bw, f);
    // Same seed: x (role x) and w (role w) and dy (role dy) agree across cases.
    const Tensor& x = cf.in0;
    const Tensor& w = cf.in1;
    const Tensor& dy = cd.in0;
    double lhs = 0, mid = 0, rhs = 0;
    for (std::int64_t i = 0; i < dy.numel(); ++i) lhs += dy.get(i) * cf.ref.get(i);
    for (std::int64_t i = 0; i < x.numel(); ++i) mid += cd.ref.get(i) * x.get(i);
    for (std::int64_t i = 0; i < w.numel(); ++i) rhs += cw.ref.get(i) * w.get(i);
    EXPECT_NEAR(lhs, mid, 1e-9 * std::fabs(lhs) + 1e-9) << name(op);
    EXPECT_NEAR(lhs, rhs, 1e-9 * std::fabs(lhs) + 1e-9) << name(op);
  }
}

}  // namespace kgate::sim

namespace kgate::oracle {
namespace {

TEST(OracleChecks, GroupNormStatisticsAndParameterGradientsFailWhenPerturbed) {
  GroupNormProblem p;
  p.n = 2;
  p.c = 8;
  p.groups = 2;
  p.spatial = {2, 3, 4};
  p.src = DType::fp32;
  Fill f;
  f.kind = FillKind::signed_;
  f.seed = 8;
  const sim::GnCase gc = sim::make_gn_case(p, f);
  sim::GnOutputs o = sim::run_gn(gc, false);
  GroupNormInputs in{&gc.x, nullptr, &gc.gamma, &gc.beta, &gc.mean, &gc.rstd, &gc.var};
  const ReductionPlan plan = sim::gn_plan(p.group_size(), false);
  for (Role r : {Role::mean, Role::rstd}) {
    Tensor& t = r == Role::mean ? o.mean : o.rstd;
    const Tensor& want = r == Role::mean ? gc.mean : gc.rstd;
    EXPECT_EQ(compare_groupnorm(p, r, want, t, in, plan, f).state, State::passed);
    t.set(1, t.get(1) * (1 + 1e-4) + 1e-4);
    EXPECT_EQ(compare_groupnorm(p, r, want, t, in, plan, f).tier2.state, State::failed) << name(r);
  }
  p.dir = GnDir::bwd;
  const sim::GnCase bc = sim::make_gn_case(p, f);
  sim::GnOutputs b = sim::run_gn(bc, false);
  GroupNormInputs bi{&bc.x, &bc.dy, &bc.gamma, &bc.beta, &bc.mean_fed, &bc.rstd_fed, nullptr};
  const ReductionPlan cplan = sim::gn_plan(p.n * 24, false);
  for (Role r : {Role::dgamma, Role::dbeta}) {
    Tensor& t = r == Role::dgamma ? b.dgamma : b.dbeta;
    const Tensor& want = r == Role::dgamma ? bc.dgamma_ref : bc.dbeta_ref;
    EXPECT_EQ(compare_groupnorm(p, r, want, t, bi, cplan, f).state, State::passed);
    t.set(2, t.get(2) * (1 + 1e-3) + 1e-3);
    EXPECT_EQ(compare_groupnorm(p, r, want, t, bi, cplan, f).tier2.state, State::failed) << name(r);
  }
}

// The element threads (reference/parallel.hpp) change nothing in a report:
// counts, maxima, sums, worst elements (ties included) and specials are
// the same for one thread and for many, over a tensor of many chunks.
TEST(ElementThreads, ReportIsTheSameForAnyThreadCount) {
  const std::int64_t n = 5 * kElementChunk + 123;
  ElementwiseCheck c;
  c.what = "threads";
  c.dst = DType::fp32;
  c.dims = {n};
  c.depth = 4;
  c.bound2.assign(n, 1.0);
  c.bound3.assign(n, 0.5);
  c.scale.assign(n, 1.0);
  c.exact_ok.assign(n, 0);
  Tensor ref(DType::fp64, {n}), cand(DType::fp32, {n});
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::ldexp(static_cast<double>(i % 977) - 488.0, -3);
    ref.set(i, v);
    // Equal margins in several chunks (ties broken by index), violations
    // of tier 2 in the last chunk, a NaN mismatch in the middle one.
    const double err = i % 5000 == 7 ? 0.75 : i == n - 3 ? 2.5 : 1e-3 * static_cast<double>(i % 13);
    cand.set(i, i == 3 * kElementChunk + 1 ? std::numeric_limits<double>::quiet_NaN() : v + err);
    if (i % 3 == 0) c.exact_ok[i] = 1;
  }
  Options opt;
  opt.worst_count = 5;
  const int before = element_threads();
  set_element_threads(1);
  const nlohmann::json one = to_json(decide(c, ref, cand, opt));
  set_element_threads(7);
  const nlohmann::json many = to_json(decide(c, ref, cand, opt));
  set_element_threads(before);
  EXPECT_EQ(one.dump(), many.dump());
  EXPECT_EQ(one.at("tier2").at("violations").get<std::int64_t>(), 2);  // the NaN and the 2.5
  EXPECT_EQ(one.at("nan_inf").at("first_index").get<std::int64_t>(), 3 * kElementChunk + 1);
  // The worst ties (0.75 at i % 5000 == 7 after the two violations) come in index order.
  const auto& worst = one.at("tier2").at("worst");
  ASSERT_EQ(worst.size(), 5u);
  EXPECT_EQ(worst[2].at("index").get<std::int64_t>(), 7);
  EXPECT_EQ(worst[3].at("index").get<std::int64_t>(), 5007);
}

TEST(ElementThreads, FirstExceptionReachesTheCaller) {
  const int before = element_threads();
  set_element_threads(4);
  std::atomic<std::int64_t> ran{0};
  EXPECT_THROW(parallel_chunks(8 * kElementChunk,
                               [&](std::int64_t lo, std::int64_t, std::int64_t chunk) {
                                 ++ran;
                                 if (chunk == 2) throw std::runtime_error("chunk " + std::to_string(lo));
                               }),
               std::runtime_error);
  set_element_threads(before);
  EXPECT_GE(ran.load(), 1);
}

}  // namespace
}  // namespace kgate::oracle
