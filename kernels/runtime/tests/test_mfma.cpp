// MMA atoms on the host emulator: every atom's layout table against the
// vendor documents, every atom against a plain matrix product (exact model),
// hand-computed cases that tell the exact, cdna3 and sm90 models apart for
// every atom, the integer models against straightforward fp64 transcriptions
// of their definitions, and the misuse errors.
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "kernels/runtime/host/mma_numerics.hpp"
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
namespace mma = kgate::rt::mma;
using kgate::rt::test::bits_of;
using kgate::rt::test::error_of;

namespace {

// ---------------------------------------------------------------------------
// Running one atom on whole matrices (row-major A: M x K, B: K x N, C: M x N)
// through the kernel-facing API.

template <class Atom>
KGATE_KERNEL(atom_kernel, const mma::operand_t<Atom>* a, const mma::operand_t<Atom>* b, const float* c, float* d) {
  const auto af = mma::load_a<Atom>([&](int i, int k) { return a[i * Atom::K + k]; });
  const auto bf = mma::load_b<Atom>([&](int k, int j) { return b[k * Atom::N + j]; });
  const auto cf = mma::load_c<Atom>([&](int i, int j) { return c[i * Atom::N + j]; });
  mma::visit_c<Atom>(mma::mma<Atom>(af, bf, cf), [&](int i, int j, float v) { d[i * Atom::N + j] = v; });
}

template <class Atom>
mma::operand_t<Atom> to_operand(float v) {
  if constexpr (Atom::type == rt::MmaType::bf16) return kgate::fp32_to_bf16_bits(v);
  else if constexpr (Atom::type == rt::MmaType::f16) return kgate::fp32_to_fp16_bits(v);
  else return v;
}

template <class Atom>
constexpr rt::MfmaModel hardware_model() {
  return Atom::target == rt::Target::gfx942 ? rt::MfmaModel::cdna3 : rt::MfmaModel::sm90;
}

template <class Atom>
rt::host::Config atom_config(rt::MfmaModel model) {
  rt::host::Config c = rt::host::config_for(Atom::target, rt::test::test_config());
  c.mfma = model;
  return c;
}

template <class Atom>
std::vector<float> run_atom(rt::MfmaModel model, const std::vector<float>& A, const std::vector<float>& B,
                            const std::vector<float>& C) {
  rt::host::ScopedConfig sc(atom_config<Atom>(model));
  using T = mma::operand_t<Atom>;
  std::vector<T> a(A.size()), b(B.size());
  for (std::size_t i = 0; i < A.size(); ++i) a[i] = to_operand<Atom>(A[i]);
  for (std::size_t i = 0; i < B.size(); ++i) b[i] = to_operand<Atom>(B[i]);
  rt::DeviceBuffer<T> da(a.size()), db(b.size());
  rt::DeviceBuffer<float> dc(C.size()), dd(C.size());
  da.upload(a);
  db.upload(b);
  dc.upload(C);
  KGATE_LAUNCH((atom_kernel<Atom>), (rt::LaunchConfig{1, static_cast<unsigned>(Atom::lanes)}), da.data(), db.data(),
               dc.data(), dd.data());
  return dd.download();
}

// Random values representable in the input type with few significant bits
// and a moderate exponent range, so that the double sums below are exact.
template <class Atom>
float random_value(std::mt19937& g) {
  const int bits = Atom::type == rt::MmaType::bf16 ? 8 : 11;
  const int m = std::uniform_int_distribution<int>(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)(g);
  const int e = std::uniform_int_distribution<int>(-6, 6)(g);
  return std::ldexp(static_cast<float>(m), e - bits);
}

template <class Atom>
class AtomTest : public ::testing::Test {};
using AllAtoms = ::testing::Types<mma::gfx942_32x32x8_bf16, mma::gfx942_16x16x16_bf16, mma::gfx942_32x32x8_f16,
                                  mma::gfx942_16x16x16_f16, mma::gfx942_32x32x2_f32, mma::gfx942_16x16x4_f32,
                                  mma::gfx942_32x32x4_xf32, mma::gfx942_16x16x8_xf32, mma::sm90_m16n8k16_bf16,
                                  mma::sm90_m16n8k16_f16, mma::sm90_m16n8k8_bf16, mma::sm90_m16n8k8_f16>;
TYPED_TEST_SUITE(AtomTest, AllAtoms);

// ---------------------------------------------------------------------------
// Layout tables against the documents, written out independently here.

struct Slot {
  int row, col;
  bool operator<(const Slot& o) const { return row != o.row ? row < o.row : col < o.col; }
};

// AMD (CDNA3 ISA, matrix instruction calculator), kpe = elements per lane.
Slot gfx942_a(int mn, int kpe, int lane, int r) { return {lane % mn, kpe * (lane / mn) + r}; }
Slot gfx942_b(int mn, int kpe, int lane, int r) { return {kpe * (lane / mn) + r, lane % mn}; }
Slot gfx942_c(int mn, int lane, int r) {
  return mn == 32 ? Slot{8 * (r / 4) + 4 * (lane / 32) + r % 4, lane % 32} : Slot{4 * (lane / 16) + r, lane % 16};
}
// PTX ISA, "matrix fragments for mma.m16n8k16 / m16n8k8" (f16/bf16, .f32 accumulators).
Slot ptx_c(int lane, int r) { return {lane / 4 + 8 * (r / 2), 2 * (lane % 4) + (r & 1)}; }
Slot ptx_a(int k, int lane, int r) {
  if (k == 8) return ptx_c(lane, r);
  return {lane / 4 + 8 * ((r / 2) % 2), 2 * (lane % 4) + (r & 1) + 8 * (r / 4)};
}
Slot ptx_b(int k, int lane, int r) {
  if (k == 8) return {2 * (lane % 4) + r, lane / 4};
  return {2 * (lane % 4) + (r & 1) + 8 * (r / 2), lane / 4};
}

template <class Atom>
void expect_layout(const mma::layout& L, int rows, int cols, const std::function<Slot(int, int)>& doc, const char* what) {
  std::set<Slot> seen;
  EXPECT_EQ(L.lanes(), Atom::lanes) << what;
  for (int lane = 0; lane < L.lanes(); ++lane)
    for (int r = 0; r < L.regs(); ++r) {
      const mma::coord x = L(lane, r);
      const Slot d = doc(lane, r);
      EXPECT_EQ(x.row, d.row) << Atom::name << " " << what << " lane " << lane << " reg " << r;
      EXPECT_EQ(x.col, d.col) << Atom::name << " " << what << " lane " << lane << " reg " << r;
      EXPECT_TRUE(x.row >= 0 && x.row < rows && x.col >= 0 && x.col < cols) << what;
      seen.insert({x.row, x.col});
    }
  EXPECT_EQ(static_cast<int>(seen.size()), rows * cols) << Atom::name << " " << what << ": not a bijection";
}

TYPED_TEST(AtomTest, LayoutTablesAreTheVendorLayouts) {
  using A = TypeParam;
  if constexpr (A::target == rt::Target::gfx942) {
    const int kpe = A::a().regs();
    expect_layout<A>(A::a(), A::M, A::K, [&](int l, int r) { return gfx942_a(A::M, kpe, l, r); }, "A");
    expect_layout<A>(A::b(), A::K, A::N, [&](int l, int r) { return gfx942_b(A::N, kpe, l, r); }, "B");
    expect_layout<A>(A::c(), A::M, A::N, [&](int l, int r) { return gfx942_c(A::M, l, r); }, "C");
  } else {
    expect_layout<A>(A::a(), A::M, A::K, [&](int l, int r) { return ptx_a(A::K, l, r); }, "A");
    expect_layout<A>(A::b(), A::K, A::N, [&](int l, int r) { return ptx_b(A::K, l, r); }, "B");
    expect_layout<A>(A::c(), A::M, A::N, [&](int l, int r) { return ptx_c(l, r); }, "C");
  }
}

TYPED_TEST(AtomTest, ExactModelMatchesThePlainProduct) {
  using A = TypeParam;
  std::mt19937 g(7);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<float> a(A::M * A::K), b(A::K * A::N), c(A::M * A::N);
    for (float& v : a) v = random_value<A>(g);
    for (float& v : b) v = random_value<A>(g);
    for (float& v : c) v = std::ldexp(static_cast<float>(std::uniform_int_distribution<int>(-1000, 1000)(g)), -6);
    const auto d = run_atom<A>(rt::MfmaModel::exact, a, b, c);
    for (int i = 0; i < A::M; ++i)
      for (int j = 0; j < A::N; ++j) {
        double s = c[i * A::N + j];
        for (int k = 0; k < A::K; ++k) s += static_cast<double>(a[i * A::K + k]) * b[k * A::N + j];  // exact
        ASSERT_EQ(bits_of(d[i * A::N + j]), bits_of(static_cast<float>(s))) << A::name << " D[" << i << "][" << j << "]";
      }
  }
}

