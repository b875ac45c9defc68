// Element types and their conversions: the one definition of rounding in kgate.
//
// Contract: every conversion here is exactly IEEE 754 round-to-nearest-even,
// NaN stays NaN (a quiet NaN of the same sign; payloads are not preserved and
// NaNs are only ever compared by class), overflow goes to Inf, subnormals are
// kept. Conversions from fp64 round once (never through fp32). The header is
// usable from device code (HIP, CUDA) for the fp32 <-> bf16/fp16 paths.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "reference/host_device.hpp"

namespace kgate {

template <class To, class From>
KGATE_HD inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
#if defined(__CUDACC__) && !defined(__clang__)
  To to;  // nvcc: memcpy is a device function
  memcpy(&to, &from, sizeof(To));
  return to;
#else
  return __builtin_bit_cast(To, from);
#endif
}

// ---------------------------------------------------------------------------
// fp32 <-> bf16

KGATE_HD inline std::uint16_t fp32_to_bf16_bits(float f) {
  const std::uint32_t u = bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

KGATE_HD inline float bf16_bits_to_fp32(std::uint16_t h) {
  return bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// ---------------------------------------------------------------------------
// fp32 <-> fp16

// Branch-free (every case computed, one selected): on a GPU the unrolled
// conversions of a vector stay straight-line code.
KGATE_HD inline std::uint16_t fp32_to_fp16_bits(float f) {
  const std::uint32_t u = bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Normal in fp16 (a >= 2^-14): drop 13 bits, round to nearest even; the
  // carry may reach the exponent.
  const std::uint32_t hn0 = (a >> 13) - (112u << 10);
  const std::uint32_t rest_n = a & 0x1fffu;
  const std::uint32_t hn = hn0 + ((rest_n > 0x1000u || (rest_n == 0x1000u && (hn0 & 1u))) ? 1u : 0u);
  // Subnormal (2^-25 < a < 2^-14): value = m * 2^(e-150), quantum 2^-24,
  // shift 14..24 there (clamped so the other cases stay defined).
  const int e = static_cast<int>(a >> 23);
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const int sh = 126 - e < 1 ? 1 : (126 - e > 31 ? 31 : 126 - e);
  const std::uint32_t hs0 = m >> sh;
  const std::uint32_t rest_s = m & ((1u << sh) - 1u);
  const std::uint32_t half = 1u << (sh - 1);
  const std::uint32_t hs = hs0 + ((rest_s > half || (rest_s == half && (hs0 & 1u))) ? 1u : 0u);
  const std::uint32_t h = a > 0x7f800000u   ? 0x7e00u   // NaN
                          : a >= 0x477ff000u ? 0x7c00u  // >= 65520: Inf
                          : a >= 0x38800000u ? hn
                          : a <= 0x33000000u ? 0u  // <= 2^-25 (tie goes to even 0)
                                             : hs;
  return static_cast<std::uint16_t>(sign | h);
}

KGATE_HD inline float fp16_bits_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e != 0) return bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  // Zero or subnormal: m * 2^-24 is exact in fp32.
  const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
  return sign ? -v : v;
}

// ---------------------------------------------------------------------------
// Storage types. Plain 16-bit containers: arithmetic happens in fp32.

struct bf16 {
  std::uint16_t bits = 0;
  KGATE_HD static bf16 from_bits(std::uint16_t b) { bf16 r; r.bits = b; return r; }
  KGATE_HD static bf16 from_float(float f) { return from_bits(fp32_to_bf16_bits(f)); }
  KGATE_HD float to_float() const { return bf16_bits_to_fp32(bits); }
};

struct fp16 {
  std::uint16_t bits = 0;
  KGATE_HD static fp16 from_bits(std::uint16_t b) { fp16 r; r.bits = b; return r; }
  KGATE_HD static fp16 from_float(float f) { return from_bits(fp32_to_fp16_bits(f)); }
  KGATE_HD float to_float() const { return fp16_bits_to_fp32(bits); }
};

// ---------------------------------------------------------------------------
// fp64 -> narrow formats, rounded once.

