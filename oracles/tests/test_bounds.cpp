// The bound formulas and the reduction-plan value (reference/reduction.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "oracles/bounds.hpp"
#include "reference/error.hpp"
#include "reference/reduction.hpp"

namespace kgate::oracle {

TEST(ReductionPlan, DepthFollowsTheDeclaredStructure) {
  EXPECT_EQ(ReductionPlan::sequential(4096).depth(), 4096);
  EXPECT_EQ(ReductionPlan::split_k(4096, 8, PartialCombine::tree).depth(), 512 + 3);
  EXPECT_EQ(ReductionPlan::split_k(4096, 8, PartialCombine::serial).depth(), 512 + 7);
  EXPECT_EQ(ReductionPlan::split_k(100, 3, PartialCombine::tree).depth(), 34 + 2);
  EXPECT_EQ(ReductionPlan::pairwise(1000).depth(), 1 + 10);
  EXPECT_EQ(ReductionPlan::mfma(64).depth(), 64);
}

TEST(ReductionPlan, JsonRoundTripAndErrors) {
  ReductionPlan p = ReductionPlan::split_k(1 << 18, 16, PartialCombine::serial);
  p.partial = DType::bf16;
  p.epilogue_ops = 2;
  p.rounded_before_epilogue = true;
  EXPECT_EQ(reduction_from_json(to_json(p)), p);
  EXPECT_NE(to_string(p).find("rounded-before-epi"), std::string::npos);
  ReductionPlan m = ReductionPlan::mfma(256, 4);
  EXPECT_EQ(reduction_from_json(to_json(m)), m);
  EXPECT_NE(to_string(p).find("D="), std::string::npos);
  nlohmann::json j = to_json(p);
  j["bogus"] = 1;
  EXPECT_THROW(reduction_from_json(j), InputError);
  j = to_json(p);
  j["length"] = 0;
  try {
    reduction_from_json(j, "plan.reduction.dw");
    ADD_FAILURE() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "plan.reduction.dw.length");
    EXPECT_EQ(std::string(e.what()), "plan.reduction.dw.length: must be >= 1, got 0");
  }
  j = to_json(p);
  j["model"] = "fast";
  EXPECT_THROW(reduction_from_json(j), InputError);
  j = to_json(p);
  j["partial"] = "fp64";  // wider than acc
  EXPECT_THROW(reduction_from_json(j), InputError);
}

TEST(Bounds, GammaAndUnits) {
  EXPECT_DOUBLE_EQ(gamma(1, 0.5), 1.0);
  EXPECT_TRUE(std::isinf(gamma(4, 0.25)));
  EXPECT_EQ(output_u(DType::fp32), 0.0);
  EXPECT_EQ(output_u(DType::bf16), std::ldexp(1.0, -8));
  EXPECT_EQ(output_u(DType::fp16), std::ldexp(1.0, -11));
  EXPECT_EQ(accumulation_u(ReductionPlan::mfma(8)), std::ldexp(1.0, -23));
  EXPECT_EQ(accumulation_u(ReductionPlan::sequential(8)), std::ldexp(1.0, -24));
  // fp32 products round: one more level.
  EXPECT_EQ(term_depth(ReductionPlan::sequential(8), DType::fp32), 9);
  EXPECT_EQ(term_depth(ReductionPlan::sequential(8), DType::bf16), 8);
}

TEST(Bounds, LambdaCoversAUnionOfRoundings) {
  // docs/NUMERICS.md: lambda ~ 9 covers 1e12 roundings at 1e-6 per run.
  const double l = hm_lambda(1e12, std::ldexp(1.0, -24), 1e-6);
  EXPECT_GT(l, 9.0);
  EXPECT_LT(l, 9.5);
  EXPECT_LE(1e12 * 2 * std::exp(-l * l / 2), 1.0000001e-6);
}

TEST(Bounds, Tier3IsTighterThanTier2ByTheDocumentedFactor) {
  // 7-60x for D between 4096 and 2^18 (docs/NUMERICS.md).
  for (std::int64_t d : {4096, 1 << 18}) {
    const ReductionPlan p = ReductionPlan::sequential(d);
    const double ratio = rigorous_relative(p, DType::bf16) / probabilistic_relative(p, DType::bf16, 9.0);
    EXPECT_GT(ratio, 6.0) << d;
    EXPECT_LT(ratio, 61.0) << d;
  }
  ReductionPlan narrow = ReductionPlan::split_k(4096, 8, PartialCombine::tree);
  const double wide = rigorous_relative(narrow, DType::bf16);
  narrow.partial = DType::bf16;
  EXPECT_GT(rigorous_relative(narrow, DType::bf16), wide + std::ldexp(1.0, -8) * 0.99);
}

}  // namespace kgate::oracle