TYPED_TEST(AtomTest, HardwareModelAgreesWithExactOnExactSums) {
  using A = TypeParam;
  std::mt19937 g(3);
  std::vector<float> a(A::M * A::K), b(A::K * A::N), c(A::M * A::N);
  for (float& v : a) v = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(g));
  for (float& v : b) v = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(g));
  for (float& v : c) v = static_cast<float>(std::uniform_int_distribution<int>(-100, 100)(g));
  EXPECT_EQ(run_atom<A>(rt::MfmaModel::exact, a, b, c), run_atom<A>(hardware_model<A>(), a, b, c)) << A::name;
}

// ---------------------------------------------------------------------------
// Hand-computed cases: row 0 of A, column 0 of B and C[0][0]; everything else
// zero. Each case gives D[0][0] under exact, cdna3 and sm90.

template <class Atom>
float d00(rt::MfmaModel m, const std::vector<float>& a, const std::vector<float>& b, float c00, bool rest_zero = true) {
  std::vector<float> A(Atom::M * Atom::K, 0.0f), B(Atom::K * Atom::N, 0.0f), C(Atom::M * Atom::N, 0.0f);
  for (std::size_t k = 0; k < a.size(); ++k) A[k] = a[k];
  for (std::size_t k = 0; k < b.size(); ++k) B[k * Atom::N] = b[k];
  C[0] = c00;
  const auto D = run_atom<Atom>(m, A, B, C);
  for (std::size_t i = 1; rest_zero && i < D.size(); ++i) EXPECT_EQ(bits_of(D[i]), 0u) << Atom::name << " D flat " << i;
  return D[0];
}

