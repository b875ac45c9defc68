// dtype conversions: exhaustive round trips, agreement with MPFR's correct
// rounding on the docs/NUMERICS.md edge cases and on 10^7 random fp32 patterns,
// single rounding from fp64, and the ULP distance.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "reference/dtype.hpp"
#include "reference/mpfr_round.hpp"

namespace kgate {
namespace {

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

double via_bits(DType t, float f) {
  return t == DType::bf16 ? bf16_bits_to_fp32(fp32_to_bf16_bits(f)) : fp16_bits_to_fp32(fp32_to_fp16_bits(f));
}

TEST(Dtype, EveryBf16PatternRoundTripsThroughFp32) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_bits_to_fp32(static_cast<std::uint16_t>(b));
    const std::uint16_t back = fp32_to_bf16_bits(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_bits_to_fp32(back))) << b;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << "NaN keeps its sign " << b;
    } else {
      ASSERT_EQ(back, b) << "bf16 pattern " << b;
    }
  }
}

TEST(Dtype, EveryFp16PatternRoundTripsThroughFp32) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = fp16_bits_to_fp32(static_cast<std::uint16_t>(b));
    const std::uint16_t back = fp32_to_fp16_bits(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_bits_to_fp32(back))) << b;
    } else {
      ASSERT_EQ(back, b) << "fp16 pattern " << b;
      // fp16 -> fp32 is exact: compare with MPFR reading the same value.
      ASSERT_TRUE(same_value(mpfr_round_double_to(f, DType::fp16), f)) << b;
    }
  }
}

