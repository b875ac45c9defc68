// The convolution kernels' API contracts on the host backend: is_supported
// names its reason, plans are values (equal for equal problems, JSON round
// trip), the plan's structure (kernel family, one-tap form, split count,
// reduction per output role), a foreign plan is refused, and the oracle
// catches a planted defect in a kernel's output.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <set>

#include "kernels/api.hpp"
#include "kernels/conv3d/conv3d.hpp"
#include "kernels/conv3d/conv_kernels.hpp"
#include "kernels/conv3d/conv_plan.hpp"
#include "kernels/driver.hpp"
#include "kernels/runtime/runtime.hpp"
#include "oracles/oracle.hpp"
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"

namespace kgate {
namespace {

ConvProblem conv(const char* d) { return std::get<ConvProblem>(parse_descriptor(d)); }

TEST(ConvKernel, IsSupportedNamesItsReason) {
  ConvProblem p = conv("conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1");
  EXPECT_TRUE(kernels::is_supported(Problem(p)).ok);
  p.src = p.dst = DType::fp64;
  auto s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("dtype pair fp64"), std::string::npos) << s.reason;
  p = conv("conv3d.fwd bf16:fp16 n1 c4 k4 d4 kd1");
  s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("bf16 -> fp16"), std::string::npos) << s.reason;
  p = conv("conv3d.fwd bf16 n1 c4 k4 d4 kd1");
  p.acc = DType::fp64;
  s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("accumulator fp64"), std::string::npos) << s.reason;
  // 70000 groups: the grid's y extent (groups x column tiles) passes 65535.
  p = conv("conv3d.fwd fp32 n1 c70000 k70000 g70000 d1 kd1");
  s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("grid y"), std::string::npos) << s.reason;
  // 41^3 stride phases pass the grid's z extent.
  p = conv("conv_transpose3d.fwd fp32 n1 c1 k1 d1 kd1 s41");
  s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("grid z"), std::string::npos) << s.reason;
  EXPECT_THROW(kernels::plan(Problem(p)), std::invalid_argument);
  // 7^3 taps on the one phase of a stride-1 backward-data (6^3 fit).
  p = conv("conv3d.bwd_data fp32 n1 c1 k1 d11 kd7");
  s = kernels::is_supported(Problem(p));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("taps in one stride phase"), std::string::npos) << s.reason;
  EXPECT_TRUE(kernels::is_supported(Problem(conv("conv3d.bwd_data fp32 n1 c1 k1 d11 kd6"))).ok);
}

TEST(ConvKernel, PlansAreValuesWithTheirStructure) {
  struct Case {
    const char* d;
    const char* kernel;
    const char* role;
  };
  for (const Case& c : {Case{"conv3d.fwd bf16 n1 c8 k8 d6 kd3 p1 bias", "conv_contract", "y"},
                        Case{"conv3d.bwd_data bf16 n1 c8 k8 d6 kd3 s2 p1", "conv_scatter", "dx"},
                        Case{"conv3d.bwd_weight bf16 n1 c8 k8 d6 kd3 p1", "conv_wgrad", "dw"},
                        Case{"conv_transpose3d.fwd bf16 n1 c8 k8 d6 kd2 s2", "conv_scatter_one_tap", "y"},
                        Case{"conv_transpose3d.bwd_data bf16 n1 c8 k8 d6 kd2 s2", "conv_contract", "dx"},
                        Case{"conv_transpose3d.bwd_weight bf16 n1 c8 k8 d6 kd2 s2", "conv_wgrad", "dw"}}) {
    const Problem p = parse_descriptor(c.d);
    const kernels::Plan a = kernels::plan(p);
    EXPECT_EQ(a, kernels::plan(parse_descriptor(to_descriptor(p)))) << c.d;
    EXPECT_EQ(kernels::plan_from_json(kernels::to_json(a)), a) << c.d;
    EXPECT_EQ(a.steps.at(0).kernel, c.kernel) << c.d;
    ASSERT_TRUE(a.reduction.count(c.role)) << c.d;
  }
  // Scatter: the most taps one phase can see (k3 s2: 2 per axis) x channels.
  EXPECT_EQ(kernels::plan(parse_descriptor("conv3d.bwd_data bf16 n1 c8 k6 d6 kd3 s2 p1")).reduction.at("dx").length,
            8 * 6);
  // Backward-weight with bias: dw and db, each a split tree.
  const kernels::Plan w = kernels::plan(parse_descriptor("conv3d.bwd_weight fp32 n2 c8 k8 d13 kd3 p1 bias"));
  EXPECT_EQ(w.reduction.at("dw").splits, w.params.at("splits"));
  EXPECT_EQ(w.reduction.at("dw").combine, PartialCombine::tree);
  EXPECT_EQ(w.reduction.at("db").splits, w.params.at("db_splits"));
  EXPECT_GT(w.workspace_bytes, 0u);
  EXPECT_EQ(w.params.at("tree_runs"), 1);
}

// conv_tree's runs per workgroup: one for the few-element trees over many
// splits (every work-item the device has), more only where kTreeWideGroups
// workgroups remain; the grid covers every element once.
TEST(ConvKernel, TreeRunsKeepTheDeviceFull) {
  namespace cv = kernels::cv;
  namespace pol = kernels::conv_policy;
  const auto runs = [](std::int64_t n) { return kernels::conv_tree_for(n, 2).runs; };
  EXPECT_EQ(runs(64 * 27 * 3), 1);
  EXPECT_EQ(runs(std::int64_t{cv::kThreads} * pol::kTreeWideGroups * 2 - 1), 1);
  EXPECT_EQ(runs(std::int64_t{cv::kThreads} * pol::kTreeWideGroups * 2), 2);
  EXPECT_EQ(runs(std::int64_t{2048} * 27 * 2048), pol::kTreeMaxRuns);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{5184}, std::int64_t{1} << 20, std::int64_t{3} << 21,
                         std::int64_t{2048} * 27 * 2048, std::int64_t{5} << 31}) {
    const kernels::ConvTree t = kernels::conv_tree_for(n, 2);
    const std::int64_t per = std::int64_t{cv::kThreads} * t.runs, groups = t.workgroups;
    EXPECT_GE(groups * per, n) << n;
    EXPECT_LT((groups - 1) * per, n) << n;
    if (t.runs > 1) {
      EXPECT_GE(groups, pol::kTreeWideGroups) << n;
    }
  }
}

