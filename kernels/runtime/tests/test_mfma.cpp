// MFMA emulation: every instruction against a plain matrix product built from
// the documented lane layouts (exact model, bit for bit), the cdna3 model on
// hand-computed cases, and the misuse errors.
#include <cmath>
#include <random>

#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::bits_of;
using kgate::rt::test::error_of;

namespace {

enum class In { bf16, f16, f32, xf32 };

struct Instr {
  const char* name;
  In in;
  int mn, k;
  int kpe() const { return in == In::f32 ? 1 : in == In::xf32 ? 2 : 4; }
  int nacc() const { return mn == 32 ? 16 : 4; }
};

// One kernel per instruction: lane l reads its operand fragments (a/b as
// 32-bit words: kpe 16-bit elements packed, or kpe floats) and its
// accumulator fragment, runs the instruction, writes its result fragment.
#define MFMA_KERNEL(fn, A, C, nacc)                                                     \
  KGATE_KERNEL(k_##fn, const A* a, const A* b, const float* c, float* d) {            \
    const int l = rt::lane_id();                                                      \
    C cv;                                                                             \
    for (int r = 0; r < nacc; ++r) cv[r] = c[nacc * l + r];                           \
    const C dv = rt::fn(a[l], b[l], cv);                                              \
    for (int r = 0; r < nacc; ++r) d[nacc * l + r] = dv[r];                           \
  }
MFMA_KERNEL(mfma_32x32x8bf16_1k, rt::bf16x4, rt::f32x16, 16)
MFMA_KERNEL(mfma_16x16x16bf16_1k, rt::bf16x4, rt::f32x4, 4)
MFMA_KERNEL(mfma_32x32x8f16, rt::f16x4, rt::f32x16, 16)
MFMA_KERNEL(mfma_16x16x16f16, rt::f16x4, rt::f32x4, 4)
MFMA_KERNEL(mfma_32x32x2f32, float, rt::f32x16, 16)
MFMA_KERNEL(mfma_16x16x4f32, float, rt::f32x4, 4)
MFMA_KERNEL(mfma_32x32x4xf32, rt::f32x2, rt::f32x16, 16)
MFMA_KERNEL(mfma_16x16x8xf32, rt::f32x2, rt::f32x4, 4)
#undef MFMA_KERNEL

const Instr kInstrs[] = {
    {"mfma_32x32x8bf16_1k", In::bf16, 32, 8},  {"mfma_16x16x16bf16_1k", In::bf16, 16, 16},
    {"mfma_32x32x8f16", In::f16, 32, 8},       {"mfma_16x16x16f16", In::f16, 16, 16},
    {"mfma_32x32x2f32", In::f32, 32, 2},       {"mfma_16x16x4f32", In::f32, 16, 4},
    {"mfma_32x32x4xf32", In::xf32, 32, 4},     {"mfma_16x16x8xf32", In::xf32, 16, 8},
};

// Matrices as values (already representable in the input type).
struct Problem {
  std::vector<float> A, B, C;  // A: mn x k, B: k x mn, C: mn x mn (row-major)
};

// Places A, B, C into lane fragments by the documented layouts, runs the
// instruction, and reads D back by the same layouts.
std::vector<float> run(const Instr& ins, const Problem& p) {
  const int mn = ins.mn, K = ins.k, kpe = ins.kpe(), nacc = ins.nacc();
  const bool half = ins.in == In::bf16 || ins.in == In::f16;
  const std::size_t elem = half ? 2 : 4;
  std::vector<unsigned char> a(64 * 16, 0), b(64 * 16, 0);
  std::vector<float> c(64 * nacc);
  auto put = [&](std::vector<unsigned char>& frag, int lane, int e, float v) {
    unsigned char* dst = frag.data() + lane * kpe * elem + e * elem;
    if (half) {
      const std::uint16_t h = ins.in == In::bf16 ? kgate::fp32_to_bf16_bits(v) : kgate::fp32_to_fp16_bits(v);
      std::memcpy(dst, &h, 2);
    } else {
      std::memcpy(dst, &v, 4);
    }
  };
  for (int i = 0; i < mn; ++i)
    for (int k = 0; k < K; ++k) {
      put(a, i + mn * (k / kpe), k % kpe, p.A[i * K + k]);  // A[i][k]: lane i + MN*(k/kpe), element k%kpe
      put(b, i + mn * (k / kpe), k % kpe, p.B[k * mn + i]);  // B[k][j]: lane j + MN*(k/kpe), element k%kpe
    }
  auto d_slot = [&](int i, int j) {
    // 32x32: lane j + 32*((i/4)%2), element (i%4) + 4*(i/8); 16x16: lane j + 16*(i/4), element i%4
    return mn == 32 ? (j + 32 * ((i / 4) % 2)) * nacc + (i % 4) + 4 * (i / 8) : (j + 16 * (i / 4)) * nacc + i % 4;
  };
  for (int i = 0; i < mn; ++i)
    for (int j = 0; j < mn; ++j) c[d_slot(i, j)] = p.C[i * mn + j];

  const std::size_t abytes = 64 * kpe * elem;
  rt::DeviceBuffer<unsigned char> da(abytes), db(abytes);
  rt::DeviceBuffer<float> dc(c.size()), dd(c.size());
  rt::copy_h2d(da.data(), a.data(), abytes);
  rt::copy_h2d(db.data(), b.data(), abytes);
  dc.upload(c);
  const rt::LaunchConfig lc{1, 64};
  const std::string n = ins.name;
#define RUN(fn, A)                                                                                 \
  if (n == #fn)                                                                                    \
    rt::launch(#fn, k_##fn, lc, reinterpret_cast<const A*>(da.data()), reinterpret_cast<const A*>(db.data()), \
               static_cast<const float*>(dc.data()), dd.data());
  RUN(mfma_32x32x8bf16_1k, rt::bf16x4)
  RUN(mfma_16x16x16bf16_1k, rt::bf16x4)
  RUN(mfma_32x32x8f16, rt::f16x4)
  RUN(mfma_16x16x16f16, rt::f16x4)
  RUN(mfma_32x32x2f32, float)
  RUN(mfma_16x16x4f32, float)
  RUN(mfma_32x32x4xf32, rt::f32x2)
  RUN(mfma_16x16x8xf32, rt::f32x2)
#undef RUN
  const auto dv = dd.download();
  std::vector<float> D(mn * mn);
  for (int i = 0; i < mn; ++i)
    for (int j = 0; j < mn; ++j) D[i * mn + j] = dv[d_slot(i, j)];
  return D;
}

// Random values representable in the input type with few significant bits
// and a moderate exponent range, so that the double sums below are exact.
float random_value(std::mt19937& g, In in) {
  const int bits = in == In::bf16 ? 8 : 11;
  const int m = std::uniform_int_distribution<int>(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)(g);
  const int e = std::uniform_int_distribution<int>(-6, 6)(g);
  return std::ldexp(static_cast<float>(m), e - bits);
}

rt::host::Config model_config(rt::MfmaModel m) {
  auto c = rt::test::test_config();
  c.mfma = m;
  return c;
}

TEST(Mfma, ExactModelMatchesThePlainProductForEveryInstruction) {
  rt::host::ScopedConfig sc(model_config(rt::MfmaModel::exact));
  std::mt19937 g(7);
  for (const Instr& ins : kInstrs) {
    for (int trial = 0; trial < 3; ++trial) {
      Problem p;
      const int mn = ins.mn, K = ins.k;
      p.A.resize(mn * K);
      p.B.resize(K * mn);
      p.C.resize(mn * mn);
      for (float& v : p.A) v = random_value(g, ins.in);
      for (float& v : p.B) v = random_value(g, ins.in);
      for (float& v : p.C) v = random_value(g, In::f16) * 16.0f;
      const auto D = run(ins, p);
      for (int i = 0; i < mn; ++i)
        for (int j = 0; j < mn; ++j) {
          double s = p.C[i * mn + j];
          for (int k = 0; k < K; ++k) s += static_cast<double>(p.A[i * K + k]) * p.B[k * mn + j];  // exact
          ASSERT_EQ(bits_of(D[i * mn + j]), bits_of(static_cast<float>(s)))
              << ins.name << " D[" << i << "][" << j << "] trial " << trial;
        }
    }
  }
}

// A problem with zeros everywhere except row 0 of A, column 0 of B, C[0][0].
Problem single(const Instr& ins, const std::vector<float>& a, const std::vector<float>& b, float c00) {
  Problem p;
  p.A.assign(ins.mn * ins.k, 0.0f);
  p.B.assign(ins.k * ins.mn, 0.0f);
  p.C.assign(ins.mn * ins.mn, 0.0f);
  for (std::size_t k = 0; k < a.size(); ++k) p.A[k] = a[k];
  for (std::size_t k = 0; k < b.size(); ++k) p.B[k * ins.mn] = b[k];
  p.C[0] = c00;
  return p;
}

// D[0][0]; every other element must be 0 unless the inputs are not finite.
float d00(rt::MfmaModel m, const Instr& ins, const Problem& p, bool rest_zero = true) {
  rt::host::ScopedConfig sc(model_config(m));
  const auto D = run(ins, p);
  for (std::size_t i = 1; rest_zero && i < D.size(); ++i) EXPECT_EQ(D[i], 0.0f);
  return D[0];
}

const Instr& instr(const char* name) {
  for (const Instr& i : kInstrs)
    if (std::string(name) == i.name) return i;
  throw std::logic_error(name);
}

TEST(MfmaCdna3, ProductsAreTruncatedBelowTheGroupMaximumExponent) {
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  const float t = std::ldexp(1.0f, -25);
  const auto p = single(ins, {1, t, t, t, t, t, t, t}, {1, 1, 1, 1, 1, 1, 1, 1}, 0.0f);
  // Exact: 1 + 7*2^-25 = 1 + 1.75 ulp -> 1 + 2^-22. cdna3: each 2^-25 truncates to 0.
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 1.0f + std::ldexp(1.0f, -22));
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 1.0f);
  // Truncation is toward zero for negative products too.
  const auto n = single(ins, {-1, -t, -t, -t, -t, -t, -t, -t}, {1, 1, 1, 1, 1, 1, 1, 1}, 0.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, n), -1.0f);
}

