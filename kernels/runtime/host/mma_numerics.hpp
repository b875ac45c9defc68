// The numeric models of the matrix cores, as scalar functions: one output
// element of one instruction (a dot product of K operand pairs plus the
// accumulator). The host emulator (host/mfma.cpp) calls them for every
// output element; the CUDA conformance driver links them to compare an sm_90
// GPU with the model bit for bit. No dependency on the emulator.
//
// Models (rt::MfmaModel):
//   exact  every product exact, the K-sum and C added exactly, one
//          round-to-nearest-even to fp32. Non-finite inputs: the IEEE fp64
//          sum, converted to fp32.
//   cdna3  the gfx942 matrix cores (MMA-Sim's amd_fused_dot_add, arXiv
//          2511.10909). bf16/f16: groups of 8 products in increasing k (a
//          K=16 instruction is two groups in sequence, fp32 between); in a
//          group each product is taken as significand x significand at
//          exponent ea + eb (not renormalised; subnormal inputs at the
//          format's minimum exponent), cut toward zero at 24 fractional bits
//          below the group's largest product exponent and summed exactly; the
//          group sum is floored to 31 and C to 24 fractional bits below the
//          larger of that exponent and C's, the two are added and rounded once
//          to fp32 (nearest-even). xf32: inputs truncated to tf32, groups of
//          4. f32: fmaf chained in increasing k. Subnormals are kept. A finite
//          product of 2^128 or more is +-Inf (NaN for both signs); such an
//          Inf or NaN of a group stays through the next (NaN where an Inf
//          product of the other sign meets it). Non-finite inputs: the IEEE
//          result of the sum (Inf * 0, Inf - Inf, NaN: NaN).
//   sm90   the Hopper mma.sync tensor cores (MMA-Sim's nv_fused_dot_add with
//          25 fractional bits): the K products (significand x significand at
//          exponent ea + eb, not renormalised) and C (at its own exponent)
//          are aligned together to the largest exponent among the non-zero
//          terms, each cut toward zero at 25 fractional bits below it, summed
//          exactly, and the sum is normalised and cut toward zero to fp32 once
//          per instruction (subnormal results kept; a result cut to zero is
//          +0, never -0). The special cases are in the runtime README ("sm90
//          numerics"), each with the device case that shows it.
// NaN results are the quiet NaN 0x7FC00000 (exact, cdna3) and 0x7FFFFFFF
// (sm90).
#pragma once

#include <cstdint>

#include "kernels/runtime/common.hpp"  // MfmaModel, MmaType; reference/dtype.hpp: bit_cast