struct Case {
  const char* what;
  std::vector<float> a, b;
  float c;
  float exact, cdna3, sm90;
  bool rest_zero = true;
};

const float p = 1.0f;
float two(int e) { return std::ldexp(1.0f, e); }

// Cases valid for every bf16 / f16 atom (K >= 8; values representable in f16).
std::vector<Case> half_cases() {
  const float t = two(-13), u = two(-12);  // t * u = 2^-25
  return {
      {"products below 24 bits are cut (cdna3), kept at 25 bits and the sum cut toward zero (sm90)",
       {p, t, t, t, t, t, t, t}, {p, u, u, u, u, u, u, u}, 0.0f, 1 + two(-22), 1.0f, 1 + two(-23)},
      {"cutting is toward zero for negative sums", {-p, -t, -t, -t, -t, -t, -t, -t}, {p, u, u, u, u, u, u, u}, 0.0f,
       -(1 + two(-22)), -1.0f, -(1 + two(-23))},
      {"a small C is dropped at 24 (cdna3) or 25 (sm90) bits below the products", {p, two(-12)}, {p, two(-12)}, two(-30),
       1 + two(-23), 1.0f, 1.0f},
      {"a small negative C is floored (cdna3) or cut toward zero (sm90)", {p}, {p}, -two(-30), 1.0f, 1 - two(-24), 1.0f},
      {"cancellation leaves nothing of a product cut away", {p, -p, two(-20)}, {p, p, two(-20)}, 0.0f, two(-40), 0.0f,
       0.0f},
      {"cancellation leaves nothing of a C cut away", {p, -p}, {p, p}, two(-40), two(-40), 0.0f, 0.0f},
      {"alignment at ea + eb, not the renormalised product exponent", {1.5f, two(-24), two(-24), two(-24), two(-24),
       two(-24), two(-24), two(-24)}, {1.5f, p, p, p, p, p, p, p}, 0.0f, 2.25f + two(-21), 2.25f + two(-21), 2.25f + two(-22)},
      {"subnormal inputs are kept", {two(-20)}, {p}, 0.0f, two(-20), two(-20), two(-20)},
      {"a subnormal C passes through", {}, {}, two(-140), two(-140), two(-140), two(-140)},
      {"Inf * finite is Inf", {INFINITY}, {p}, 0.0f, INFINITY, INFINITY, INFINITY, false},
      {"an Inf C", {p}, {p}, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
      {"Inf * 0 is NaN", {INFINITY, p}, {0.0f, p}, 0.0f, NAN, NAN, NAN, false},
      {"Inf - Inf is NaN", {INFINITY, -INFINITY}, {p, p}, 0.0f, NAN, NAN, NAN, false},
      {"a NaN input", {NAN}, {p}, 0.0f, NAN, NAN, NAN, false},
  };
}

// bf16 only: the fp32 exponent range of the products.
std::vector<Case> bf16_cases() {
  return {
      {"a subnormal result is rounded to nearest (exact, cdna3) or cut toward zero (sm90)", {1.5f * two(-75)},
       {two(-74)}, 0.0f, two(-148), two(-148), two(-149)},
      {"a bf16 subnormal input", {two(-130)}, {two(10)}, 0.0f, two(-120), two(-120), two(-120)},
      {"a product of 2^128 or more is Inf in cdna3 only: 2^200 - 2^200", {two(100), -two(100)}, {two(100), two(100)},
       0.0f, 0.0f, NAN, 0.0f},
      {"a finite sum beyond fp32 is Inf", {two(100)}, {two(100)}, 0.0f, INFINITY, INFINITY, INFINITY},
  };
}

template <class Atom>
void expect_case(const Case& cs) {
  for (rt::MfmaModel m : {rt::MfmaModel::exact, hardware_model<Atom>()}) {
    const float want = m == rt::MfmaModel::exact ? cs.exact : (m == rt::MfmaModel::cdna3 ? cs.cdna3 : cs.sm90);
    const float got = d00<Atom>(m, cs.a, cs.b, cs.c, cs.rest_zero);
    if (std::isnan(want)) {
      // NaN encodings: 0x7FFFFFFF for sm90, the quiet NaN 0x7FC00000 otherwise.
      EXPECT_EQ(bits_of(got), m == rt::MfmaModel::sm90 ? 0x7FFFFFFFu : 0x7FC00000u)
          << Atom::name << " " << rt::mfma_model_name(m) << ": " << cs.what;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(want)) << Atom::name << " " << rt::mfma_model_name(m) << ": " << cs.what
                                             << " (got " << got << ", want " << want << ")";
    }
  }
}

