// The matrix-core numeric models (contract: mma_numerics.hpp). cdna3 and
// sm90 work on integers: a bf16/f16/tf32 product is an exact integer
// significand product at exponent ea + eb, so alignment, truncation and the
// exact sum are shifts and 64-bit additions, and the final rounding is one
// conversion of an exact double.
#include "kernels/runtime/host/mma_numerics.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace kgate::rt::numerics {

namespace {

using detail::align_trunc;
using detail::kNoExp;

float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// The IEEE class of sum_k a[k] * b[k] + c when some input is not finite:
// NaN for a NaN, Inf * 0, or Infs of both signs; else the Inf's sign.
// Returns 0 for NaN, +1 / -1 for +-Inf.
int special_class(const Operand* a, const Operand* b, int k, const Operand& c) {
  bool pos = false, neg = false;
  auto note = [&](int sign) { (sign > 0 ? pos : neg) = true; };
  if (c.cls == 2) return 0;
  if (c.cls == 1) note(c.m);
  for (int i = 0; i < k; ++i) {
    if (a[i].cls == 2 || b[i].cls == 2) return 0;
    if (a[i].cls == 1 || b[i].cls == 1) {
      if (a[i].m == 0 || b[i].m == 0) return 0;  // Inf * 0
      note((a[i].m > 0) == (b[i].m > 0) ? 1 : -1);
    }
  }
  return pos && neg ? 0 : (pos ? 1 : -1);
}

bool any_special(const Operand* a, const Operand* b, int k, const Operand& c) {
  std::int32_t s = c.cls;
  for (int i = 0; i < k; ++i) s |= a[i].cls | b[i].cls;
  return s != 0;
}

constexpr float kInf = INFINITY;

}  // namespace

namespace detail {

}  // namespace detail

namespace {
// Operands as significand and exponent arrays.
struct Soa {
  std::int32_t m[72] = {}, e[72] = {};
  Soa(const Operand* x, int k) {
    for (int i = 0; i < k && i < 64; ++i) {
      m[i] = x[i].m;
      e[i] = x[i].e;
    }
  }
};
}  // namespace

float cdna3_dot(const Operand* a, const Operand* b, int k, int group, int F, float c) {
  const Operand cc = decode_f32(c);
  if (any_special(a, b, k, cc)) {
    const int cls = special_class(a, b, k, cc);
    return cls == 0 ? float_of(0x7FC00000u) : (cls > 0 ? kInf : -kInf);
  }
  // Zero operands past k add nothing: the last group is padded.
  const Soa sa(a, k), sb(b, k);
  float acc = c;
  for (int k0 = 0; k0 < k; k0 += group) {
    if (group == 4)
      acc = detail::cdna3_group<4, kFracTf32>(sa.m + k0, sa.e + k0, sb.m + k0, sb.e + k0, acc);
    else if (F == kFracBf16)
      acc = detail::cdna3_group<8, kFracBf16>(sa.m + k0, sa.e + k0, sb.m + k0, sb.e + k0, acc);
    else
      acc = detail::cdna3_group<8, kFracF16>(sa.m + k0, sa.e + k0, sb.m + k0, sb.e + k0, acc);
  }
  return acc;
}

float sm90_dot(const Operand* a, const Operand* b, int k, int F, float c, Sm90Terms* terms) {
  const Operand cc = decode_f32(c);
  if (terms) {
    terms->k = k;
    terms->special = false;
  }
  if (any_special(a, b, k, cc)) {
    if (terms) terms->special = true;
    const int cls = special_class(a, b, k, cc);
    return cls == 0 ? float_of(0x7FFFFFFFu) : (cls > 0 ? kInf : -kInf);
  }
  // Zero operands past k add nothing: pad to the instruction's 8 or 16.
  const Soa sa(a, k), sb(b, k);
  std::int32_t emax = 0;
  std::int64_t s;
  if (F == kFracBf16)
    s = k <= 8 ? detail::sm90_sum<8, kFracBf16>(sa.m, sa.e, sb.m, sb.e, cc.m, cc.e, &emax, terms)
               : detail::sm90_sum<16, kFracBf16>(sa.m, sa.e, sb.m, sb.e, cc.m, cc.e, &emax, terms);
  else
    s = k <= 8 ? detail::sm90_sum<8, kFracF16>(sa.m, sa.e, sb.m, sb.e, cc.m, cc.e, &emax, terms)
               : detail::sm90_sum<16, kFracF16>(sa.m, sa.e, sb.m, sb.e, cc.m, cc.e, &emax, terms);
  if (terms) terms->k = k <= 8 ? 8 : 16;
  return s == 0 ? 0.0f : detail::sm90_round(s, emax);
}