// conv_tree_split (one workgroup per element, a level's pairs side by side)
// forms every pair's sum as conv_tree does: the same bits on partials whose
// sums round differently in another order; the plans choose it where few
// elements meet many splits, for dw and db alike.
TEST(ConvKernel, SplitTreeMatchesTheTreeBitForBit) {
  namespace cv = kernels::cv;
  for (const std::int64_t splits : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}, std::int64_t{64},
                                    std::int64_t{129}, std::int64_t{1024}}) {
    SCOPED_TRACE(splits);
    const std::int64_t numel = 3;
    std::vector<float> h(static_cast<std::size_t>(splits * numel));
    for (std::size_t i = 0; i < h.size(); ++i)  // magnitudes over 2^20: most sums round
      h[i] = std::ldexp(1.0f + static_cast<float>((i * 2654435761u) % 8191) / 8192.0f, static_cast<int>(i % 21)) *
             (i % 3 ? 1.0f : -1.0f);
    rt::DeviceBuffer<float> a(h.size()), b(h.size()), oa(numel), ob(numel);
    a.upload(h);
    b.upload(h);
    KGATE_LAUNCH((cv::conv_tree<float>), (rt::LaunchConfig{rt::dim3(1), rt::dim3(cv::kThreads)}),
                 cv::TreeArgs{a.data(), numel, splits, oa.data()});
    KGATE_LAUNCH((cv::conv_tree_split<float>), (rt::LaunchConfig{rt::dim3(numel), rt::dim3(cv::kThreads)}),
                 cv::TreeArgs{b.data(), numel, splits, ob.data()});
    const auto x = oa.download(), y = ob.download();
    for (std::int64_t e = 0; e < numel; ++e) EXPECT_EQ(std::bit_cast<std::uint32_t>(x[e]), std::bit_cast<std::uint32_t>(y[e])) << e;
    // Not the sequential sum (the check would pass a kernel that ignores the tree).
    if (splits == 1024) {
      float seq = 0.0f;
      for (std::int64_t s = 0; s < splits; ++s) seq += h[static_cast<std::size_t>(s * numel)];
      EXPECT_NE(std::bit_cast<std::uint32_t>(seq), std::bit_cast<std::uint32_t>(y[0]));
    }
  }
  const kernels::Plan many = kernels::plan(Problem(conv("conv3d.bwd_weight bf16 n1 c64 k6 d128 kd1 bias")));
  EXPECT_EQ(many.steps.at(1).kernel, "conv_tree_split");
  EXPECT_EQ(many.steps.at(1).grid[0], 6u * 64u);
  EXPECT_EQ(many.steps.back().kernel, "conv_tree_split");
  const kernels::Plan few = kernels::plan(Problem(conv("conv3d.bwd_weight bf16 n1 c64 k64 d16 kd3 p1")));
  EXPECT_EQ(few.steps.at(1).kernel, "conv_tree");
  namespace pol = kernels::conv_policy;
  EXPECT_FALSE(kernels::conv_tree_for(pol::kTreeSplitMaxNumel + 1, 1024).by_split);
  EXPECT_FALSE(kernels::conv_tree_for(1, pol::kTreeSplitMinSplits - 1).by_split);
  EXPECT_TRUE(kernels::conv_tree_for(pol::kTreeSplitMaxNumel, pol::kTreeSplitMinSplits).by_split);
}

