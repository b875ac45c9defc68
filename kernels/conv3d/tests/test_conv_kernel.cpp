// The convolution kernels' API contracts on the host backend: is_supported
// names its reason, plans are values (equal for equal problems, JSON round
// trip), the plan's structure (kernel family, one-tap form, split count,
// reduction per output role), a foreign plan is refused, and the oracle
// catches a planted defect in a kernel's output.
#include <gtest/gtest.h>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "oracles/oracle.hpp"
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
}

TEST(ConvKernel, RefusesAForeignPlan) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1");
  const Problem q = parse_descriptor("conv3d.fwd bf16 n1 c4 k8 d4 kd3 p1");
  const auto in = ref::make_inputs(p, parse_fill("signed", 1));
  EXPECT_THROW(kernels::run(p, kernels::plan(q), kernels::pointers(in)), std::invalid_argument);
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

}  // namespace
}  // namespace kgate
