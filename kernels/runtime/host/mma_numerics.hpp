// The numeric models of the matrix cores, as scalar functions: one output
// element of one instruction (a dot product of K operand pairs plus the
// accumulator). The host emulator (host/mfma.cpp) calls them for every
// output element; the CUDA conformance driver links them to compare the H200
// with the model bit for bit. No dependency on the emulator.
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
//          product of 2^128 or more is +-Inf (NaN for both signs). Non-finite
//          inputs: the IEEE result of the sum (Inf * 0, Inf - Inf, NaN: NaN).
//   sm90   the Hopper mma.sync tensor cores (MMA-Sim's nv_fused_dot_add with
//          25 fractional bits): the K products (significand x significand at
//          exponent ea + eb, not renormalised) and C (at its own exponent)
//          are aligned together to the largest exponent among the non-zero
//          terms, each cut toward zero at 25 fractional bits below it, summed
//          exactly, and the sum is normalised and cut toward zero to fp32 once
//          per instruction (subnormal results kept). The special cases are in
//          the runtime README ("sm90 numerics"), each with the H200 case that
//          settled it.
// NaN results are the quiet NaN 0x7FC00000 (exact, cdna3) and 0x7FFFFFFF
// (sm90).
#pragma once

#include <cstdint>

#include "kernels/runtime/common.hpp"

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

Operand decode_bf16(std::uint16_t bits);
Operand decode_f16(std::uint16_t bits);
Operand decode_tf32(float f);  // truncated to tf32 first
Operand decode_f32(float f);

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

// Convenience for raw bit patterns (tests, the CUDA driver): k bf16 or f16
// values each.
float dot_bits(MfmaModel model, MmaType type, const std::uint16_t* a, const std::uint16_t* b, int k, float c,
               Sm90Terms* terms = nullptr);

}  // namespace kgate::rt::numerics