TEST(MfmaCdna3, GroupsOfEightInIncreasingKWithRoundingBetween) {
  const Instr& ins = instr("mfma_16x16x16bf16_1k");
  const float big = std::ldexp(1.0f, 24);
  std::vector<float> a(16, 0.0f), b(16, 1.0f);
  a[0] = big;
  a[1] = 1;  // chunk 0: 2^24 + 1 -> rounds (tie, even) to 2^24
  a[8] = 1;  // chunk 1: 2^24 + 1 -> 2^24 again
  const auto p = single(ins, a, b, 0.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), big);
  // Exact (and a single chunk of 16, and chunks in the other order) give 2^24 + 2.
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), big + 2.0f);
}

TEST(MfmaCdna3, GroupSumKeeps31BitsBelowTheLargerExponent) {
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  // C = 256; chunk sum 2^-16 + 2^-40. Exact: just above the tie -> 256 + 2^-15.
  // cdna3: 2^-40 is dropped at 31 bits below 2^8 -> an exact tie -> 256.
  const auto p = single(ins, {std::ldexp(1.0f, -16), std::ldexp(1.0f, -40)}, {1, 1}, 256.0f);
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 256.0f + std::ldexp(1.0f, -15));
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 256.0f);
}

TEST(MfmaCdna3, AccumulatorTruncatedTo24BitsBelowTheLargerExponent) {
  const Instr& ins = instr("mfma_32x32x8f16");
  // Chunk sum 1 + 2^-24 (a tie in fp32); C = 2^-30 tips it up only if kept.
  const auto p = single(ins, {1.0f, std::ldexp(1.0f, -24)}, {1, 1}, std::ldexp(1.0f, -30));
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 1.0f + std::ldexp(1.0f, -23));
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 1.0f);
}