namespace {

// An exact fixed-point accumulator for the exact model: bit b has weight
// 2^(b + kBase), two's complement over kLimbs*64 bits.
class ExactAcc {
 public:
  void add(double x) {
    if (x == 0.0) return;
    int e = 0;
    const double f = std::frexp(std::fabs(x), &e);  // x = f * 2^e, f in [0.5, 1)
    const auto m = static_cast<std::uint64_t>(std::ldexp(f, 53));
    add_shifted(m, e - 53 - kBase, x < 0);
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
    const std::uint64_t part[2] = {m << off, off ? m >> (64 - off) : 0};
    std::uint64_t carry = 0;
    for (int i = li; i < kLimbs; ++i) {
      const std::uint64_t v = (i - li < 2 ? part[i - li] : 0);
      if (!negative) {
        const std::uint64_t s1 = w_[i] + v;
        const std::uint64_t c1 = s1 < v;
        const std::uint64_t s2 = s1 + carry;
        carry = c1 | (s2 < carry);
        w_[i] = s2;
      } else {
        const std::uint64_t d1 = w_[i] - v;
        const std::uint64_t b1 = w_[i] < v;
        const std::uint64_t d2 = d1 - carry;
        carry = b1 | (d1 < carry);
        w_[i] = d2;
      }
      if (i - li >= 1 && !carry) break;
    }
  }

  std::uint64_t w_[kLimbs] = {};
};

double value_of(const Operand& x, int F) {
  if (x.cls == 2) return NAN;
  if (x.cls == 1) return x.m > 0 ? INFINITY : -INFINITY;
  return std::ldexp(static_cast<double>(x.m), x.e - F);
}

}  // namespace

float exact_dot(const Operand* a, const Operand* b, int k, int F, float c) {
  const Operand cc = decode_f32(c);
  if (any_special(a, b, k, cc)) {
    const int cls = special_class(a, b, k, cc);
    return cls == 0 ? float_of(0x7FC00000u) : (cls > 0 ? kInf : -kInf);
  }
  ExactAcc acc;
  for (int i = 0; i < k; ++i) acc.add(value_of(a[i], F) * value_of(b[i], F));  // <= 48-bit products: exact
  acc.add(c);
  return acc.round_to_float();
}

float fma_chain(const float* a, const float* b, int k, float c) {
  float acc = c;
  for (int i = 0; i < k; ++i) acc = std::fmaf(a[i], b[i], acc);
  return acc != acc ? float_of(0x7FC00000u) : acc;
}

float dot_bits(MfmaModel model, MmaType type, const std::uint16_t* a, const std::uint16_t* b, int k, float c,
               Sm90Terms* terms) {
  Operand da[64], db[64];
  const bool bf = type == MmaType::bf16;
  const int F = bf ? kFracBf16 : kFracF16;
  k = std::min(k, 64);
  for (int i = 0; i < k; ++i) {
    da[i] = bf ? decode_bf16(a[i]) : decode_f16(a[i]);
    db[i] = bf ? decode_bf16(b[i]) : decode_f16(b[i]);
  }
  switch (model) {
    case MfmaModel::exact: return exact_dot(da, db, k, F, c);
    case MfmaModel::cdna3: return cdna3_dot(da, db, k, 8, F, c);
    case MfmaModel::sm90: return sm90_dot(da, db, std::min(k, 16), F, c, terms);
  }
  return c;
}

}  // namespace kgate::rt::numerics
