// MFMA emulation for the host backend: operand layouts and numeric models.
//
// Layouts (EMULATOR.md, 64 lanes, A is M x K, B is K x N, C/D is M x N;
// `kpe` = elements per lane: 4 for bf16/f16, 1 for f32, 2 for xf32):
//   A[i][k] = lane i + MN*(k/kpe), element k%kpe   (MN = 32 or 16)
//   B[k][j] = lane j + MN*(k/kpe), element k%kpe
//   32x32: D[i][j] = lane j + 32*((i/4)%2), element (i%4) + 4*(i/8)
//   16x16: D[i][j] = lane j + 16*(i/4),     element i%4
// All 64 lanes take part; a collective with an inactive lane is an error.
//
// Numeric models (host::Config::mfma):
//   exact  every product exact, the K-sum and C added exactly, one
//          round-to-nearest-even to fp32.
//   cdna3  the bit-level model of the MI300 matrix cores, as MMA-Sim
//          (arXiv 2511.10909; mmasim/simulator/amd.py, functions.py
//          amd_fused_dot_add) defines it: f16/bf16 products are exact and
//          summed in groups of 8 along K in increasing k (K=16: two groups in
//          sequence, fp32 between); within a group every product, taken as
//          significand product at exponent ea+eb (subnormal inputs at the
//          format's minimum exponent), is truncated toward zero to 24
//          fractional bits below the group's largest such exponent and the
//          group is summed exactly; the group sum is floored to 31 and the
//          accumulator C to 24 fractional bits below the larger of the two
//          exponents, and their sum is rounded once (nearest-even) to fp32.
//          f32 is fmaf chained in increasing k. xf32 truncates its inputs to
//          tf32 (10 fraction bits) and uses groups of 4. Denormal inputs and
//          accumulators are kept. A non-finite fp64 sum is returned as is; a
//          product beyond the fp32 range gives +-Inf (NaN for both signs).
// The exact model gives the IEEE result of the plain sum for non-finite
// inputs.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/runtime/runtime.hpp"

namespace kgate::rt::host::detail {

namespace {

// An exact fixed-point accumulator wide enough for any sum of up to a few
// hundred products of two fp32 values plus an fp32: bit b has weight
// 2^(b + kBase), two's complement over kLimbs*64 bits.
class ExactAcc {
 public:
  void add(double x) {
    if (x == 0.0) return;
    int e = 0;
    const double f = std::frexp(std::fabs(x), &e);  // x = f * 2^e, f in [0.5, 1)
    const auto m = static_cast<std::uint64_t>(std::ldexp(f, 53));
    const int pos = e - 53 - kBase;
    add_shifted(m, pos, x < 0);
  }

  float round_to_float() const {
    std::uint64_t mag[kLimbs];
    const bool neg = (w_[kLimbs - 1] >> 63) != 0;
    std::memcpy(mag, w_, sizeof mag);
    if (neg) {  // two's complement negate
      std::uint64_t carry = 1;
      for (int i = 0; i < kLimbs; ++i) {
        mag[i] = ~mag[i] + carry;
        carry = (carry && mag[i] == 0) ? 1 : 0;
      }
    }
    int p = -1;
    for (int i = kLimbs - 1; i >= 0 && p < 0; --i)
      if (mag[i]) p = i * 64 + 63 - __builtin_clzll(mag[i]);
    if (p < 0) return 0.0f;
    auto bit = [&](int b) -> std::uint64_t { return b < 0 ? 0 : (mag[b / 64] >> (b % 64)) & 1u; };
    const int top_exp = p + kBase;
    const int lsb_exp = std::max(top_exp - 23, -149);
    const int lsb = lsb_exp - kBase;
    std::uint64_t mant = 0;
    for (int b = p; b >= lsb; --b) mant = (mant << 1) | bit(b);
    const std::uint64_t guard = bit(lsb - 1);
    bool sticky = false;
    for (int b = lsb - 2; b >= 0 && !sticky; --b) {
      if (b % 64 == 63 && mag[b / 64] == 0) {
        b -= 63;
        continue;
      }
      sticky = bit(b) != 0;
    }
    if (guard && (sticky || (mant & 1))) ++mant;
    const double v = std::ldexp(static_cast<double>(mant), lsb_exp);
    if (v >= 0x1p128) return neg ? -INFINITY : INFINITY;
    const float r = static_cast<float>(v);  // exact
    return neg ? -r : r;
  }

 private:
  static constexpr int kLimbs = 12;
  static constexpr int kBase = -420;