// A plan is executed as handed (kernels/conv3d/conv_plan.hpp): its choices
// are read from it and checked, the rest derived again. A plan of another
// problem whose grid does not fit this one, a changed derived field, a
// choice out of range or a parameter the plan does not have is refused
// with the field named, before any kernel runs.
TEST(ConvKernel, RefusesAForeignOrAlteredPlan) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1");
  const Problem q = parse_descriptor("conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1");
  const auto in = ref::make_inputs(p, parse_fill("signed", 1));
  const auto refused = [&](const Problem& prob, const kernels::Plan& pl, const char* field) {
    const auto ins = ref::make_inputs(prob, parse_fill("signed", 1));
    try {
      kernels::run(prob, pl, kernels::pointers(ins));
      ADD_FAILURE() << "not refused: " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused(p, kernels::plan(q), "steps[0]");
  kernels::Plan pl = kernels::plan(p);
  pl.steps[0].grid[1] += 1;
  refused(p, pl, "steps[0]");
  pl = kernels::plan(p);
  pl.params["bn"] = 3;
  refused(p, pl, "bn");
  pl = kernels::plan(p);
  pl.params["extra"] = 1;
  refused(p, pl, "params.extra");
  pl = kernels::plan(p);
  pl.params.erase("bn");
  refused(p, pl, "params.bn");
  pl = kernels::plan(p);
  pl.op = "conv3d.bwd_data";
  refused(p, pl, "op");
  // Backward-weight: its slice is a choice; a slice past the rows is not.
  const Problem w = parse_descriptor("conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias");
  pl = kernels::plan(w);
  pl.params["slice"] = 1000;
  refused(w, pl, "slice");
  pl = kernels::plan(w);
  pl.params["slice"] = 7;  // 36 slices of 7 rows cover the 250, fewer do not
  refused(w, pl, "splits");
  pl = kernels::plan(w);
  pl.reduction.at("dw").splits += 1;
  refused(w, pl, "reduction");
  pl = kernels::plan(w);
  pl.workspace_bytes -= 4;
  refused(w, pl, "workspace_bytes");
  // Matrix cores: a tap split of every tap leaves one split (refused), and
  // a W-halo step the geometry has none of.
  const Problem m = parse_descriptor("conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias");
  pl = kernels::plan(m);
  pl.params["tap_split"] = 27;
  refused(m, pl, "tap_split");
}

// A valid plan other than the one kgate chooses (another portable work
// shape, another backward-weight slice, a split of K the policy would not
// take) runs as handed: the launches are its steps and the bits are those
// of kgate's own plan on the exact fill.
TEST(ConvKernel, RunsTheHandedPlan) {
  struct Case {
    const char* d;
    std::vector<std::pair<const char*, std::int64_t>> set;
  };
  for (const Case& c : {Case{"conv3d.fwd fp32 n1 c4 k8 d4 kd3 p1 bias", {{"bn", 1}}},
                        Case{"conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias", {{"splits", 36}, {"slice", 7}}},
                        Case{"conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias", {{"db_splits", 90}, {"db_slice", 3}}},
                        Case{"conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", {{"tap_split", 9}}},
                        Case{"conv_transpose3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", {{"tap_split", 5}}}}) {
    const std::string key = c.set.back().first;
    SCOPED_TRACE(std::string(c.d) + " " + key);
    const Problem p(conv(c.d));
    const kernels::Plan own = kernels::plan(p);
    kernels::Plan alt = own;
    for (const auto& [k, v] : c.set) {
      ASSERT_NE(own.params.count(k) ? own.params.at(k) : -1, v) << k;
      alt.params[k] = v;
    }
    const ConvProblem& cp = std::get<ConvProblem>(p);
    EXPECT_THROW(kernels::conv_plan_from(cp, alt), std::invalid_argument);  // its derived fields are stale
    alt = kernels::complete_conv_plan(cp, alt);
    EXPECT_NO_THROW(kernels::conv_plan_from(cp, alt));
    for (const auto& [k, v] : c.set) EXPECT_EQ(alt.params.at(k), v) << k;
    const Fill f = lattice_fill(p, 3);
    const auto in = ref::make_inputs(p, f);
    const auto a = kernels::run(p, own, kernels::pointers(in));
    rt::LaunchTrace trace;
    const auto b = kernels::run(p, alt, kernels::pointers(in));
    EXPECT_EQ(trace.records().size(), alt.steps.size());
    for (const auto& [role, t] : a)
      for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), b.at(role).get(i)) << name(role) << " " << i;
  }
}

// A run's launches are its plan's steps (every run checks it); a plan whose
// step count, grid, block or LDS differ from the launches is caught.
TEST(ConvKernel, LaunchesAreThePlansSteps) {
  for (const char* d : {"conv3d.fwd bf16 n1 c16 k16 d8 kd3 p1", "conv3d.fwd fp32 n1 c4 k4 d4 kd3 p1",
                        "conv_transpose3d.fwd fp32 n1 c4 k4 d4 kd2 s2", "conv3d.bwd_weight fp32 n1 c4 k6 d4 kd3 p1 bias"}) {
    SCOPED_TRACE(d);
    const Problem p(conv(d));
    const kernels::Plan pl = kernels::plan(p);
    const auto in = ref::make_inputs(p, parse_fill("signed", 1));
    rt::LaunchTrace trace;
    kernels::run(p, pl, kernels::pointers(in));
    ASSERT_EQ(trace.records().size(), pl.steps.size());
    EXPECT_NO_THROW(kernels::check_launches(pl, trace.records()));
    for (int field = 0; field < 4; ++field) {
      kernels::Plan bad = pl;
      if (field == 0) bad.steps.push_back(bad.steps.back());
      if (field == 1) bad.steps[0].grid[0] += 1;
      if (field == 2) bad.steps[0].block[2] = 2;
      if (field == 3) bad.steps.back().lds_bytes = 16;
      try {
        kernels::check_launches(bad, trace.records());
        ADD_FAILURE() << "altered field " << field << " not caught";
      } catch (const std::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find(field == 0 ? "steps, the run made" : "plan step"), std::string::npos)
            << e.what();
      }
    }
  }
}

// The gate's check of a kernel output can fail: one element changed
// fails tier 1 on the lattice fill.
TEST(ConvKernel, OracleCatchesAPlantedDefect) {
  const Problem p = parse_descriptor("conv3d.bwd_data bf16 n1 c8 k8 d6 kd3 s2 p1");
  const auto& cp = std::get<ConvProblem>(p);
  const Fill f = lattice_fill(p, 3);
  const auto in = ref::make_inputs(p, f);
  const kernels::Plan plan = kernels::plan(p);
  auto got = kernels::run(p, plan, kernels::pointers(in));
  const ref::Inputs rin = ref::refs(in);
  const auto want = ref::run_reference(p, rin, ref::Impl::fast);
  const auto abs = ref::abs_companion(p, rin);
  auto judge = [&](const Tensor& t) {
    return oracle::compare_conv(cp, Role::dx, want.at(Role::dx), abs.at(Role::dx), t, plan.reduction.at("dx"), f);
  };
  EXPECT_EQ(judge(got.at(Role::dx)).state, oracle::State::passed);
  Tensor& dx = got.at(Role::dx);
  dx.set(dx.numel() / 2, 2.0 * dx.get(dx.numel() / 2) + 1.0);
  EXPECT_EQ(judge(dx).state, oracle::State::failed);
}

