// Pieces the two GPU backends (hip_backend.hpp, cuda_backend.hpp) share
// because HIP and CUDA spell them the same way: integer atomics, the launch
// checks, the poison fill of fresh allocations. Included by those headers
// only, after they have included their runtime header and defined `check`.
#pragma once

#include <string>
#include <type_traits>

#include "kernels/runtime/common.hpp"

namespace kgate::rt {

// ===========================================================================
// 7. Atomics (global memory). Integers only: 32- and 64-bit. Each returns the
// old value.
namespace detail {
template <class T>
__device__ constexpr void check_atomic_type() {
  static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "atomics are defined for 32- and 64-bit integers");
}
// The native type the vendor atomics take for T.
template <class T>
using native_atomic_t = std::conditional_t<
    sizeof(T) == 4, std::conditional_t<std::is_signed_v<T>, int, unsigned int>,
    std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>>;
template <class T>
using native_atomic_bits_t = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
}  // namespace detail

#define KGATE_ATOMIC_BITS(fn, native)                                                             \
  template <class T>                                                                              \
  __device__ inline T atomic_##fn(T* p, T v) {                                                    \
    detail::check_atomic_type<T>();                                                               \
    using N = detail::native_atomic_bits_t<T>;                                                    \
    return static_cast<T>(native(reinterpret_cast<N*>(p), static_cast<N>(v)));                    \
  }
// min / max: native for 32-bit and unsigned 64-bit; signed 64-bit (HIP has
// no native form) is a compare-and-swap loop.
#define KGATE_ATOMIC_ORDERED(fn, native, better)                                                  \
  template <class T>                                                                              \
  __device__ inline T atomic_##fn(T* p, T v) {                                                    \
    detail::check_atomic_type<T>();                                                               \
    if constexpr (sizeof(T) == 8 && std::is_signed_v<T>) {                                        \
      auto* a = reinterpret_cast<unsigned long long*>(p);                                         \
      unsigned long long old = *a, assumed;                                                       \
      do {                                                                                        \
        assumed = old;                                                                            \
        const T cur = static_cast<T>(assumed);                                                    \
        if (!(v better cur)) break;                                                               \
        old = atomicCAS(a, assumed, static_cast<unsigned long long>(v));                          \
      } while (old != assumed);                                                                   \
      return static_cast<T>(old);                                                                 \
    } else {                                                                                      \
      using N = detail::native_atomic_t<T>;                                                       \
      return static_cast<T>(native(reinterpret_cast<N*>(p), static_cast<N>(v)));                  \
    }                                                                                             \
  }
KGATE_ATOMIC_BITS(add, atomicAdd)
KGATE_ATOMIC_BITS(and, atomicAnd)
KGATE_ATOMIC_BITS(or, atomicOr)
KGATE_ATOMIC_BITS(xor, atomicXor)
KGATE_ATOMIC_BITS(exch, atomicExch)
KGATE_ATOMIC_ORDERED(min, atomicMin, <)
KGATE_ATOMIC_ORDERED(max, atomicMax, >)
#undef KGATE_ATOMIC_BITS
#undef KGATE_ATOMIC_ORDERED

template <class T>
__device__ inline T atomic_sub(T* p, T v) {
  return atomic_add(p, static_cast<T>(T{0} - v));  // two's complement
}
// Compare-and-swap: stores desired iff *p == expected; returns the old value.
template <class T>
__device__ inline T atomic_cas(T* p, T expected, T desired) {
  detail::check_atomic_type<T>();
  using N = detail::native_atomic_bits_t<T>;
  return static_cast<T>(atomicCAS(reinterpret_cast<N*>(p), static_cast<N>(expected), static_cast<N>(desired)));
}
// Floating-point atomic add: order-dependent rounding. Exists only so the
// determinism tests can build a negative control; production kernels must
// not use it (determinism/ audits for it).
__device__ inline float atomic_add_unordered(float* p, float v) { return atomicAdd(p, v); }