  void add_shifted(std::uint64_t m, int pos, bool negative) {
    const int li = pos / 64, off = pos % 64;
    std::uint64_t part[2] = {m << off, off ? m >> (64 - off) : 0};
    if (!negative) {
      std::uint64_t carry = 0;
      for (int i = li; i < kLimbs; ++i) {
        const std::uint64_t add = (i - li < 2 ? part[i - li] : 0);
        const std::uint64_t s1 = w_[i] + add;
        const std::uint64_t c1 = s1 < add;
        const std::uint64_t s2 = s1 + carry;
        const std::uint64_t c2 = s2 < carry;
        w_[i] = s2;
        carry = c1 | c2;
        if (i - li >= 1 && !carry) break;
      }
    } else {
      std::uint64_t borrow = 0;
      for (int i = li; i < kLimbs; ++i) {
        const std::uint64_t sub = (i - li < 2 ? part[i - li] : 0);
        const std::uint64_t d1 = w_[i] - sub;
        const std::uint64_t b1 = w_[i] < sub;
        const std::uint64_t d2 = d1 - borrow;
        const std::uint64_t b2 = d1 < borrow;
        w_[i] = d2;
        borrow = b1 | b2;
        if (i - li >= 1 && !borrow) break;
      }
    }
  }

  std::uint64_t w_[kLimbs] = {};
};

bool all_finite(const double* a, const double* b, int k, float c) {
  if (!std::isfinite(c)) return false;
  for (int i = 0; i < k; ++i)
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return false;
  return true;
}

float ieee_fallback(const double* a, const double* b, int k, float c) {
  double s = c;
  for (int i = 0; i < k; ++i) s += a[i] * b[i];
  return static_cast<float>(s);
}

float dot_exact(const double* a, const double* b, int k, float c) {
  if (!all_finite(a, b, k, c)) return ieee_fallback(a, b, k, c);
  ExactAcc acc;
  for (int i = 0; i < k; ++i) acc.add(a[i] * b[i]);  // products of <= 24-bit significands: exact
  acc.add(c);
  return acc.round_to_float();
}

// A value as significand and exponent in its format: x = s * 2^e with
// 1 <= |s| < 2, or for subnormals e = the format's minimum exponent and
// |s| < 1; zero has s = 0, e = -999 (MMA-Sim's extract_significand_exponent).
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

// One cdna3 fused dot-add of a group (MMA-Sim amd_fused_dot_add with 24
// fractional bits): products as significand x significand at exponent
// ea + eb, each truncated toward zero to 24 fractional bits below the
// group's largest product exponent and summed exactly; then the group sum is
// floored to 31 and the accumulator to 24 fractional bits below the larger of
// the group's and the accumulator's exponents, added, and rounded once to
// fp32 (nearest-even). `min_exp` is the input format's minimum exponent.
float cdna3_group(const double* a, const double* b, int n, float c, int min_exp) {
  double fp64_sum = 0.0;
  for (int i = 0; i < n; ++i) fp64_sum += a[i] * b[i];
  fp64_sum += c;
  if (!std::isfinite(fp64_sum)) return static_cast<float>(fp64_sum);
  double sig[16];
  int ex[16];
  int m = 0;
  bool p_inf = false, n_inf = false;
  for (int i = 0; i < n; ++i) {
    const double p = a[i] * b[i];
    if (p >= 0x1p128) {
      p_inf = true;
    } else if (p <= -0x1p128) {
      n_inf = true;
    } else {
      const SigExp x = sig_exp(a[i], min_exp), y = sig_exp(b[i], min_exp);
      sig[m] = x.s * y.s;  // exact
      ex[m] = x.e + y.e;
      ++m;
    }
  }
  if (p_inf || n_inf) return p_inf && n_inf ? NAN : (p_inf ? INFINITY : -INFINITY);
  int max_e = INT_MIN;
  for (int i = 0; i < m; ++i) max_e = std::max(max_e, ex[i]);
  double s = 0.0;  // multiples of 2^-24 below 2^8: exact
  for (int i = 0; i < m; ++i) s += std::ldexp(std::trunc(std::ldexp(sig[i], 24 + ex[i] - max_e)), -24);
  const SigExp cc = sig_exp(c, -126);
  const int top = std::max(max_e, cc.e);
  s = std::ldexp(std::floor(std::ldexp(s, 31 + max_e - top)), -31);
  const double sc = std::ldexp(std::floor(std::ldexp(cc.s, 24 + cc.e - top)), -24);
  return static_cast<float>(std::ldexp(s + sc, top));  // exact until this one rounding
}

float dot_cdna3_grouped(const double* a, const double* b, int k, int group, float c, int min_exp) {
  float acc = c;
  for (int k0 = 0; k0 < k; k0 += group) acc = cdna3_group(a + k0, b + k0, std::min(group, k - k0), acc, min_exp);
  return acc;
}

float dot_fma_chain(const double* a, const double* b, int k, float c) {
  float acc = c;
  for (int i = 0; i < k; ++i) acc = std::fmaf(static_cast<float>(a[i]), static_cast<float>(b[i]), acc);
  return acc;
}

double tf32_trunc(double x) {
  const auto f = static_cast<float>(x);
  if (!std::isfinite(f)) return x;
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u &= 0xFFFFE000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

enum class In { bf16, f16, f32, xf32 };

template <In in>
constexpr int elems_per_lane() {
  return in == In::f32 ? 1 : in == In::xf32 ? 2 : 4;
}

template <In in>
double decode(const unsigned char* p, int e) {
  if constexpr (in == In::bf16 || in == In::f16) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * e, 2);
    return in == In::bf16 ? bf16_bits_to_fp32(h) : fp16_bits_to_fp32(h);
  } else {
    float f;
    std::memcpy(&f, p + 4 * e, 4);
    return f;
  }
}

template <In in, int MN, int K>
void exec_mfma(const WaveGroup& g, const char* name) {
  if (g.wave_size != 64) throw Error(std::string(name) + ": MFMA needs a 64-wide wave (emulated wave size is 32)");
  if (g.active != ~lane_mask{0}) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(g.active));
    throw Error(std::string(name) + ": all 64 lanes must take part (active lanes " + buf + ")");
  }
  constexpr int kpe = elems_per_lane<in>();
  constexpr int nacc = MN == 32 ? 16 : 4;
  static_assert(64 / MN * kpe == K, "layout does not cover K");
  double A[MN][K], B[K][MN];  // B stored transposed-friendly below
  float C[MN][MN];
  for (int l = 0; l < 64; ++l) {
    const Lane* lane = g.lanes[l];
    const int ij = l % MN, kg = l / MN;
    for (int e = 0; e < kpe; ++e) {
      const int k = kg * kpe + e;
      A[ij][k] = decode<in>(lane->in, e);
      B[k][ij] = decode<in>(lane->in + 16, e);
    }
    for (int r = 0; r < nacc; ++r) {
      const int i = MN == 32 ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r;
      float c;
      std::memcpy(&c, lane->in + 32 + 4 * r, 4);
      C[i][ij] = c;
    }
  }
  const MfmaModel model = g.mfma;
  float D[MN][MN];
  for (int i = 0; i < MN; ++i) {
    for (int j = 0; j < MN; ++j) {
      double a[K], b[K];
      for (int k = 0; k < K; ++k) {
        a[k] = A[i][k];
        b[k] = B[k][j];
      }
      if (model == MfmaModel::exact) {
        D[i][j] = dot_exact(a, b, K, C[i][j]);
      } else if constexpr (in == In::f32) {
        D[i][j] = dot_fma_chain(a, b, K, C[i][j]);
      } else if constexpr (in == In::xf32) {
        for (int k = 0; k < K; ++k) {
          a[k] = tf32_trunc(a[k]);
          b[k] = tf32_trunc(b[k]);
        }
        D[i][j] = dot_cdna3_grouped(a, b, K, 4, C[i][j], -126);
      } else {
        D[i][j] = dot_cdna3_grouped(a, b, K, 8, C[i][j], in == In::f16 ? -14 : -126);
      }
    }
  }
  for (int l = 0; l < 64; ++l) {
    Lane* lane = g.lanes[l];
    const int j = l % MN;
    for (int r = 0; r < nacc; ++r) {
      const int i = MN == 32 ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r;
      std::memcpy(lane->out + 4 * r, &D[i][j], 4);
    }
  }
}

}  // namespace