// The matrix-core kernel (conv_mma) on each emulated target's numerics
// (gfx942 cdna3, sm_90 round-toward-zero), for the contract family and the
// scatter family (stride 1, stride 2 with several taps per phase, the
// one-tap k2 s2 up-sampling), with channel counts that take the 16-byte
// loads and ones that do not (12 and 20 channels, several block steps and a
// partial atom chunk per tap): the plan declares the target's model, tier 3
// is off for both (their errors are biased), a correct kernel passes tier 2
// on random data, and one element moved by twice its tier-2 bound fails.
TEST(ConvKernel, MatrixCoreModelsPassAndAPlantedDefectFails) {
  struct Case {
    const char* d;
    const char* kernel;
    Role role;
  };
  const Case cases[] = {
      {"conv3d.fwd bf16:fp32 n1 c64 k32 d6 kd3 p1", "conv_contract_mma", Role::y},
      {"conv3d.fwd fp16:fp32 n2 c44 k20 d9 h10 w11 kd3 s2 p1 bias", "conv_contract_mma", Role::y},
      {"conv3d.bwd_data bf16:fp32 n1 c32 k64 d6 kd3 p1", "conv_scatter_mma", Role::dx},
      {"conv3d.bwd_data bf16:fp32 n1 c24 k12 d11 kd3 s2 p1", "conv_scatter_mma", Role::dx},
      {"conv_transpose3d.fwd bf16:fp32 n1 c64 k32 d6 kd2 s2 bias", "conv_scatter_mma", Role::y},
      {"conv3d.fwd bf16:fp32 n1 c24 k64 d4 h3 w32 kd3 p1 bias", "conv_contract_mma", Role::y},  // sm_90: W-halo step
      // sm_90: the W-halo step over L's W 16 (S's is 14)
      {"conv3d.bwd_data bf16:fp32 n1 c32 k64 d4 h4 w16 kd3", "conv_scatter_mma", Role::dx},
  };
  for (const rt::Target target : {rt::Target::gfx942, rt::Target::sm90}) {
    rt::host::ScopedConfig cfg(rt::host::config_for(target, rt::host::config()));
    for (const Case& c : cases) {
      const Problem p = parse_descriptor(c.d);
      const auto& cp = std::get<ConvProblem>(p);
      const kernels::Plan plan = kernels::plan(p);
      ASSERT_EQ(plan.steps.at(0).kernel, c.kernel) << c.d;
      const ReductionPlan red = plan.reduction.at(std::string(name(c.role)));
      EXPECT_EQ(red.model, target == rt::Target::sm90 ? AccumModel::mma_sm90 : AccumModel::mfma_cdna3) << c.d;
      const Fill f = parse_fill("positive", 11);  // same-sign terms: the one-sided error adds up
      const auto in = ref::make_inputs(p, f);
      auto got = kernels::run(p, plan, kernels::pointers(in));
      const ref::Inputs rin = ref::refs(in);
      const auto want = ref::run_reference(p, rin, ref::Impl::fast);
      const auto abs = ref::abs_companion(p, rin);
      auto judge = [&](const Tensor& t) {
        return oracle::compare_conv(cp, c.role, want.at(c.role), abs.at(c.role), t, red, f);
      };
      const oracle::Report ok = judge(got.at(c.role));
      EXPECT_EQ(ok.state, oracle::State::passed) << c.d << "\n" << oracle::to_table(ok);
      EXPECT_EQ(ok.tier3.state, oracle::State::not_applicable) << c.d;
      ASSERT_FALSE(ok.tier2.worst.empty()) << c.d;
      const oracle::WorstElement& w = ok.tier2.worst.front();
      Tensor& y = got.at(c.role);
      y.set(w.index, w.reference + 2.0 * w.bound);
      EXPECT_EQ(judge(y).state, oracle::State::failed) << rt::target_name(target) << " " << c.d;
    }
  }
}

// A 1x1x1-kernel problem of op-dir `op` with c channels on both sides and
// `rows` positions (the plans' sweeps below).
ConvProblem sweep_problem(const std::string& op, std::int64_t c, std::int64_t rows, DType t = DType::fp32) {
  ConvProblem p = conv((op + " fp32 n1 c1 k1 d1 kd1").c_str());
  p.cin = p.cout = c;
  p.in = {1, 1, rows};
  p.src = p.dst = t;
  return p;
}

std::int64_t param_or(const kernels::Plan& pl, const char* k, std::int64_t d) {
  const auto it = pl.params.find(k);
  return it == pl.params.end() ? d : it->second;
}

