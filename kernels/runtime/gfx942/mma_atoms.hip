// Every gfx942 MMA atom through the kernel-facing API (rt::mma): fragments
// loaded from LDS by coordinate, the instruction, the accumulator stored by
// coordinate. The gfx942 gate checks that each atom compiles to its
// v_mfma instruction (EXPECT_ISA in kernels/CMakeLists.txt).
#include "kernels/runtime/runtime.hpp"

namespace rt = kgate::rt;
namespace mma = kgate::rt::mma;

namespace kgate::probe {

template <class Atom>
KGATE_KERNEL_BOUNDS(mma_atom, 64, const mma::operand_t<Atom>* a, const mma::operand_t<Atom>* b, float* d) {
  using T = mma::operand_t<Atom>;
  KGATE_LDS(as, T, Atom::M * Atom::K);
  KGATE_LDS(bs, T, Atom::K * Atom::N);
  const int t = static_cast<int>(rt::thread_idx().x);
  for (int e = t; e < Atom::M * Atom::K; e += 64) as[e] = a[e];
  for (int e = t; e < Atom::K * Atom::N; e += 64) bs[e] = b[e];
  rt::barrier();
  const auto af = mma::load_a<Atom>([&](int i, int k) { return as[i * Atom::K + k]; });
  const auto bf = mma::load_b<Atom>([&](int k, int j) { return bs[k * Atom::N + j]; });
  auto acc = mma::mma<Atom>(af, bf, mma::zero_c<Atom>());
  acc = mma::mma<Atom>(af, bf, acc);
  mma::visit_c<Atom>(acc, [&](int i, int j, float v) { d[i * Atom::N + j] = v; });
}

template __global__ void mma_atom<mma::gfx942_32x32x8_bf16>(const std::uint16_t*, const std::uint16_t*, float*);
template __global__ void mma_atom<mma::gfx942_16x16x16_bf16>(const std::uint16_t*, const std::uint16_t*, float*);
template __global__ void mma_atom<mma::gfx942_32x32x8_f16>(const std::uint16_t*, const std::uint16_t*, float*);
template __global__ void mma_atom<mma::gfx942_16x16x16_f16>(const std::uint16_t*, const std::uint16_t*, float*);
template __global__ void mma_atom<mma::gfx942_32x32x2_f32>(const float*, const float*, float*);
template __global__ void mma_atom<mma::gfx942_16x16x4_f32>(const float*, const float*, float*);
template __global__ void mma_atom<mma::gfx942_32x32x4_xf32>(const float*, const float*, float*);
template __global__ void mma_atom<mma::gfx942_16x16x8_xf32>(const float*, const float*, float*);

}  // namespace kgate::probe