TEST(MfmaCdna3, DenormalsAreKept) {
  for (auto m : {rt::MfmaModel::cdna3, rt::MfmaModel::exact}) {
    const Instr& bf = instr("mfma_16x16x16bf16_1k");
    // bf16 subnormal input 2^-130 times 2^10.
    EXPECT_EQ(d00(m, bf, single(bf, {std::ldexp(1.0f, -130)}, {1024.0f}, 0.0f)), std::ldexp(1.0f, -120));
    // fp16 subnormal input 2^-20.
    const Instr& h = instr("mfma_16x16x16f16");
    EXPECT_EQ(d00(m, h, single(h, {std::ldexp(1.0f, -20)}, {1.0f}, 0.0f)), std::ldexp(1.0f, -20));
    // A subnormal accumulator passes through.
    EXPECT_EQ(d00(m, bf, single(bf, {}, {}, std::ldexp(1.0f, -140))), std::ldexp(1.0f, -140));
    // Subnormal result of subnormal-range products: 2^-70 * 2^-70 = 2^-140.
    EXPECT_EQ(d00(m, bf, single(bf, {std::ldexp(1.0f, -70)}, {std::ldexp(1.0f, -70)}, 0.0f)),
              std::ldexp(1.0f, -140));
  }
}

TEST(MfmaCdna3, AlignmentUsesTheSumOfTheOperandExponents) {
  // 1.5 * 1.5 = 2.25 sits at exponent 0 + 0 (not 1), so the 2^-24 products
  // are kept: 2.25 + 7 * 2^-24 = 2.25 + 1.75 ulp -> 2.25 + 2^-21 (as exact).
  // Aligning to the product's own exponent (1) would drop them -> 2.25.
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  const float t = std::ldexp(1.0f, -24);
  const auto p = single(ins, {1.5f, t, t, t, t, t, t, t}, {1.5f, 1, 1, 1, 1, 1, 1, 1}, 0.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 2.25f + std::ldexp(1.0f, -21));
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 2.25f + std::ldexp(1.0f, -21));
}

