// Element helpers every kernel shares: dtype conversions to and from the fp32
// accumulator, and packs of V elements loaded or stored in one wide access.
// One source for every backend (kernels/runtime/runtime.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels {

KGATE_DEVICE float to_f32(float v) { return v; }
KGATE_DEVICE float to_f32(kgate::bf16 v) { return v.to_float(); }
KGATE_DEVICE float to_f32(kgate::fp16 v) { return v.to_float(); }
template <class T> KGATE_DEVICE T from_f32(float v);
template <> KGATE_DEVICE float from_f32<float>(float v) { return v; }
template <> KGATE_DEVICE kgate::bf16 from_f32<kgate::bf16>(float v) { return kgate::bf16::from_float(v); }
template <> KGATE_DEVICE kgate::fp16 from_f32<kgate::fp16>(float v) { return kgate::fp16::from_float(v); }

// V elements loaded at once (one 16-byte access for V = 8 bf16).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The V elements of a pack as fp32, into a work-item's V registers (an
// rt::regs<float, V> or a float[V]). bf16 pairs are widened from their 32-bit
// word (element 2k is the low half: every target is little-endian), one
// integer operation per element.
template <class T, int V, class Regs>
KGATE_DEVICE void unpack_f32(const Pack<T, V>& pk, Regs& out) {
  if constexpr (std::is_same_v<T, kgate::bf16> && V % 2 == 0) {
    const auto w = kgate::bit_cast<Pack<std::uint32_t, V / 2>>(pk);
KGATE_UNROLL
    for (int k = 0; k < V / 2; ++k) {
      out[2 * k] = kgate::bit_cast<float>(w.v[k] << 16);
      out[2 * k + 1] = kgate::bit_cast<float>(w.v[k] & 0xffff0000u);
    }
  } else {
KGATE_UNROLL
    for (int i = 0; i < V; ++i) out[i] = to_f32(pk.v[i]);
  }
}

template <class T, int V, class Regs>
KGATE_DEVICE void load_f32(const T* p, Regs& out) {
  unpack_f32<T, V>(rt::load_wide(reinterpret_cast<const Pack<T, V>*>(p)), out);
}

template <class T, int V, class Regs>
KGATE_DEVICE void store_f32(T* p, const Regs& in) {
  Pack<T, V> pk;
  for (int i = 0; i < V; ++i) pk.v[i] = from_f32<T>(in[i]);
  rt::store_wide(reinterpret_cast<Pack<T, V>*>(p), pk);
}

}  // namespace kgate::kernels