TYPED_TEST(AtomTest, HandCasesTellTheModelsApart) {
  using A = TypeParam;
  if constexpr (A::type == rt::MmaType::bf16 || A::type == rt::MmaType::f16) {
    for (const Case& cs : half_cases()) expect_case<A>(cs);
    if constexpr (A::type == rt::MmaType::bf16) {
      for (const Case& cs : bf16_cases()) expect_case<A>(cs);
      // -2^-150: rounded to nearest it is -0, cut toward zero sm_90 gives
      // +0. (In the last cdna3 group: a group without products returns C,
      // and a zero C as +0.)
      std::vector<float> a(A::K, 0.0f), b(A::K, 0.0f);
      a[A::K - 8] = -two(-75);
      b[A::K - 8] = two(-75);
      expect_case<A>({"a negative sum below 2^-149", a, b, 0.0f, -0.0f, -0.0f, 0.0f});
    }
    if constexpr (A::K == 16) {
      // K = 16: cdna3 runs two groups of 8 in sequence (fp32 between), sm90
      // one fused sum of 16: 2^11 + 2^-13 + 2^-13.
      std::vector<float> a(16, 0.0f), b(16, 1.0f);
      a[0] = two(11);
      a[1] = two(-13);
      a[8] = two(-13);
      expect_case<A>({"groups of 8 (cdna3) against one fused sum (sm90)", a, b, 0.0f, two(11) + two(-12), two(11),
                      two(11) + two(-12)});
    }
    if constexpr (A::K == 16 && A::type == rt::MmaType::bf16) {
      // An Inf or NaN that the first cdna3 group makes is the second's C: it
      // stays (NaN where an Inf product of the other sign meets it).
      std::vector<float> a(16, 0.0f), b(16, 0.0f);
      a[0] = b[0] = two(100);
      a[8] = b[8] = p;
      expect_case<A>({"cdna3: the first group's Inf stays", a, b, 0.0f, INFINITY, INFINITY, INFINITY});
      a[1] = -two(100);
      b[1] = two(100);
      expect_case<A>({"cdna3: the first group's NaN stays (sm90 cuts the 1 away)", a, b, 0.0f, 1.0f, NAN, 0.0f, false});
      a[1] = 0.0f;
      a[8] = -two(100);
      b[8] = two(100);
      expect_case<A>({"cdna3: the first group's Inf meets the second's -Inf", a, b, 0.0f, 0.0f, NAN, 0.0f});
    }
  } else if constexpr (A::type == rt::MmaType::f32) {
    const float h = two(-24);
    if constexpr (A::K >= 2) {
      expect_case<A>({"f32: a chain of fma in increasing k", {h, h}, {p, p}, 1.0f, 1 + two(-23), 1.0f, 1.0f});
    }
    const float q = 1.0f + two(-12);
    expect_case<A>({"f32: the product inside an fma is not rounded", {q}, {q}, -1.0f, two(-11) + two(-24),
                    two(-11) + two(-24), 0.0f});
    expect_case<A>({"f32: Inf * 0 is NaN", {INFINITY, p}, {0.0f, p}, 0.0f, NAN, NAN, NAN, false});
  } else {
    const float a = 1.0f + two(-11) + two(-10);  // 11 fraction bits
    expect_case<A>({"xf32: inputs truncated to tf32", {a}, {p}, 0.0f, a, 1 + two(-10), 0.0f});
    const float t = two(-25);
    expect_case<A>({"xf32: groups of 4 truncate like bf16", {p, t, t, t}, {p, p, p, p}, 0.0f, 1 + two(-23), 1.0f, 0.0f});
  }
}