TEST(Dtype, OraclesEdgeCases) {
  // fp16 facts from docs/NUMERICS.md.
  EXPECT_EQ(fp16_bits_to_fp32(fp32_to_fp16_bits(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_bits_to_fp32(fp32_to_fp16_bits(65520.0f))));
  EXPECT_EQ(fp16_bits_to_fp32(fp32_to_fp16_bits(0x1p-25f)), 0.0f);
  EXPECT_EQ(fp16_bits_to_fp32(fp32_to_fp16_bits(1.5f * 0x1p-25f)), 0x1p-24f);
  // bf16: FLT_MAX rounds to +Inf; NaN stays NaN.
  EXPECT_TRUE(std::isinf(bf16_bits_to_fp32(fp32_to_bf16_bits(FLT_MAX))));
  EXPECT_GT(bf16_bits_to_fp32(fp32_to_bf16_bits(FLT_MAX)), 0.0f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_fp32(fp32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low 16 bits must not become Inf.
  EXPECT_TRUE(std::isnan(bf16_bits_to_fp32(fp32_to_bf16_bits(bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(fp16_bits_to_fp32(fp32_to_fp16_bits(bit_cast<float>(0x7f800001u)))));

  // Every listed edge case, both formats, against MPFR.
  const float cases[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 65536.0f, FLT_MAX, -FLT_MAX,
                         FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 0x1p-14f, 0x1p-24f, 0x1p-25f, 1.5f * 0x1p-25f,
                         0x1.ffcp-15f, 0x1p-133f, 0x1.8p-134f, 0x1p-126f, 0x1.fep127f, 0x1.ff8p127f,
                         bit_cast<float>(0x3f808000u), bit_cast<float>(0x3f818000u), bit_cast<float>(0x3f808001u),
                         bit_cast<float>(0x007fffffu), bit_cast<float>(0x00008000u), bit_cast<float>(0x00018000u),
                         std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (float f : cases) {
    for (DType t : {DType::bf16, DType::fp16}) {
      EXPECT_TRUE(same_value(via_bits(t, f), mpfr_round_double_to(f, t)))
          << name(t) << " of " << std::hexfloat << f << ": got " << via_bits(t, f) << " MPFR "
          << mpfr_round_double_to(f, t);
    }
  }
}

TEST(Dtype, TenMillionRandomFp32PatternsAgreeWithMpfr) {
  std::mt19937_64 rng(20261202);
  std::uint64_t checked = 0;
  mpfr_t x;
  mpfr_init2(x, 24);
  for (int i = 0; i < 10'000'000; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng());
    const float f = bit_cast<float>(bits);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(via_bits(DType::bf16, f)) && std::isnan(via_bits(DType::fp16, f)));
      continue;
    }
    mpfr_set_flt(x, f, MPFR_RNDN);
    for (DType t : {DType::bf16, DType::fp16}) {
      const double want = mpfr_round_to(x, t);
      const double got = via_bits(t, f);
      ASSERT_TRUE(same_value(got, want)) << name(t) << " of bits 0x" << std::hex << bits << ": got " << got
                                         << " MPFR " << want;
    }
    ++checked;
  }
  mpfr_clear(x);
  EXPECT_GT(checked, 9'900'000u);
}

TEST(Dtype, Fp64RoundsOnceNotThroughFp32) {
  // 1 + 2^-8 + 2^-30 is just above the bf16 midpoint between 1 and 1+2^-7.
  // Through fp32 it first becomes exactly the midpoint (2^-30 is lost), then
  // ties to even (1.0); rounded once it must go up.
  const double x = 1.0 + 0x1p-8 + 0x1p-30;
  EXPECT_EQ(bf16_bits_to_fp32(fp32_to_bf16_bits(static_cast<float>(x))), 1.0f);  // the double rounding
  EXPECT_EQ(bf16_bits_to_fp32(fp64_to_bf16_bits(x)), 1.0f + 0x1p-7f);
  const double y = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(fp16_bits_to_fp32(fp64_to_fp16_bits(y)), 1.0f + 0x1p-10f);

  std::mt19937_64 rng(7);
  for (int i = 0; i < 1'000'000; ++i) {
    // Doubles spread over the fp16/bf16 ranges, subnormals included.
    const double v = std::ldexp(std::uniform_real_distribution<double>(-2, 2)(rng),
                                std::uniform_int_distribution<int>(-140, 130)(rng));
    ASSERT_TRUE(same_value(bf16_bits_to_fp32(fp64_to_bf16_bits(v)), mpfr_round_double_to(v, DType::bf16))) << v;
    ASSERT_TRUE(same_value(fp16_bits_to_fp32(fp64_to_fp16_bits(v)), mpfr_round_double_to(v, DType::fp16))) << v;
    ASSERT_TRUE(same_value(static_cast<float>(v), mpfr_round_double_to(v, DType::fp32))) << v;
  }
}

// The fp64 conversions' bit-pattern path against MPFR where it is most
// likely wrong: exact ties and their neighbours (the bits below the kept
// significand are 100...0, 011...1, 100...01), the overflow threshold, the
// bottom of the normal range, and arbitrary double bit patterns.
TEST(Dtype, Fp64TiesAndBoundariesAgreeWithMpfr) {
  std::mt19937_64 rng(20261204);
  auto check = [](double v) {
    ASSERT_TRUE(same_value(bf16_bits_to_fp32(fp64_to_bf16_bits(v)), mpfr_round_double_to(v, DType::bf16))) << v;
    ASSERT_TRUE(same_value(fp16_bits_to_fp32(fp64_to_fp16_bits(v)), mpfr_round_double_to(v, DType::fp16))) << v;
  };
  for (int i = 0; i < 300'000; ++i) {
    const int e = std::uniform_int_distribution<int>(-160, 140)(rng);
    for (int precision : {8, 11}) {
      const int drop = 53 - precision;
      const std::uint64_t top = rng() & ~((std::uint64_t{1} << drop) - 1u) & ((std::uint64_t{1} << 52) - 1u);
      const std::uint64_t half = std::uint64_t{1} << (drop - 1);
      for (std::uint64_t low : {half, half - 1u, half + 1u, std::uint64_t{0}, (std::uint64_t{1} << drop) - 1u}) {
        const std::uint64_t bits = (static_cast<std::uint64_t>(e + 1023) << 52) | top | low;
        const double v = bit_cast<double>(bits);
        check(v);
        check(-v);
      }
    }
    check(bit_cast<double>(rng()));
  }
  for (double v : {0x1.fep127, 0x1.ffp127, 0x1.ff0000000001p127, 0x1.feffffffffffp127, 65504.0, 65519.999, 65520.0,
                   0x1p-126, 0x1.0000000000001p-126, 0x1.fffffffffffffp-127, 0x1p-14, 0x1.fffffffffffffp-15, 0x1p-24,
                   0x1p-25, 0x1.0000000000001p-25, 0x1p-133, 0x1p-134, 0x1.8p-134})
    for (double s : {1.0, -1.0}) check(s * v);
}

TEST(Dtype, LoadStoreRoundOnce) {
  unsigned char buf[8];
  store(DType::bf16, buf, 0, 1.0 + 0x1p-8 + 0x1p-30);
  EXPECT_EQ(load(DType::bf16, buf, 0), 1.0 + 0x1p-7);
  store(DType::fp16, buf, 0, 70000.0);
  EXPECT_TRUE(std::isinf(load(DType::fp16, buf, 0)));
  store(DType::fp64, buf, 0, 0.1);
  EXPECT_EQ(load(DType::fp64, buf, 0), 0.1);
}

TEST(Dtype, UlpDistance) {
  EXPECT_EQ(ulp_distance(0.0f, -0.0f), 0u);
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1u);
  EXPECT_EQ(ulp_distance(-FLT_TRUE_MIN, FLT_TRUE_MIN), 2u);
  EXPECT_EQ(ulp_distance(FLT_TRUE_MIN, 0.0f), 1u);
  EXPECT_EQ(ulp_distance(-1.0f, 1.0f), 2u * bit_cast<std::uint32_t>(1.0f));
  EXPECT_EQ(ulp_distance(FLT_MAX, std::numeric_limits<float>::infinity()), 1u);
  EXPECT_EQ(ulp_distance16(0x0000, 0x8000), 0u);
  EXPECT_EQ(ulp_distance16(0x3c00, 0x3c01), 1u);
  EXPECT_EQ(ulp_distance16(0x8001, 0x0001), 2u);
  // Monotone: the key order is the numeric order on random pairs.
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const float a = bit_cast<float>(static_cast<std::uint32_t>(rng()));
    const float b = std::nextafter(a, INFINITY);
    if (std::isnan(a) || std::isinf(a)) continue;
    ASSERT_EQ(ulp_distance(a, b), 1u) << a;
  }
}

TEST(Dtype, NamesParseBack) {
  for (DType t : {DType::fp64, DType::fp32, DType::bf16, DType::fp16}) EXPECT_EQ(parse_dtype(name(t)), t);
  EXPECT_FALSE(parse_dtype("fp8").has_value());
  EXPECT_EQ(unit_roundoff(DType::bf16), 0x1p-8);
  EXPECT_EQ(unit_roundoff(DType::fp16), 0x1p-11);
  EXPECT_EQ(unit_roundoff(DType::fp32), 0x1p-24);
}

}  // namespace
}  // namespace kgate