// The boundary problems reach every value the plan selects over a sweep of
// problems (computed here from plans, independently of the generator):
// every main kernel of the family, every bn with a ragged and (where one
// exists) a full last column tile, every dtype pair, matrix cores for every
// pair that has them, split counts 1, 2, an odd one and the most (dw and db),
// one-tap and general scatter, one and several phases, scatter on matrix
// cores for every pair that has them, backward-weight on
// matrix cores for every pair that has them, the smallest problem;
// each problem is supported, of its op-dir and listed once.
TEST(ConvKernel, BoundaryProblemsReachEveryPlanValue) {
  for (const char* op : {"conv3d.fwd", "conv3d.bwd_data", "conv3d.bwd_weight", "conv_transpose3d.fwd",
                         "conv_transpose3d.bwd_data", "conv_transpose3d.bwd_weight"}) {
    SCOPED_TRACE(op);
    const auto probs = kernels::boundary_problems(op);
    ASSERT_FALSE(probs.empty());
    // What the plan can select (sweeps).
    std::set<std::int64_t> want_bn, want_full_bn;
    for (std::int64_t c = 1; c <= 1024; ++c) {
      const kernels::Plan pl = kernels::plan(Problem(sweep_problem(op, c, 1)));
      want_bn.insert(param_or(pl, "bn", 1));
      if (c % (param_or(pl, "tile_n", 1) * param_or(pl, "bn", 1)) == 0) want_full_bn.insert(param_or(pl, "bn", 1));
    }
    const kernels::Plan one = kernels::plan(Problem(sweep_problem(op, 1, 1)));
    const bool wgrad = one.steps.front().kernel == "conv_wgrad";
    const bool scatter = one.steps.front().kernel.find("scatter") != std::string::npos;
    const bool contract = !wgrad && !scatter;
    const std::int64_t most_splits =
        wgrad ? kernels::plan(Problem(sweep_problem(op, 1, std::int64_t{1} << 22))).params.at("splits") : 1;

    std::set<std::string> kernels_seen, pairs, mma_pairs, descriptors;
    std::set<std::int64_t> bn_ragged, bn_full, splits, db_splits, phases, one_tap;
    bool smallest = false, odd_split = false, tap_split = false;
    for (const auto& b : probs) {
      SCOPED_TRACE(b.why);
      EXPECT_EQ(op_dir_name(b.problem), op);
      ASSERT_TRUE(kernels::is_supported(b.problem));
      EXPECT_TRUE(descriptors.insert(to_descriptor(b.problem)).second) << "twice";
      const auto& p = std::get<ConvProblem>(b.problem);
      const kernels::Plan pl = kernels::plan(b.problem);
      kernels_seen.insert(pl.steps.front().kernel);
      const std::string pair = std::string(name(p.src)) + ":" + std::string(name(p.dst));
      pairs.insert(pair);
      if (pl.steps.front().kernel.find("_mma") != std::string::npos) mma_pairs.insert(pair);
      const ref::detail::ConvGeom g = ref::detail::make_geom(p);
      if (pl.params.count("bn")) {
        const std::int64_t n = contract ? g.csg : g.clg;
        const std::int64_t cols = pl.params.at("tile_n") * pl.params.at("bn");
        (n % cols ? bn_ragged : bn_full).insert(pl.params.at("bn"));
      }
      if (wgrad) {
        splits.insert(pl.params.at("splits"));
        odd_split |= pl.params.at("splits") > 2 && pl.params.at("splits") % 2 == 1;
        if (pl.params.count("db_splits")) db_splits.insert(pl.params.at("db_splits"));
      }
      if (scatter) {
        phases.insert(pl.params.at("phases"));
        one_tap.insert(pl.params.at("one_tap"));
      }
      tap_split |= pl.params.count("tap_split") > 0;
      smallest |= p.n == 1 && p.cin == 1 && p.cout == 1 && g.s_pos == 1 && g.l_pos == 1 && g.taps == 1;
    }
    EXPECT_EQ(bn_ragged, want_bn);
    EXPECT_EQ(bn_full, want_full_bn);
    EXPECT_EQ(pairs.size(), 5u);
    EXPECT_TRUE(smallest);
    EXPECT_EQ(tap_split, !wgrad) << "conv_mma's split of K by taps";
    if (contract) {
      EXPECT_EQ(kernels_seen, (std::set<std::string>{"conv_contract", "conv_contract_mma"}));
      // Every pair with a 16-bit input has an atom.
      EXPECT_EQ(mma_pairs, (std::set<std::string>{"bf16:bf16", "bf16:fp32", "fp16:fp16", "fp16:fp32"}));
    }
    if (scatter) {
      EXPECT_EQ(kernels_seen, (std::set<std::string>{"conv_scatter", "conv_scatter_mma", "conv_scatter_one_tap"}));
      EXPECT_EQ(mma_pairs, (std::set<std::string>{"bf16:bf16", "bf16:fp32", "fp16:fp16", "fp16:fp32"}));
      EXPECT_EQ(one_tap, (std::set<std::int64_t>{0, 1}));
      EXPECT_TRUE(phases.count(1) && phases.count(8) && phases.size() >= 4);
    }
    if (wgrad) {
      EXPECT_EQ(kernels_seen, (std::set<std::string>{"conv_wgrad", "conv_wgrad_mma"}));
      EXPECT_EQ(mma_pairs, (std::set<std::string>{"bf16:bf16", "bf16:fp32", "fp16:fp16", "fp16:fp32"}));
      EXPECT_GT(most_splits, 3);
      for (std::int64_t s : {std::int64_t{1}, std::int64_t{2}, most_splits}) {
        EXPECT_TRUE(splits.count(s)) << "splits " << s;
        EXPECT_TRUE(db_splits.count(s)) << "db_splits " << s;
      }
      EXPECT_TRUE(odd_split);
    }
  }
  EXPECT_FALSE(kernels::unreachable_branches("conv3d.fwd").empty());
  EXPECT_TRUE(kernels::boundary_problems("conv3d.nothing").empty());
}

// The W-halo step's rule (cv::halo_taps) on geometries at its edges, the
// plan publishing it on sm_90 only, and boundary problems that reach it with
// two and three taps beside tap-major matrix-core plans.
TEST(ConvKernel, HaloStepRuleAndItsBoundaryProblems) {
  auto taps = [](const char* d) {
    const ConvProblem p = conv(d);
    return kernels::cv::halo_taps(kernels::conv_device_geom(p), p.dir == ConvDir::bwd_data);
  };
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w16 kd3 p1"), 3);
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w64 kd3 p1"), 3);
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d2 w256 kd3 p1"), 3);
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w16 kd2"), 0);           // output W 15: no whole segments
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w8 kd3 p1"), 0);         // segments below an atom's rows
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w48 kd3 p1"), 0);        // 48 divides no tile
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w32 kd3 s2 p1"), 0);     // W stride 2
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w16 kd1"), 0);           // one W tap
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d8 w20 kd5"), 0);        // five W taps
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w16 kd3 p2 dil2"), 3);   // 8 x (16 + 4) = 160 staged rows
  EXPECT_EQ(taps("conv3d.fwd bf16 n1 c8 k8 d4 w16 kd3 p3 dil3"), 0);   // 8 x (16 + 6) rows: past kHaloRows
  // The scatter family (conv3d backward-data): rows over the input's W,
  // one stride phase.
  EXPECT_EQ(taps("conv3d.bwd_data bf16 n1 c8 k8 d4 w16 kd3 p1"), 3);
  EXPECT_EQ(taps("conv3d.bwd_data bf16 n1 c8 k8 d4 w32 kd3 p2 dil2"), 3);
  EXPECT_EQ(taps("conv3d.bwd_data bf16 n1 c8 k8 d4 w16 kd3"), 3);         // output W 14, input W 16
  EXPECT_EQ(taps("conv3d.bwd_data bf16 n1 c8 k8 d4 w14 kd3 p0"), 0);      // input W 14
  EXPECT_EQ(taps("conv3d.bwd_data bf16 n1 c8 k8 d8 h8 w16 kd3 sd2 sh1 sw1 p1"), 0);  // two stride phases
  const char* d = "conv3d.fwd bf16 n1 c32 k64 d4 w64 kd3 p1";
  {
    rt::host::ScopedConfig gfx(rt::host::config_for(rt::Target::gfx942, rt::host::config()));
    EXPECT_EQ(kernels::plan(parse_descriptor(d)).params.count("halo_taps"), 0u);  // registers: tap-major only
  }
  rt::host::ScopedConfig cfg(rt::host::config_for(rt::Target::sm90, rt::host::config()));
  EXPECT_EQ(param_or(kernels::plan(parse_descriptor(d)), "halo_taps", -1), 3);
  for (const char* op : {"conv3d.fwd", "conv3d.bwd_data", "conv_transpose3d.fwd", "conv_transpose3d.bwd_data"}) {
    std::set<std::int64_t> seen;
    for (const auto& b : kernels::boundary_problems(op)) {
      const kernels::Plan pl = kernels::plan(b.problem);
      if (pl.params.count("halo_taps")) seen.insert(pl.params.at("halo_taps"));
    }
    EXPECT_EQ(seen, (std::set<std::int64_t>{0, 2, 3})) << op;
  }
}