// ---------------------------------------------------------------------------
// The integer models against fp64 transcriptions of their definitions
// (MMA-Sim's fused_sum: significands as doubles, exponents as integers).

struct SigExp {
  double s;
  int e;
};
SigExp sig_exp(double x, int min_exp) {
  if (x == 0.0) return {0.0, -999};
  int e = 0;
  double s = std::frexp(x, &e) * 2.0;
  e -= 1;
  if (e < min_exp) {
    s = std::ldexp(s, e - min_exp);
    e = min_exp;
  }
  return {s, e};
}

float cdna3_reference(const double* a, const double* b, int n, float c, int min_exp) {
  double sig[8];
  int ex[8], m = 0, max_e = -100000;
  for (int i = 0; i < n; ++i) {
    const SigExp x = sig_exp(a[i], min_exp), y = sig_exp(b[i], min_exp);
    sig[m] = x.s * y.s;
    ex[m] = x.e + y.e;
    max_e = std::max(max_e, ex[m]);
    ++m;
  }
  double s = 0.0;
  for (int i = 0; i < m; ++i) s += std::ldexp(std::trunc(std::ldexp(sig[i], 24 + ex[i] - max_e)), -24);
  const SigExp cc = sig_exp(c, -126);
  const int top = std::max(max_e, cc.e);
  s = std::ldexp(std::floor(std::ldexp(s, 31 + max_e - top)), -31);
  const double sc = std::ldexp(std::floor(std::ldexp(cc.s, 24 + cc.e - top)), -24);
  return static_cast<float>(std::ldexp(s + sc, top));
}

float sm90_reference(const double* a, const double* b, int n, float c, int min_exp) {
  std::vector<double> sig;
  std::vector<int> ex;
  const SigExp cc = sig_exp(c, -126);
  sig.push_back(cc.s);
  ex.push_back(cc.e);
  for (int i = 0; i < n; ++i) {
    const SigExp x = sig_exp(a[i], min_exp), y = sig_exp(b[i], min_exp);
    sig.push_back(x.s * y.s);
    ex.push_back(x.e + y.e);
  }
  int max_e = -100000;
  for (std::size_t i = 0; i < sig.size(); ++i)
    if (sig[i] != 0.0) max_e = std::max(max_e, ex[i]);
  double s = 0.0;
  for (std::size_t i = 0; i < sig.size(); ++i) s += std::ldexp(std::trunc(std::ldexp(sig[i], 25 + ex[i] - max_e)), -25);
  if (s == 0.0) return 0.0f;
  const SigExp r = sig_exp(std::ldexp(s, max_e), -126);
  const double v = std::ldexp(std::trunc(std::ldexp(r.s, 23)), r.e - 23);
  if (v == 0.0) return 0.0f;  // sm_90 returns +0 for a sum cut to zero
  return std::fabs(v) >= 0x1p128 ? std::copysign(INFINITY, v) : static_cast<float>(v);
}

// Finite bf16 / f16 bit patterns over the whole exponent range.
std::uint16_t random_bits(std::mt19937& g, bool bf16) {
  for (;;) {
    const auto h = static_cast<std::uint16_t>(g());
    const unsigned e = bf16 ? (h >> 7) & 0xff : (h >> 10) & 0x1f;
    if (e != (bf16 ? 0xffu : 0x1fu)) return h;
  }
}