TEST(MfmaCdna3, GroupSumIsFlooredNotTruncated) {
  // C = 256, group sum -(2^-17 + 2^-40). Floored to 31 bits below 2^8 it is
  // -(2^-17 + 2^-23): below the tie 256 - 2^-17 -> 256 - 2^-16.
  // Truncation toward zero would land on the tie -> 256.
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  const auto p = single(ins, {-std::ldexp(1.0f, -17), -std::ldexp(1.0f, -40)}, {1, 1}, 256.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 256.0f - std::ldexp(1.0f, -16));
  // A small negative accumulator under a larger group sum floors to one unit
  // of 2^-24 below: 1 + (-2^-30) -> 1 - 2^-24, which fp32 holds exactly;
  // exact arithmetic rounds 1 - 2^-30 to 1.
  const auto q = single(ins, {1.0f}, {1.0f}, -std::ldexp(1.0f, -30));
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, q), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, q), 1.0f);
}

TEST(MfmaCdna3, ProductBeyondFp32RangeIsInfinite) {
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  const float big = std::ldexp(1.0f, 100);
  // 2^200 - 2^200 is 0 in exact arithmetic; cdna3 sees +Inf and -Inf products.
  const auto p = single(ins, {big, -big}, {big, big}, 0.0f);
  EXPECT_TRUE(std::isnan(d00(rt::MfmaModel::cdna3, ins, p)));
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 0.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, single(ins, {big}, {big}, 0.0f)), INFINITY);
}

