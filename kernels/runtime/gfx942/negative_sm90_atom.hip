// Negative control of the atom availability check: an sm90 atom in a HIP
// kernel must not compile for gfx942 (the gate expects the static_assert).
#include "kernels/runtime/runtime.hpp"

namespace mma = kgate::rt::mma;

KGATE_KERNEL_BOUNDS(uses_sm90_atom, 64, float* d) {
  using Atom = mma::sm90_m16n8k16_bf16;
  const auto a = mma::load_a<Atom>([](int, int) { return std::uint16_t{0}; });
  const auto b = mma::load_b<Atom>([](int, int) { return std::uint16_t{0}; });
  const auto c = mma::mma<Atom>(a, b, mma::zero_c<Atom>());
  d[0] = c[0];
}