TEST(MmaNumerics, IntegerModelsMatchTheirFp64Definitions) {
  std::mt19937 g(11);
  for (bool bf16 : {true, false}) {
    const auto type = bf16 ? rt::MmaType::bf16 : rt::MmaType::f16;
    const int min_exp = bf16 ? -126 : -14;
    for (int trial = 0; trial < 20000; ++trial) {
      std::uint16_t a[16], b[16];
      double da[16], db[16];
      // Narrow the exponents in some trials, so that alignment keeps bits.
      const bool narrow = trial % 2 == 0;
      for (int k = 0; k < 16; ++k) {
        a[k] = random_bits(g, bf16);
        b[k] = random_bits(g, bf16);
        if (narrow) {
          a[k] = static_cast<std::uint16_t>((a[k] & (bf16 ? 0x807f : 0x83ff)) | (bf16 ? (120 + g() % 16) << 7 : (8 + g() % 14) << 10));
          b[k] = static_cast<std::uint16_t>((b[k] & (bf16 ? 0x807f : 0x83ff)) | (bf16 ? (120 + g() % 16) << 7 : (8 + g() % 14) << 10));
        }
        da[k] = bf16 ? kgate::bf16_bits_to_fp32(a[k]) : kgate::fp16_bits_to_fp32(a[k]);
        db[k] = bf16 ? kgate::bf16_bits_to_fp32(b[k]) : kgate::fp16_bits_to_fp32(b[k]);
      }
      const float c = narrow ? std::ldexp(static_cast<float>(static_cast<int>(g() % 2000001) - 1000000), -20 - static_cast<int>(g() % 20))
                             : std::ldexp(static_cast<float>(static_cast<int>(g() % 2000001) - 1000000), static_cast<int>(g() % 200) - 150);
      // cdna3 (one group of 8; products of bf16 beyond 2^128 are excluded
      // here: the reference does not model them).
      double pmax = 0.0;
      for (int k = 0; k < 8; ++k) pmax = std::max(pmax, std::fabs(da[k] * db[k]));
      if (pmax < 0x1p120) {
        const float want = cdna3_reference(da, db, 8, c, min_exp);
        const float got = rt::numerics::dot_bits(rt::MfmaModel::cdna3, type, a, b, 8, c);
        ASSERT_EQ(bits_of(got), bits_of(want)) << "cdna3 trial " << trial << (bf16 ? " bf16" : " f16");
      }
      const float want = sm90_reference(da, db, 16, c, min_exp);
      const float got = rt::numerics::dot_bits(rt::MfmaModel::sm90, type, a, b, 16, c);
      ASSERT_EQ(bits_of(got), bits_of(want)) << "sm90 trial " << trial << (bf16 ? " bf16" : " f16");
    }
  }
}

// ---------------------------------------------------------------------------
// Misuse.

KGATE_KERNEL(mfma_divergent, float* out) {
  rt::f32x4 acc{};
  if (rt::lane_id() < 63) acc = rt::mfma_16x16x4f32(1.0f, 1.0f, acc);
  out[rt::lane_id()] = acc[0];
}

// K runs (load_a_run / load_b_run): consecutive registers holding
// consecutive K, read off each atom's layout table.
TEST(Mma, KRunsFollowTheLayouts) {
  EXPECT_EQ(mma::a_k_run<mma::sm90_m16n8k16_bf16>, 2);  // a0, a1 at columns 2t, 2t + 1
  EXPECT_EQ(mma::b_k_run<mma::sm90_m16n8k16_bf16>, 2);  // b0, b1 at rows 2t, 2t + 1
  EXPECT_EQ(mma::a_k_run<mma::sm90_m16n8k8_f16>, 2);
  EXPECT_EQ(mma::b_k_run<mma::sm90_m16n8k8_f16>, 2);
  EXPECT_EQ(mma::a_k_run<mma::gfx942_32x32x8_bf16>, 4);  // element k % 4
  EXPECT_EQ(mma::b_k_run<mma::gfx942_16x16x16_f16>, 4);
  EXPECT_EQ(mma::a_k_run<mma::gfx942_32x32x4_xf32>, 2);
  EXPECT_EQ(mma::a_k_run<mma::gfx942_32x32x2_f32>, 1);  // one register
}