TEST(MfmaCdna3, F32IsAChainOfFmaInIncreasingK) {
  const Instr& ins = instr("mfma_32x32x2f32");
  const float h = std::ldexp(1.0f, -24);
  // 1 + 2^-24 + 2^-24: each fma rounds a tie back to 1; exact gives 1 + 2^-23.
  const auto p = single(ins, {h, h}, {1, 1}, 1.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 1.0f);
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), 1.0f + std::ldexp(1.0f, -23));
  // The product inside an fma is not rounded: (1+2^-12)^2 - 1 = 2^-11 + 2^-24.
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const auto q = single(ins, {a}, {a}, -1.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, q), std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
}

TEST(MfmaCdna3, Xf32TruncatesInputsToTf32) {
  const Instr& ins = instr("mfma_32x32x4xf32");
  const float a = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -10);  // 11 fraction bits
  const auto p = single(ins, {a}, {1.0f}, 0.0f);
  EXPECT_EQ(d00(rt::MfmaModel::cdna3, ins, p), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(d00(rt::MfmaModel::exact, ins, p), a);
}

TEST(MfmaCdna3, AgreesWithExactOnExactSums) {
  // Products of small integers: nothing is truncated, both models agree.
  std::mt19937 g(3);
  for (const Instr& ins : kInstrs) {
    Problem p;
    p.A.resize(ins.mn * ins.k);
    p.B.resize(ins.k * ins.mn);
    p.C.resize(ins.mn * ins.mn);
    for (float& v : p.A) v = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(g));
    for (float& v : p.B) v = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(g));
    for (float& v : p.C) v = static_cast<float>(std::uniform_int_distribution<int>(-100, 100)(g));
    std::vector<float> e, c;
    {
      rt::host::ScopedConfig sc(model_config(rt::MfmaModel::exact));
      e = run(ins, p);
    }
    {
      rt::host::ScopedConfig sc(model_config(rt::MfmaModel::cdna3));
      c = run(ins, p);
    }
    EXPECT_EQ(e, c) << ins.name;
  }
}

TEST(MfmaCdna3, NonFiniteInputsFollowIeee) {
  const Instr& ins = instr("mfma_32x32x8bf16_1k");
  for (auto m : {rt::MfmaModel::cdna3, rt::MfmaModel::exact}) {
    EXPECT_EQ(d00(m, ins, single(ins, {INFINITY}, {1}, 0.0f), false), INFINITY);
    EXPECT_EQ(d00(m, ins, single(ins, {1}, {1}, -INFINITY)), -INFINITY);
    EXPECT_TRUE(std::isnan(d00(m, ins, single(ins, {INFINITY, 1}, {0, 1}, 0.0f), false)));  // inf * 0
    EXPECT_TRUE(std::isnan(d00(m, ins, single(ins, {INFINITY, -INFINITY}, {1, 1}, 0.0f), false)));
    EXPECT_TRUE(std::isnan(d00(m, ins, single(ins, {NAN}, {1}, 0.0f), false)));
  }
}

KGATE_KERNEL(mfma_divergent, float* out) {
  rt::f32x4 acc{};
  if (rt::lane_id() < 63) acc = rt::mfma_16x16x4f32(1.0f, 1.0f, acc);
  out[rt::lane_id()] = acc[0];
}

TEST(Mfma, InactiveLanesAreAnError) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(mfma_divergent, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("mfma_16x16x4f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all 64 lanes must take part"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x7fffffffffffffff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel 'mfma_divergent'"), std::string::npos) << msg;
}

TEST(Mfma, A32WideTargetHasNoMfma) {
  auto c = rt::test::test_config();
  c.wave_size = 32;
  rt::host::ScopedConfig sc(c);
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(mfma_divergent, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("64-wide wave"), std::string::npos) << msg;
}

}  // namespace