namespace kgate::rt::numerics {

// A decoded operand: value = m * 2^(e - F) for the format's F fraction bits
// (m signed, the hidden bit included; subnormals at the minimum exponent;
// m == 0 for zeros). `cls`: 0 finite, 1 infinite (sign in m), 2 NaN.
struct Operand {
  std::int32_t m;
  std::int32_t e;
  std::int32_t cls;
};

// Fraction bits of the operand formats (tf32: xf32's operands).
inline constexpr int kFracBf16 = 7, kFracF16 = 10, kFracTf32 = 10, kFracF32 = 23;

namespace detail {
inline constexpr std::int32_t kZeroExp = -100000;  // the exponent of a zero operand: below every real one

// A finite operand's significand and exponent, branch-free (loops over
// operands vectorise); returns whether `bits` is an Inf or NaN instead (m and
// e are then meaningless).
template <int ExpBits, int F>
inline bool decode_ieee_finite(std::uint32_t bits, std::int32_t& m, std::int32_t& e) {
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  const std::uint32_t frac = bits & ((1u << F) - 1u);
  const std::uint32_t ef = (bits >> F) & ((1u << ExpBits) - 1u);
  const bool neg = (bits >> (F + ExpBits)) & 1u;
  const auto mag = static_cast<std::int32_t>(ef == 0 ? frac : frac | (1u << F));
  m = neg ? -mag : mag;
  e = ef == 0 ? (frac ? 1 - bias : kZeroExp) : static_cast<std::int32_t>(ef) - bias;
  return ef == (1u << ExpBits) - 1u;
}

template <int ExpBits, int F>
inline Operand decode_ieee(std::uint32_t bits) {
  Operand o{0, 0, 0};
  if (decode_ieee_finite<ExpBits, F>(bits, o.m, o.e)) {
    const bool neg = (bits >> (F + ExpBits)) & 1u;
    return Operand{neg ? -1 : 1, 0, (bits & ((1u << F) - 1u)) ? 2 : 1};
  }
  return o;
}
}  // namespace detail

inline Operand decode_bf16(std::uint16_t bits) { return detail::decode_ieee<8, kFracBf16>(bits); }
inline Operand decode_f16(std::uint16_t bits) { return detail::decode_ieee<5, kFracF16>(bits); }
inline Operand decode_f32(float f) { return detail::decode_ieee<8, kFracF32>(kgate::bit_cast<std::uint32_t>(f)); }
// Truncated to tf32 first; Inf and NaN as they are.
inline Operand decode_tf32(float f) {
  const auto u = kgate::bit_cast<std::uint32_t>(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return decode_f32(f);
  return detail::decode_ieee<8, kFracTf32>(((u >> 31) << 18) | ((u >> 13) & 0x3ffffu));
}

// The intermediate terms of one sm90 instruction (for mismatch reports).
struct Sm90Terms {
  int k = 0;                 // products
  int max_exp = 0;           // the alignment exponent E
  std::int64_t product[16];  // each product, cut: units of 2^(E-25)
  std::int64_t c = 0;        // C, cut
  std::int64_t sum = 0;      // their exact sum
  bool special = false;      // a non-finite input decided the result
};

// One output element: D = sum_k a[k] * b[k] + c, operands decoded with F
// fraction bits. cdna3_dot covers bf16/f16/xf32 (group = 8 or 4); sm90_dot
// bf16/f16 (k <= 16).
float cdna3_dot(const Operand* a, const Operand* b, int k, int group, int F, float c);
float sm90_dot(const Operand* a, const Operand* b, int k, int F, float c, Sm90Terms* terms = nullptr);
float exact_dot(const Operand* a, const Operand* b, int k, int F, float c);
// cdna3 f32: fmaf chained in increasing k.
float fma_chain(const float* a, const float* b, int k, float c);

// ---------------------------------------------------------------------------
// The finite fast paths, inline so that the emulator's loops (host/mfma.cpp)
// get constant trip counts. Operands as separate significand and exponent
// arrays; every operand and C finite (the callers check). The scalar
// functions above use the same code.
namespace detail {

inline constexpr std::int32_t kNoExp = -200000;  // the exponent of a zero product

// x * 2^(base - d) cut toward zero (base, d >= 0), branch-free: the
// alignment distance d is data, and a branch on it mispredicts.
inline std::int64_t align_trunc(std::int64_t x, int base, int d) {
  const std::int64_t mag = (x < 0 ? -x : x) << base;
  const std::int64_t t = mag >> (d < 63 ? d : 63);
  return x < 0 ? -t : t;
}

// sm90: sum_k a*b + c (c = cm * 2^(ce - 23), cm == 0 for a zero), cut
// toward zero to fp32. Returns the exact sum s in units of 2^(*emax - 25).
template <int K, int F>
inline std::int64_t sm90_sum(const std::int32_t* am, const std::int32_t* ae, const std::int32_t* bm,
                             const std::int32_t* be, std::int32_t cm, std::int32_t ce, std::int32_t* emax_out,
                             Sm90Terms* terms = nullptr) {
  std::int32_t p[K], pe[K];
  std::int32_t emax = cm != 0 ? ce : kNoExp;
  for (int i = 0; i < K; ++i) {
    p[i] = am[i] * bm[i];  // <= 22 bits
    pe[i] = p[i] != 0 ? ae[i] + be[i] : kNoExp;
    emax = pe[i] > emax ? pe[i] : emax;
  }
  const std::int64_t ct = cm != 0 ? align_trunc(cm, 25 - 23, emax - ce) : 0;
  std::int64_t s = ct;
  for (int i = 0; i < K; ++i) s += align_trunc(p[i], 25 - 2 * F, emax - pe[i]);
  if (terms) {
    for (int i = 0; i < K; ++i) terms->product[i] = align_trunc(p[i], 25 - 2 * F, emax - pe[i]);
    terms->max_exp = emax;
    terms->c = ct;
    terms->sum = s;
  }
  *emax_out = emax;
  return s;
}

// s * 2^(e - 25), normalised and cut toward zero to fp32 (s * 2^(e-25) is
// exact in a double; subnormal results kept; below 2^-149: +0; 2^128 and
// beyond: Inf).
inline float sm90_round(std::int64_t s, std::int32_t e) {
  const auto scale = kgate::bit_cast<double>(static_cast<std::uint64_t>(e - 25 + 1023) << 52);  // 2^(e-25)
  const auto u = kgate::bit_cast<std::uint64_t>(static_cast<double>(s) * scale);
  const std::uint32_t sign = static_cast<std::uint32_t>(u >> 63) << 31;
  const int ed = static_cast<int>((u >> 52) & 0x7ff) - 1023;
  const std::uint64_t mant = (u & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  if (ed >= 128) return kgate::bit_cast<float>(sign | 0x7f800000u);
  if (ed >= -126)
    return kgate::bit_cast<float>(sign | static_cast<std::uint32_t>(ed + 127) << 23 |
                                  static_cast<std::uint32_t>((mant >> 29) & 0x7fffffu));
  // Subnormal: units of 2^-149. A sum cut to zero is +0 whatever its sign
  // (sm_90's mma.sync never returns -0; runtime README, "sm90 numerics").
  const int sh = 52 - (ed + 149);
  const auto m = static_cast<std::uint32_t>(sh >= 64 ? 0 : mant >> sh);
  return kgate::bit_cast<float>(m != 0 ? sign | m : 0u);
}

// align_trunc in 32 bits, for x * 2^base below 2^31 (base, d >= 0).
inline std::int32_t align_trunc32(std::int32_t x, int base, int d) {
  const std::int32_t t = ((x < 0 ? -x : x) << base) >> (d < 31 ? d : 31);
  return x < 0 ? -t : t;
}

// x * 2^sh rounded toward minus infinity, branch-free (both shifts computed,
// each distance clamped to [0, 63]; |x| * 2^sh below 2^63 where sh > 0).
inline std::int64_t shift_floor(std::int64_t x, int sh) {
  const int l = sh > 0 ? (sh < 63 ? sh : 63) : 0, r = sh < 0 ? (-sh < 63 ? -sh : 63) : 0;
  return sh >= 0 ? static_cast<std::int64_t>(static_cast<std::uint64_t>(x) << l) : x >> r;
}

// One cdna3 group of N products and the accumulator for J outputs that
// share the A operands (one row of an instruction's tile): output j takes
// b[k] = bm[k * J + j] (B stored k-major, so the loops over j vectorise) and
// acc[j] in and out. Every input finite. The scalar cdna3_group is J = 1.
// Widths: a product's significand has at most 2F + 2 bits, cut at 24 - 2F
// fractional bits it has at most 26, so a group's sum of N <= 16 fits in 32
// bits (twice the lanes of 64-bit sums); the sum with C is exact in 64.
template <int N, int F, int J>
inline void cdna3_group_cols(const std::int32_t* am, const std::int32_t* ae, const std::int32_t* bm,
                             const std::int32_t* be, float* acc) {
  static_assert(N <= 16 && 2 * F + 2 + (24 - 2 * F) <= 26, "a group's cut sum must fit in 32 bits");
  std::int32_t p[N][J], pe[N][J], emax[J];
  for (int j = 0; j < J; ++j) emax[j] = kNoExp;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < J; ++j) {
      // Branch-free (the loop over j vectorises): kNoExp where the product is 0.
      const std::int32_t prod = am[i] * bm[i * J + j];
      const std::int32_t nz = -static_cast<std::int32_t>(prod != 0);
      const std::int32_t e = ((ae[i] + be[i * J + j]) & nz) | (kNoExp & ~nz);
      p[i][j] = prod;
      pe[i][j] = e;
      emax[j] = e > emax[j] ? e : emax[j];
    }
  std::int32_t s[J];
  for (int j = 0; j < J; ++j) s[j] = 0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < J; ++j) s[j] += align_trunc32(p[i][j], 24 - 2 * F, emax[j] - pe[i][j]);
  // C decoded and added, branch-free over j: top = the larger of the group's
  // exponent and C's (a non-zero C); total in units of 2^(top - 31), the
  // group sum floored at 31 bits and C at 24.
  std::int64_t total[J];
  std::int32_t top[J];
  bool c_special[J];
  for (int j = 0; j < J; ++j) {
    std::int32_t cm, ce;
    c_special[j] = decode_ieee_finite<8, kFracF32>(kgate::bit_cast<std::uint32_t>(acc[j]), cm, ce);
    const bool cnz = cm != 0;
    const std::int32_t t = cnz && ce > emax[j] ? ce : emax[j];
    const std::int64_t cpart = shift_floor(cm, cnz ? 1 - (t - ce) : 0) * 128;
    total[j] = shift_floor(s[j], 7 - (t - emax[j])) + (cnz ? cpart : 0);
    top[j] = t;
  }
  for (int j = 0; j < J; ++j) {
    bool p_inf = false, n_inf = false;
    if (emax[j] >= 126 - 2 * F) {  // a product may reach 2^128 (bf16, tf32 only): +-Inf, NaN for both signs
      for (int i = 0; i < N; ++i) {
        if (p[i][j] == 0) continue;
        const auto m = static_cast<std::uint32_t>(p[i][j] < 0 ? -p[i][j] : p[i][j]);
        if (31 - __builtin_clz(m) + pe[i][j] - 2 * F >= 128) (p[i][j] > 0 ? p_inf : n_inf) = true;
      }
    }
    // A non-finite C is an earlier group's overflow (the callers send
    // non-finite inputs to the general path): it stays, NaN where an Inf
    // product of the other sign meets it.
    if (c_special[j]) {
      const auto cb = kgate::bit_cast<std::uint32_t>(acc[j]);
      const bool c_nan = (cb & 0x7fffffu) != 0, c_neg = cb >> 31;
      if (c_nan || (c_neg ? p_inf : n_inf)) acc[j] = kgate::bit_cast<float>(0x7FC00000u);
      continue;
    }
    if (p_inf || n_inf) {
      acc[j] = kgate::bit_cast<float>(p_inf && n_inf ? 0x7FC00000u : p_inf ? 0x7f800000u : 0xff800000u);
      continue;
    }
    if (emax[j] == kNoExp) {  // no product: D = C (a zero C gives +0)
      acc[j] = acc[j] == 0.0f ? 0.0f : acc[j];
      continue;
    }
    // Exact in a double; one round-to-nearest-even to fp32.
    const auto scale = kgate::bit_cast<double>(static_cast<std::uint64_t>(top[j] - 31 + 1023) << 52);
    acc[j] = static_cast<float>(static_cast<double>(total[j]) * scale);
  }
}

// One cdna3 group of N products and the accumulator c (every input finite).
template <int N, int F>
inline float cdna3_group(const std::int32_t* am, const std::int32_t* ae, const std::int32_t* bm, const std::int32_t* be,
                         float c) {
  cdna3_group_cols<N, F, 1>(am, ae, bm, be, &c);
  return c;
}

}  // namespace detail

template <int K, int F>
inline float sm90_finite(const std::int32_t* am, const std::int32_t* ae, const std::int32_t* bm, const std::int32_t* be,
                         const Operand& c) {
  std::int32_t emax;
  const std::int64_t s = detail::sm90_sum<K, F>(am, ae, bm, be, c.m, c.e, &emax);
  return s == 0 ? 0.0f : detail::sm90_round(s, emax);
}

// Convenience for raw bit patterns (tests, the CUDA driver): k bf16 or f16
// values each.
float dot_bits(MfmaModel model, MmaType type, const std::uint16_t* a, const std::uint16_t* b, int k, float c,
               Sm90Terms* terms = nullptr);

}  // namespace kgate::rt::numerics