// LDS fragment loads (load_a_lds / load_b_lds) against load_a / load_b by
// coordinate from the same LDS tiles (A by row, B by column, pitch K + 8,
// tiles from element `base`), and the K-major loads from the transposed
// tiles (pitch M + 8 and N + 8): every lane's fragment, element for element.
template <class Atom>
KGATE_KERNEL(lds_fragment_kernel, const std::uint16_t* a, const std::uint16_t* b, int base, int* mismatches) {
  constexpr int P = Atom::K + 8, PM = Atom::M + 8, PN = Atom::N + 8;
  KGATE_LDS(sa, std::uint16_t, 16 + Atom::M * P);
  KGATE_LDS(sb, std::uint16_t, 16 + Atom::N * P);
  KGATE_LDS(sat, std::uint16_t, 16 + Atom::K * PM);
  KGATE_LDS(sbt, std::uint16_t, 16 + Atom::K * PN);
  const int lane = rt::lane_id();
  for (int i = lane; i < Atom::M * P; i += Atom::lanes) sa[base + i] = a[i];
  for (int i = lane; i < Atom::N * P; i += Atom::lanes) sb[base + i] = b[i];
  for (int x = lane; x < Atom::M * Atom::K; x += Atom::lanes) sat[base + (x % Atom::K) * PM + x / Atom::K] = a[(x / Atom::K) * P + x % Atom::K];
  for (int x = lane; x < Atom::N * Atom::K; x += Atom::lanes) sbt[base + (x % Atom::K) * PN + x / Atom::K] = b[(x / Atom::K) * P + x % Atom::K];
  rt::barrier();
  const auto af = mma::load_a_lds<Atom>(sa, base, P);
  const auto bf = mma::load_b_lds<Atom>(sb, base, P);
  const auto aft = mma::load_a_lds_kmajor<Atom>(sat, base, PM);
  const auto bft = mma::load_b_lds_kmajor<Atom>(sbt, base, PN);
  const auto ar = mma::load_a<Atom>([&](int i, int k) { return static_cast<std::uint16_t>(sa[base + i * P + k]); });
  const auto br = mma::load_b<Atom>([&](int k, int j) { return static_cast<std::uint16_t>(sb[base + j * P + k]); });
  int bad = 0;
  for (int r = 0; r < Atom::a().regs(); ++r) bad += (af[r] != ar[r]) + (aft[r] != ar[r]);
  for (int r = 0; r < Atom::b().regs(); ++r) bad += (bf[r] != br[r]) + (bft[r] != br[r]);
  mismatches[lane] = bad;
}

template <class Atom>
void check_lds_fragments() {
  SCOPED_TRACE(Atom::name);
  rt::host::ScopedConfig sc(rt::host::config_for(Atom::target, rt::test::test_config()));
  constexpr int P = Atom::K + 8;
  std::vector<std::uint16_t> a(Atom::M * P), b(Atom::N * P);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint16_t>(0x3c00 + i);  // all distinct
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint16_t>(0x4c00 + i);
  rt::DeviceBuffer<std::uint16_t> da(a.size()), db(b.size());
  da.upload(a);
  db.upload(b);
  rt::DeviceBuffer<int> bad(Atom::lanes);
  KGATE_LAUNCH((lds_fragment_kernel<Atom>), (rt::LaunchConfig{1, static_cast<unsigned>(Atom::lanes)}), da.data(),
               db.data(), 8, bad.data());
  for (int v : bad.download()) EXPECT_EQ(v, 0);
  // A base off a 16-byte row is a misuse, on every backend's terms.
  const std::string msg = error_of([&] {
    KGATE_LAUNCH((lds_fragment_kernel<Atom>), (rt::LaunchConfig{1, static_cast<unsigned>(Atom::lanes)}), da.data(),
                 db.data(), 4, bad.data());
  });
  EXPECT_NE(msg.find("base 4 and pitch " + std::to_string(P) + " must be multiples of 8 elements"), std::string::npos)
      << msg;
}