void exec_mfma_32x32x8bf16_1k(const WaveGroup& g) { exec_mfma<In::bf16, 32, 8>(g, "mfma_32x32x8bf16_1k"); }
void exec_mfma_16x16x16bf16_1k(const WaveGroup& g) { exec_mfma<In::bf16, 16, 16>(g, "mfma_16x16x16bf16_1k"); }
void exec_mfma_32x32x8f16(const WaveGroup& g) { exec_mfma<In::f16, 32, 8>(g, "mfma_32x32x8f16"); }
void exec_mfma_16x16x16f16(const WaveGroup& g) { exec_mfma<In::f16, 16, 16>(g, "mfma_16x16x16f16"); }
void exec_mfma_32x32x2f32(const WaveGroup& g) { exec_mfma<In::f32, 32, 2>(g, "mfma_32x32x2f32"); }
void exec_mfma_16x16x4f32(const WaveGroup& g) { exec_mfma<In::f32, 16, 4>(g, "mfma_16x16x4f32"); }
void exec_mfma_32x32x4xf32(const WaveGroup& g) { exec_mfma<In::xf32, 32, 4>(g, "mfma_32x32x4xf32"); }
void exec_mfma_16x16x8xf32(const WaveGroup& g) { exec_mfma<In::xf32, 16, 8>(g, "mfma_16x16x8xf32"); }

}  // namespace kgate::rt::host::detail
