// Negative control of the atom availability check: a gfx942 atom in a CUDA
// kernel must not compile (the CTest expects the static_assert's message).
#include "kernels/runtime/runtime.hpp"

namespace mma = kgate::rt::mma;

KGATE_KERNEL(uses_gfx942_atom, float* d) {
  using Atom = mma::gfx942_32x32x8_bf16;
  const auto a = mma::load_a<Atom>([](int, int) { return std::uint16_t{0}; });
  const auto b = mma::load_b<Atom>([](int, int) { return std::uint16_t{0}; });
  const auto c = mma::mma<Atom>(a, b, mma::zero_c<Atom>());
  d[0] = c[0];
}