namespace detail {

// 9. Memory, cache hints: a value of trivially copyable T moved as 16-, 8- or
// 4-byte pieces (the widest its size and alignment allow) through the
// backend's hinted accesses Hint::load / Hint::store, each overloaded for
// Hint::P16, P8 and P4. Other sizes use a plain access.
template <class Hint, class P, class T>
__device__ inline T load_pieces(const T* p) {
  constexpr int n = sizeof(T) / sizeof(P);
  P part[n];
  const P* src = reinterpret_cast<const P*>(p);
  for (int i = 0; i < n; ++i) part[i] = Hint::load(src + i);
  T v;
  __builtin_memcpy(&v, part, sizeof(T));
  return v;
}
template <class Hint, class P, class T>
__device__ inline void store_pieces(T* p, const T& v) {
  constexpr int n = sizeof(T) / sizeof(P);
  P part[n];
  __builtin_memcpy(part, &v, sizeof(T));
  P* dst = reinterpret_cast<P*>(p);
  for (int i = 0; i < n; ++i) Hint::store(dst + i, part[i]);
}
template <class P, class T>
inline constexpr bool fits_pieces = sizeof(T) % sizeof(P) == 0 && alignof(T) >= sizeof(P);

template <class Hint, class T>
__device__ inline T hinted_load(const T* p) {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (fits_pieces<typename Hint::P16, T>) return load_pieces<Hint, typename Hint::P16>(p);
  else if constexpr (fits_pieces<typename Hint::P8, T>) return load_pieces<Hint, typename Hint::P8>(p);
  else if constexpr (fits_pieces<typename Hint::P4, T>) return load_pieces<Hint, typename Hint::P4>(p);
  else return *p;
}
template <class Hint, class T>
__device__ inline void hinted_store(T* p, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (fits_pieces<typename Hint::P16, T>) store_pieces<Hint, typename Hint::P16>(p, v);
  else if constexpr (fits_pieces<typename Hint::P8, T>) store_pieces<Hint, typename Hint::P8>(p, v);
  else if constexpr (fits_pieces<typename Hint::P4, T>) store_pieces<Hint, typename Hint::P4>(p, v);
  else *p = v;
}

// The backend's read-once hint (section 9 of its header): P16, P8, P4 and
// load / store for each.
struct OnceHint;
// Plain accesses through the same piece types (a struct copy can compile to
// one access per member).
template <class H>
struct WideOf {
  using P16 = typename H::P16;
  using P8 = typename H::P8;
  using P4 = typename H::P4;
  template <class P>
  __device__ static P load(const P* p) { return *p; }
  template <class P>
  __device__ static void store(P* p, P v) { *p = v; }
};

}  // namespace detail

// T moved as its widest aligned pieces (plain), or with the read-once hint.
template <class T>
__device__ inline T load_wide(const T* p) { return detail::hinted_load<detail::WideOf<detail::OnceHint>>(p); }
template <class T>
__device__ inline void store_wide(T* p, const T& v) { detail::hinted_store<detail::WideOf<detail::OnceHint>>(p, v); }
template <class T>
__device__ inline T load_once(const T* p) { return detail::hinted_load<detail::OnceHint>(p); }
template <class T>
__device__ inline void store_once(T* p, const T& v) { detail::hinted_store<detail::OnceHint>(p, v); }

namespace detail {

// Fresh device memory holds the host backend's poison pattern (0x7FA5
// repeated) on every backend, so an unwritten output reads the same.
template <int = 0>
__global__ void poison_fill(unsigned short* p, unsigned long long n) {
  const unsigned long long i =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 0x7FA5;
}

// The launch checks every backend applies (the gfx942 limits).
inline void check_launch(const char* name, const dim3& grid, const dim3& block, std::size_t lds) {
  const std::string prefix = std::string("launch of kernel '") + name + "'";
  if (block.count() == 0 || grid.count() == 0) throw Error(prefix + ": empty grid or block");
  if (block.count() > max_workgroup_size || block.z > 64)
    throw Error(prefix + ": block has " + std::to_string(block.count()) +
                " work-items; gfx942 allows at most 1024 (z at most 64)");
  if (lds > max_lds_bytes)
    throw Error(prefix + ": dynamic LDS of " + std::to_string(lds) + " bytes exceeds the gfx942 limit of " +
                std::to_string(max_lds_bytes));
  LaunchTrace::note(name, grid, block, lds);
}

}  // namespace detail
}  // namespace kgate::rt