TEST(Mma, LdsFragmentLoadsAreTheCoordinateLoads) {
  check_lds_fragments<mma::gfx942_32x32x8_bf16>();
  check_lds_fragments<mma::gfx942_16x16x16_f16>();
  check_lds_fragments<mma::sm90_m16n8k16_bf16>();
  check_lds_fragments<mma::sm90_m16n8k8_f16>();
  // ldmatrix's distribution is the sm_90 atoms' (CUDA reads them with it),
  // not gfx942's.
  EXPECT_TRUE((mma::detail::ldmatrix_fits<mma::sm90_m16n8k16_f16, mma::detail::opB>()));
  EXPECT_TRUE((mma::detail::ldmatrix_fits<mma::sm90_m16n8k16_f16, mma::detail::opA, true>()));
  EXPECT_FALSE((mma::detail::ldmatrix_fits<mma::gfx942_32x32x8_bf16, mma::detail::opB, true>()));
  EXPECT_FALSE((mma::detail::ldmatrix_fits<mma::gfx942_16x16x16_bf16, mma::detail::opA>()));
  EXPECT_FALSE((mma::detail::ldmatrix_fits<mma::gfx942_32x32x2_f32, mma::detail::opA>()));
}

TEST(Mma, InactiveLanesAreAnError) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(mfma_divergent, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("v_mfma_f32_16x16x4_f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all 64 lanes must take part"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x7fffffffffffffff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel 'mfma_divergent'"), std::string::npos) << msg;
}

TEST(Mma, A32WideGfx942ModelHasNoMfma) {
  auto c = rt::test::test_config();
  c.wave_size = 32;
  rt::host::ScopedConfig sc(c);
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(mfma_divergent, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("needs a 64-wide wave"), std::string::npos) << msg;
}

template <class Atom>
std::string wrong_target_error(rt::Target t) {
  rt::host::Config c = rt::host::config_for(t, rt::test::test_config());
  rt::host::ScopedConfig sc(c);
  using T = mma::operand_t<Atom>;
  rt::DeviceBuffer<T> a(Atom::M * Atom::K), b(Atom::K * Atom::N);
  rt::DeviceBuffer<float> cc(Atom::M * Atom::N), d(Atom::M * Atom::N);
  return error_of([&] {
    KGATE_LAUNCH((atom_kernel<Atom>), (rt::LaunchConfig{1, 64}), a.data(), b.data(), cc.data(), d.data());
  });
}

TEST(Mma, AnAtomOfTheOtherTargetIsAnError) {
  // sm90 atom on gfx942 (wave64): the warp is 32 lanes.
  std::string msg = wrong_target_error<mma::sm90_m16n8k16_bf16>(rt::Target::gfx942);
  EXPECT_NE(msg.find("needs a 32-wide wave"), std::string::npos) << msg;
  // gfx942 atom on sm90 (warp 32).
  msg = wrong_target_error<mma::gfx942_32x32x8_bf16>(rt::Target::sm90);
  EXPECT_NE(msg.find("needs a 64-wide wave"), std::string::npos) << msg;
  // sm90 atom on the 32-wide gfx942 model: the lanes fit, the target does not.
  rt::host::Config c = rt::test::test_config();
  c.wave_size = 32;
  rt::host::ScopedConfig sc(c);
  rt::DeviceBuffer<std::uint16_t> a(256), b(128);
  rt::DeviceBuffer<float> cc(128), d(128);
  msg = error_of([&] {
    KGATE_LAUNCH((atom_kernel<mma::sm90_m16n8k16_bf16>), (rt::LaunchConfig{1, 32}), a.data(), b.data(), cc.data(),
                 d.data());
  });
  EXPECT_NE(msg.find("an sm90 atom on the emulated gfx942 target"), std::string::npos) << msg;
}

TEST(Mma, DefaultAtomFollowsTheTarget) {
  std::string seen;
  {
    rt::host::ScopedConfig sc(rt::host::config_for(rt::Target::gfx942, rt::test::test_config()));
    mma::with_default_atom<rt::MmaType::bf16>([&](auto atom) { seen = decltype(atom)::name; });
    EXPECT_EQ(seen, "v_mfma_f32_32x32x8_bf16");
    mma::with_default_atom<rt::MmaType::xf32>([&](auto atom) { seen = decltype(atom)::name; });
    EXPECT_EQ(seen, "v_mfma_f32_32x32x4_xf32");
  }
  rt::host::ScopedConfig sc(rt::host::config_for(rt::Target::sm90, rt::test::test_config()));
  mma::with_default_atom<rt::MmaType::f16>([&](auto atom) { seen = decltype(atom)::name; });
  EXPECT_EQ(seen, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
  const std::string msg = error_of([&] { mma::with_default_atom<rt::MmaType::f32>([&](auto) {}); });
  EXPECT_NE(msg.find("sm90 target has no MMA atom"), std::string::npos) << msg;
}

}  // namespace