// conv_wgrad_mma's W-halo tile: its rule (cv::wgrad_halo_seg) at its edges,
// the plan it gives on the sm90 target (a 192-row tile, slices of whole block
// steps) and none on gfx942, and boundary problems of both backward-weight
// operators that run it with one and with two slices.
TEST(ConvKernel, WgradHaloRuleAndItsBoundaryProblems) {
  auto seg = [](const char* d) { return kernels::cv::wgrad_halo_seg(kernels::conv_device_geom(conv(d))); };
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w32 kd3 p1"), 32);
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w128 kd3 p1"), 32);
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w16 kd3 p1"), 16);   // two segments per block step
  EXPECT_EQ(seg("conv_transpose3d.bwd_weight bf16 n1 c16 k64 d4 w32 kd3 p1"), 32);
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w8 kd3 p1"), 0);     // segments below an atom's K
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w48 kd3 p1"), 0);    // W 48: no whole segments per step
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c32 k16 d4 w32 kd3 p1"), 0);    // large channels below a block
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c96 k16 d4 w32 kd3 p1"), 0);    // not whole blocks
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w32 kd2"), 0);       // two W taps
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w64 kd3 s2 p1"), 0); // W stride 2
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w16 kd3 p2 dil2"), 16);  // 2 x (16 + 4) = 40 staged rows
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w16 kd3 p3 dil3"), 0);   // 2 x (16 + 6): past kWgradHaloRows
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w32 kd3 p4 dil4"), 32);  // 32 + 8 = 40
  EXPECT_EQ(seg("conv3d.bwd_weight bf16 n1 c64 k16 d4 w32 kd3 p5 dil5"), 0);
  const Problem p = parse_descriptor("conv3d.bwd_weight bf16 n1 c64 k64 d9 h13 w32 kd3 sd2 sh1 sw1 p1");  // 5 x 13 x 32 rows
  {
    rt::host::ScopedConfig gfx(rt::host::config_for(rt::Target::gfx942, rt::host::config()));
    const kernels::Plan pl = kernels::plan(p);
    EXPECT_EQ(pl.params.count("halo_taps"), 0u);  // registers: tap-major only
    EXPECT_EQ(pl.params.at("slice"), 1040);       // 2080 rows in two slices
  }
  rt::host::ScopedConfig cfg(rt::host::config_for(rt::Target::sm90, rt::host::config()));
  const kernels::Plan pl = kernels::plan(p);
  EXPECT_EQ(param_or(pl, "halo_taps", -1), 3);
  EXPECT_EQ(pl.params.at("tile_m"), kernels::cv::kWgradHaloM);
  EXPECT_EQ(pl.params.at("slice"), 1056);  // rounded to whole block steps
  EXPECT_EQ(pl.params.at("splits"), 2);
  EXPECT_EQ(pl.steps.front().grid[0], 9u);  // (kd, kh) pairs x one block of 64 large channels
  for (const char* op : {"conv3d.bwd_weight", "conv_transpose3d.bwd_weight"}) {
    std::set<std::int64_t> splits;
    for (const auto& b : kernels::boundary_problems(op)) {
      const kernels::Plan bp = kernels::plan(b.problem);
      if (param_or(bp, "halo_taps", 0) == 0) continue;
      EXPECT_EQ(bp.params.at("slice") % bp.params.at("tile_k"), 0) << b.why;
      splits.insert(bp.params.at("splits"));
    }
    EXPECT_EQ(splits, (std::set<std::int64_t>{1, 2})) << op;
  }
}