// Rounds x to a binary format with `precision` significand bits (implicit bit
// included) and normal exponent range [emin, emax]; the result is returned as
// a double (exact). Uses rint, so the caller's rounding mode must be the
// default round-to-nearest-even.
inline double round_to_format(double x, int precision, int emin, int emax) {
  // Fast path, x a normal double whose exponent is in the target's normal
  // range: round the significand to `precision` bits to nearest even on the
  // bit pattern (a carry out of the significand steps the exponent, which is
  // the right result). The general path below gives the same value.
  std::uint64_t u = bit_cast<std::uint64_t>(x);
  const int biased = static_cast<int>((u >> 52) & 0x7ffu);
  if (biased != 0 && biased != 0x7ff && biased - 1023 >= emin) {
    const int drop = 53 - precision;
    const std::uint64_t lsb = (u >> drop) & 1u;
    u = (u + ((std::uint64_t{1} << (drop - 1)) - 1u + lsb)) & ~((std::uint64_t{1} << drop) - 1u);
    if (static_cast<int>((u >> 52) & 0x7ffu) - 1023 > emax) return std::copysign(INFINITY, x);
    return bit_cast<double>(u);
  }
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int e = std::ilogb(x);
  if (e < emin) e = emin;
  const double quantum = std::ldexp(1.0, e - (precision - 1));
  const double r = std::rint(x / quantum) * quantum;
  if (std::fabs(r) >= std::ldexp(1.0, emax + 1)) return std::copysign(INFINITY, x);
  return r;
}

inline std::uint16_t fp64_to_bf16_bits(double x) {
  if (std::isnan(x)) return static_cast<std::uint16_t>(std::signbit(x) ? 0xffc0u : 0x7fc0u);
  return fp32_to_bf16_bits(static_cast<float>(round_to_format(x, 8, -126, 127)));  // exact in fp32
}

inline std::uint16_t fp64_to_fp16_bits(double x) {
  if (std::isnan(x)) return static_cast<std::uint16_t>(std::signbit(x) ? 0xfe00u : 0x7e00u);
  return fp32_to_fp16_bits(static_cast<float>(round_to_format(x, 11, -14, 15)));  // exact in fp32
}

// ---------------------------------------------------------------------------
// The dtype as a value.

enum class DType : std::uint8_t { fp64, fp32, bf16, fp16 };

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::fp64: return 8;
    case DType::fp32: return 4;
    case DType::bf16: return 2;
    case DType::fp16: return 2;
  }
  return 0;
}

// Significand bits including the implicit bit.
constexpr int significand_bits(DType t) {
  switch (t) {
    case DType::fp64: return 53;
    case DType::fp32: return 24;
    case DType::bf16: return 8;
    case DType::fp16: return 11;
  }
  return 0;
}

// Unit roundoff u = 2^-p of round-to-nearest.
inline double unit_roundoff(DType t) { return std::ldexp(1.0, -significand_bits(t)); }

// Largest finite value of the dtype.
inline double largest_finite(DType t) {
  switch (t) {
    case DType::fp64: return 0x1.fffffffffffffp1023;
    case DType::fp32: return 0x1.fffffep127;
    case DType::bf16: return 0x1.fep127;
    case DType::fp16: return 65504.0;
  }
  return 0;
}

constexpr std::string_view name(DType t) {
  switch (t) {
    case DType::fp64: return "fp64";
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::fp64, DType::fp32, DType::bf16, DType::fp16})
    if (name(t) == s) return t;
  return std::nullopt;
}

// Loads element i of a buffer of dtype t as a double (exact for every dtype).
inline double load(DType t, const void* base, std::int64_t i) {
  const auto* p = static_cast<const unsigned char*>(base) + i * static_cast<std::int64_t>(size_of(t));
  switch (t) {
    case DType::fp64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::fp32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::bf16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_fp32(v); }
    case DType::fp16: { std::uint16_t v; std::memcpy(&v, p, 2); return fp16_bits_to_fp32(v); }
  }
  return NAN;
}

// Stores v into element i, rounded once to dtype t.
inline void store(DType t, void* base, std::int64_t i, double v) {
  auto* p = static_cast<unsigned char*>(base) + i * static_cast<std::int64_t>(size_of(t));
  switch (t) {
    case DType::fp64: std::memcpy(p, &v, 8); return;
    case DType::fp32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::bf16: { const std::uint16_t h = fp64_to_bf16_bits(v); std::memcpy(p, &h, 2); return; }
    case DType::fp16: { const std::uint16_t h = fp64_to_fp16_bits(v); std::memcpy(p, &h, 2); return; }
  }
}

// ---------------------------------------------------------------------------
// ULP distance: bits mapped to a monotone integer key; +0 and -0 are 0 apart.
// Defined for non-NaN values only (NaNs are compared by class elsewhere).

inline std::uint64_t ulp_distance(float a, float b) {
  auto key = [](float f) -> std::int64_t {
    const std::uint32_t u = bit_cast<std::uint32_t>(f);
    const std::uint32_t k = (u & 0x80000000u) ? ~u + 1u : (u | 0x80000000u);
    return static_cast<std::int64_t>(k);
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

inline std::uint64_t ulp_distance16(std::uint16_t a, std::uint16_t b) {
  auto key = [](std::uint16_t u) -> std::int64_t {
    const std::uint16_t k = (u & 0x8000u) ? static_cast<std::uint16_t>(~u + 1u) : static_cast<std::uint16_t>(u | 0x8000u);
    return static_cast<std::int64_t>(k);
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

}  // namespace kgate
