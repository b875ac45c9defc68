// The fast references' instruction-set level: the compiled feature set is the
// configured level's, the running CPU has it, and a CPU without it is refused
// with a message naming the missing features (exit 2).
#include <gtest/gtest.h>

#include <string>

#include "reference/conv3d/ref_common.hpp"
#include "reference/conv3d/ref_isa.hpp"

namespace kgate::ref {
namespace {

using detail::kIsaFeatureNames;
using detail::kIsaFeatures;

std::uint32_t bit(const std::string& name) {
  for (int i = 0; i < kIsaFeatures; ++i)
    if (name == kIsaFeatureNames[i]) return 1u << i;
  ADD_FAILURE() << "unknown feature " << name;
  return 0;
}

TEST(RefIsa, CompiledFeaturesAreTheConfiguredLevel) {
  const std::string level = KGATE_TEST_REF_MARCH;
  const std::uint32_t m = detail::ref_isa_compiled();
  const std::uint32_t v2 = bit("sse3") | bit("ssse3") | bit("sse4.1") | bit("sse4.2") | bit("popcnt");
  const std::uint32_t v3 = v2 | bit("avx") | bit("avx2") | bit("fma") | bit("bmi") | bit("bmi2");
  const std::uint32_t v4 = v3 | bit("avx512f") | bit("avx512vl") | bit("avx512bw") | bit("avx512dq") | bit("avx512cd");
  if (level.empty()) {
    EXPECT_EQ(m & bit("avx"), 0u) << "portable build compiled with AVX";
  } else if (level == "x86-64-v2") {
    EXPECT_EQ(m, v2);
  } else if (level == "x86-64-v3") {
    EXPECT_EQ(m, v3);
  } else if (level == "x86-64-v4") {
    EXPECT_EQ(m, v4);
  }
  EXPECT_NE(ref_isa().find(level.empty() ? "portable" : level), std::string::npos) << ref_isa();
}

TEST(RefIsa, ThisCpuHasTheCompiledFeatures) {
  // Otherwise the start-up check would have ended this process.
  EXPECT_TRUE(detail::missing_isa_features(detail::ref_isa_compiled(), detail::cpu_isa_features()).empty());
  EXPECT_GE(ref_threads(), 1);
}

TEST(RefIsa, MissingFeaturesAreNamedInOrder) {
  const std::uint32_t compiled = bit("avx2") | bit("fma") | bit("avx512f");
  EXPECT_TRUE(detail::missing_isa_features(compiled, compiled).empty());
  EXPECT_TRUE(detail::missing_isa_features(0, 0).empty());
  EXPECT_EQ(detail::missing_isa_features(compiled, bit("avx2")), (std::vector<std::string>{"fma", "avx512f"}));
}

TEST(RefIsaDeathTest, ACpuWithoutTheLevelIsRefused) {
  EXPECT_EXIT(detail::check_ref_isa(bit("avx2") | bit("avx512f"), bit("avx2")), ::testing::ExitedWithCode(2),
              "lacks: avx512f\\. Rebuild with -DKGATE_REF_ARCH=");
  detail::check_ref_isa(bit("avx2"), bit("avx2") | bit("fma"));  // returns
}

}  // namespace
}  // namespace kgate::ref