// The backward-weight split rule's limits, checked without a run: a
// weight gradient large enough lowers the split count below the rows' count
// (the workspace bound), and one too large for any split is a one-split plan
// that is still supported (the workspace decline is never reached).
TEST(ConvKernel, WorkspaceLimitsTheSplitCount) {
  const std::int64_t rows = std::int64_t{1} << 16;
  const auto splits = [](const ConvProblem& p) { return kernels::plan(Problem(p)).params.at("splits"); };
  const ConvProblem narrow = sweep_problem("conv3d.bwd_weight", 1, rows);
  const ConvProblem wide = sweep_problem("conv3d.bwd_weight", 2048, rows);
  const ConvProblem huge = sweep_problem("conv3d.bwd_weight", 1 << 14, rows);
  EXPECT_GT(splits(narrow), splits(wide));
  EXPECT_GT(splits(wide), 1);
  ASSERT_TRUE(kernels::is_supported(Problem(huge)).ok);
  EXPECT_EQ(splits(huge), 1);
  // On matrix cores the workgroups are capped (tiles x splits), on both
  // targets: the 64->64@128 layer's 2^21 rows would give the workspace
  // bound's 606 splits; a problem with fewer tiles than the cap allows
  // keeps the rows' split.
  for (rt::Target tg : {rt::Target::gfx942, rt::Target::sm90}) {
    rt::host::ScopedConfig cfg(rt::host::config_for(tg, rt::host::config()));
    const kernels::Plan big = kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c64 k64 d128 kd3 p1"));
    const auto& gr = big.steps.front().grid;
    EXPECT_LE(std::int64_t{gr[0]} * gr[1] * gr[2], kernels::conv_policy::kMmaWgradBlocks);
    EXPECT_GT(gr[0] * gr[2] * 2, static_cast<std::uint32_t>(kernels::conv_policy::kMmaWgradBlocks)) << "the cap, not the workspace, binds";
    EXPECT_EQ(kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c32 k16 d32 kd1")).params.at("splits"), 32);
    EXPECT_EQ(kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c32 k16 d32 kd1")).steps.front().kernel, "conv_wgrad_mma");
  }
}

// The 1x1x1 head's backward-weight on the portable kernel: its 6 small
// channels fill 2 of a workgroup's 4 row groups, so a workgroup runs two
// splits (grid z = splits / 2); dbias takes shorter slices than dw, so that
// its column sums have about 65536 work-items (one per column and slice,
// conv_colsum's grid in workgroups of 64; 64 columns over 2^18 rows: 1024
// slices of 256 rows), and no slice below 256 rows.
TEST(ConvKernel, HeadBackwardWeightFillsItsWorkgroups) {
  const kernels::Plan head = kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c64 k6 d128 kd1 bias"));
  EXPECT_EQ(head.steps.front().kernel, "conv_wgrad");
  EXPECT_EQ(head.params.at("rgroups"), 2);
  EXPECT_EQ(head.params.at("splits"), 2048);  // 2^21 rows in slices of 1024
  EXPECT_EQ(head.steps.front().grid[2], 1024u);
  EXPECT_EQ(head.params.at("db_splits"), 4096);
  EXPECT_EQ(head.params.at("db_slice"), 512);
  EXPECT_EQ(head.steps.at(2).kernel, "conv_colsum");
  EXPECT_EQ(head.steps.at(2).grid[0], 6u * 4096u / kernels::cv::kThreads);
  const kernels::Plan wide = kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c64 k64 d64 kd1 bias"));
  EXPECT_EQ(wide.params.at("db_splits"), 1024);
  EXPECT_EQ(wide.params.at("db_slice"), 256);
  const kernels::Plan few = kernels::plan(parse_descriptor("conv3d.bwd_weight bf16 n1 c64 k6 d8 h8 w15 kd1 bias"));
  EXPECT_EQ(few.params.at("db_splits"), 3);  // 960 rows
  EXPECT_EQ(few.params.at("db_slice"), 320);
}

// The split-K sweep: every split count the plan may take, forced
// (kernels::conv_split_plan, run as any plan is), on exact fills, gives the unsplit run's bits, and
// the unsplit run gives the exact result rounded once. Backward-weight on
// the portable kernel and on matrix cores, with a bias (dw's and db's
// splits), and conv_mma's split of K by taps in the contract and scatter
// families, on both targets. A slice dropped, counted twice or combined
// with the wrong partial changes the sum; only the order of exact
// additions differs between the counts.
TEST(ConvKernel, SplitSweepGivesTheUnsplitBits) {
  struct Case {
    const char* d;
    std::int64_t most;  // the most splits the problem admits (rows or taps)
  };
  for (rt::Target tg : {rt::Target::gfx942, rt::Target::sm90}) {
    rt::host::ScopedConfig cfg(rt::host::config_for(tg, rt::host::config()));
    for (const Case& c : {Case{"conv3d.bwd_weight fp32 n2 c4 k6 d5 kd3 p1 bias", 250},
                          Case{"conv3d.bwd_weight bf16 n1 c32 k32 d6 h5 w7 kd3 p1 bias", 210},
                          Case{"conv_transpose3d.bwd_weight bf16 n1 c32 k32 d4 h5 w3 kd2 s2 bias", 60},
                          Case{"conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", 27},
                          Case{"conv3d.bwd_data bf16 n1 c32 k32 d6 kd3 p1", 27},
                          Case{"conv_transpose3d.fwd bf16 n1 c32 k32 d6 kd3 p1 bias", 27},
                          Case{"conv_transpose3d.bwd_data bf16 n1 c32 k32 d6 kd3 p1", 27}}) {
      SCOPED_TRACE(std::string(c.d) + (tg == rt::Target::sm90 ? " (sm90)" : " (gfx942)"));
      const Problem p = parse_descriptor(c.d);
      const Fill f = lattice_fill(p, 5);
      const auto in = ref::make_inputs(p, f);
      const auto want = ref::run_reference(p, ref::refs(in), ref::Impl::fast);
      const auto run_with = [&](std::int64_t n, std::int64_t& took) {
        const kernels::Plan pl = kernels::conv_split_plan(std::get<ConvProblem>(p), n);
        const auto it = pl.params.find("splits");
        took = it == pl.params.end() ? 1 : it->second;
        return kernels::run(p, pl, kernels::pointers(in));
      };
      std::int64_t one = 0;
      const auto base = run_with(1, one);
      EXPECT_EQ(one, 1);
      for (const auto& [role, t] : base) {
        const Tensor rounded = want.at(role).to(t.dtype());
        for (std::int64_t i = 0; i < t.numel(); ++i)
          ASSERT_EQ(t.get(i), rounded.get(i)) << name(role) << " element " << i << " of the unsplit run";
      }
      std::set<std::int64_t> counts;
      // Every count up to 32, the powers of two past it, and the most; a
      // forced count n plans whole slices of ceil(most / n).
      std::vector<std::int64_t> forced;
      std::set<std::int64_t> planned_want;
      for (std::int64_t n = 2; n < c.most; n = n < 32 ? n + 1 : n * 2) forced.push_back(n);
      forced.push_back(c.most);
      for (const std::int64_t n : forced) planned_want.insert(kernels::cv::ceil_div(c.most, kernels::cv::ceil_div(c.most, n)));
      for (const std::int64_t n : forced) {
        std::int64_t took = 0;
        const auto got = run_with(n, took);
        counts.insert(took);
        for (const auto& [role, t] : base) {
          ASSERT_EQ(got.at(role).nbytes(), t.nbytes());
          EXPECT_EQ(std::memcmp(got.at(role).data(), t.data(), static_cast<std::size_t>(t.nbytes())), 0)
              << name(role) << " with " << took << " splits (forced " << n << ")";
        }
      }
      std::string took;
      for (const std::int64_t n : counts) took += " " + std::to_string(n);
      EXPECT_EQ(counts, planned_want) << "split counts planned:" << took;
    }
  }
}

// conv_mma's split of K by taps: the deepest layers (8^3 positions, 32-64
// block tiles) split their 27 taps into runs on both targets, the runs
// covering the taps with the last one shortest; the reduction names the
// runs' chains and the tree, the workspace holds a partial per split and
// the tree (which adds the bias) follows; layers of many tiles, short K or a
// W-halo plan keep one chain.
TEST(ConvKernel, TapSplitRule) {
  for (rt::Target tg : {rt::Target::gfx942, rt::Target::sm90}) {
    SCOPED_TRACE(static_cast<int>(tg));
    rt::host::ScopedConfig cfg(rt::host::config_for(tg, rt::host::config()));
    const auto at = [](const char* d) { return kernels::plan(parse_descriptor(d)); };
    const kernels::Plan fwd = at("conv3d.fwd bf16 n1 c1024 k1024 d8 kd3 p1");
    EXPECT_EQ(fwd.params.at("tap_split"), 7);
    EXPECT_EQ(fwd.params.at("splits"), 4);  // 7 + 7 + 7 + 6 taps
    EXPECT_EQ(fwd.steps.front().grid[2], 4u);
    ASSERT_EQ(fwd.steps.size(), 2u);
    EXPECT_EQ(fwd.steps.back().kernel, "conv_tree");
    EXPECT_EQ(fwd.workspace_bytes, 4u * 512u * 1024u * 4u);
    const ReductionPlan& r = fwd.reduction.at("y");
    EXPECT_EQ(r.splits, 4);
    EXPECT_EQ(r.combine, PartialCombine::tree);
    EXPECT_EQ(r.length, 7 * 1024);
    // Backward-data (scatter family, one phase): 32 tiles, runs of 4 taps.
    const kernels::Plan bd = at("conv3d.bwd_data bf16 n1 c512 k1024 d8 kd3 p1");
    EXPECT_EQ(bd.params.at("tap_split"), 4);
    EXPECT_EQ(bd.params.at("splits"), 7);
    EXPECT_EQ(bd.reduction.at("dx").length, 4 * 1024);
    // Many tiles, a short K, or the W-halo step: no split.
    for (const char* d : {"conv3d.fwd bf16 n1 c64 k64 d64 kd3 p1", "conv3d.fwd bf16 n1 c64 k64 d8 kd3 p1",
                          "conv3d.bwd_data bf16 n1 c1024 k1024 d16 kd3 p1"}) {
      const kernels::Plan pl = at(d);
      EXPECT_EQ(pl.params.count("tap_split"), 0u) << d;
      EXPECT_EQ(pl.steps.size(), 1u) << d;
      EXPECT_EQ(pl.reduction.begin()->second.splits, 1) << d;
    }
    const kernels::Plan halo = at("conv3d.fwd bf16 n1 c1024 k1024 d1 h1 w128 kd3 p1");
    EXPECT_EQ(halo.params.count("tap_split"), tg == rt::Target::sm90 ? 0u : 1u);
  }
}

// A plan's load and store widths are functions of the channel counts; a
// launch on a tensor not aligned as those accesses need is refused, naming
// the tensor, before any kernel runs (never taken down another path).
TEST(ConvKernel, LaunchRefusesATensorTheWidthsCannotRead) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c32 k32 d6 kd3 p1");
  const kernels::Plan pl = kernels::plan(p);
  ASSERT_EQ(pl.params.at("wide"), 1);
  const ConvProblem& cp = std::get<ConvProblem>(p);
  const std::int64_t xn = 6 * 6 * 6 * 32, wn = 32 * 27 * 32;
  rt::DeviceBuffer<kgate::bf16> x(static_cast<std::size_t>(xn + 8)), w(static_cast<std::size_t>(wn)), y(static_cast<std::size_t>(xn));
  rt::DeviceBuffer<std::byte> ws(pl.workspace_bytes + 16);
  const auto launch = [&](const void* xp) {
    kernels::DeviceArgs a;
    a.in[Role::x] = xp;
    a.in[Role::w] = w.data();
    a.out[Role::y] = y.data();
    a.workspace = pl.workspace_bytes ? ws.data() : nullptr;
    rt::LaunchTrace trace;
    try {
      kernels::launch(p, pl, a);
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(trace.records().size(), 0u);
      return std::string(e.what());
    }
    rt::device_synchronize();
    return std::string();
  };
  rt::device_memset(x.data(), 0, static_cast<std::size_t>(xn + 8) * 2);
  rt::device_memset(w.data(), 0, static_cast<std::size_t>(wn) * 2);
  EXPECT_EQ(launch(x.data()), "") << cp.cin;
  const std::string msg = launch(x.data() + 1);
  EXPECT_NE(msg.find("x is not 16-byte aligned"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kgate
