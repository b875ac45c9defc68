// The conformance kernel set: small kernels that exercise the runtime's
// barriers, LDS, wave shuffles and matrix-core path, written once for every
// backend. Each is deterministic by construction and independent of the wave
// size (shuffles use segments of 32 lanes), so its output is bit-identical on
// the host emulator (wave64), gfx942 (wave64) and CUDA (wave32).
#pragma once

#include "kernels/runtime/runtime.hpp"

namespace kgate::conformance {

namespace rt = kgate::rt;

inline constexpr unsigned kReduceBlock = 256;
inline constexpr unsigned kReducePerItem = 4;

// Block reduction with barriers: workgroup b sums x[b*1024, b*1024+1024).
// Each work-item adds its 4 elements (stride 256) in order, then an LDS tree
// halves the active range with a barrier per level.
KGATE_KERNEL_BOUNDS(block_reduce, 256, const float* x, float* out, int n) {
  KGATE_LDS(s, float, kReduceBlock);
  const unsigned t = rt::thread_idx().x;
  const long long base = static_cast<long long>(rt::block_idx().x) * kReduceBlock * kReducePerItem;
  float v = 0.0f;
  for (unsigned i = 0; i < kReducePerItem; ++i) {
    const long long idx = base + t + static_cast<long long>(kReduceBlock) * i;
    if (idx < n) v += x[idx];
  }
  s[t] = v;
  rt::barrier();
  for (unsigned stride = kReduceBlock / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      const float a = s[t];
      const float c = s[t + stride];
      s[t] = a + c;
    }
    rt::barrier();
  }
  if (t == 0) out[rt::block_idx().x] = s[0];
}

// Wave reduction with shuffles: every 32 consecutive elements are summed by a
// xor butterfly inside a 32-lane segment; lane 0 of the segment writes.
KGATE_KERNEL(wave_reduce, const float* x, float* out, int n) {
  const long long i = static_cast<long long>(rt::block_idx().x) * rt::block_dim().x + rt::thread_idx().x;
  float v = i < n ? x[i] : 0.0f;
  for (int m = 16; m >= 1; m /= 2) v += rt::shfl_xor(v, m, 32);
  if ((rt::lane_id() & 31) == 0 && i < n) out[i / 32] = v;
}

// Inclusive prefix sum of integers inside 32-lane segments (shfl_up), and the
// segment total broadcast from its last lane (shfl).
KGATE_KERNEL(wave_scan, const int* x, int* out, int* totals, int n) {
  const long long i = static_cast<long long>(rt::block_idx().x) * rt::block_dim().x + rt::thread_idx().x;
  const int seg_lane = rt::lane_id() & 31;
  int v = i < n ? x[i] : 0;
  for (unsigned d = 1; d < 32; d *= 2) {
    const int u = rt::shfl_up(v, d, 32);
    if (seg_lane >= static_cast<int>(d)) v += u;
  }
  const int total = rt::shfl(v, 31, 32);
  if (i < n) out[i] = v;
  if (seg_lane == 0 && i < n) totals[i / 32] = total;
}

// Transpose through a padded 32x33 LDS tile; block (32, 8).
KGATE_KERNEL_BOUNDS(lds_transpose, 256, const float* in, float* out, int rows, int cols) {
  KGATE_LDS(tile, float, 32 * 33);
  const unsigned bx = rt::block_idx().x * 32, by = rt::block_idx().y * 32;
  const unsigned tx = rt::thread_idx().x, ty = rt::thread_idx().y;
  for (unsigned j = ty; j < 32; j += 8) {
    const unsigned r = by + j, c = bx + tx;
    if (r < static_cast<unsigned>(rows) && c < static_cast<unsigned>(cols))
      tile[j * 33 + tx] = in[static_cast<long long>(r) * cols + c];
  }
  rt::barrier();
  for (unsigned j = ty; j < 32; j += 8) {
    const unsigned r = bx + j, c = by + tx;  // out is cols x rows
    if (r < static_cast<unsigned>(cols) && c < static_cast<unsigned>(rows)) {
      const float v = tile[tx * 33 + j];
      out[static_cast<long long>(r) * rows + c] = v;
    }
  }
}

// A 32x32 output tile of C = A (M x K, bf16) * B (K x N, bf16) in fp32 per
// workgroup of one wave, through an MMA atom (rt::mma; the backend's default
// bf16 atom in the conformance set): the A and B tiles are staged in LDS,
// then each K step runs (32/M) x (32/N) atoms, loading fragments from LDS by
// coordinate and storing the accumulators by coordinate. The inputs the
// conformance set uses (small integers) make every sum exact, so every atom
// and numeric model gives the bits of the plain loop.
template <class Atom, int K>
KGATE_KERNEL_BOUNDS(tile_gemm, 64, const std::uint16_t* a, const std::uint16_t* b, float* c, int n) {
  namespace mma = rt::mma;
  constexpr int T = 32, RM = T / Atom::M, RN = T / Atom::N;
  static_assert(T % Atom::M == 0 && T % Atom::N == 0 && K % Atom::K == 0);
  KGATE_LDS(as, std::uint16_t, T * K);
  KGATE_LDS(bs, std::uint16_t, K * T);
  const long long i0 = static_cast<long long>(rt::block_idx().y) * T, j0 = static_cast<long long>(rt::block_idx().x) * T;
  const int t = static_cast<int>(rt::thread_idx().x);
  for (int e = t; e < T * K; e += Atom::lanes) as[e] = a[(i0 + e / K) * K + e % K];
  for (int e = t; e < K * T; e += Atom::lanes) bs[e] = b[static_cast<long long>(e / T) * n + j0 + e % T];
  rt::barrier();
  mma::c_frag<Atom> acc[RM][RN];
  KGATE_MMA_UNROLL
  for (int rm = 0; rm < RM; ++rm)
    KGATE_MMA_UNROLL
    for (int rn = 0; rn < RN; ++rn) acc[rm][rn] = mma::zero_c<Atom>();
  for (int k0 = 0; k0 < K; k0 += Atom::K) {
    KGATE_MMA_UNROLL
    for (int rm = 0; rm < RM; ++rm) {
      const auto af = mma::load_a<Atom>([&](int i, int k) { return as[(rm * Atom::M + i) * K + k0 + k]; });
      KGATE_MMA_UNROLL
      for (int rn = 0; rn < RN; ++rn) {
        const auto bf = mma::load_b<Atom>([&](int k, int j) { return bs[(k0 + k) * T + rn * Atom::N + j]; });
        acc[rm][rn] = mma::mma<Atom>(af, bf, acc[rm][rn]);
      }
    }
  }
  KGATE_MMA_UNROLL
  for (int rm = 0; rm < RM; ++rm)
    KGATE_MMA_UNROLL
    for (int rn = 0; rn < RN; ++rn)
      mma::visit_c<Atom>(acc[rm][rn], [&](int i, int j, float v) {
        c[(i0 + rm * Atom::M + i) * n + j0 + rn * Atom::N + j] = v;
      });
}

// Hinted accesses: the runtime's wide and read-once loads and stores move
// values of 32, 16, 8 and 2 bytes unchanged (a hint changes caching only).
// Element i of each array is copied by work-item i.
struct alignas(32) Bytes32 {
  std::uint32_t v[8];
};
struct alignas(16) Bytes16 {
  std::uint32_t v[4];
};
struct alignas(8) Bytes8 {
  std::uint16_t v[4];
};
KGATE_KERNEL(hinted_copy, const Bytes32* a, Bytes32* b, const Bytes16* c, Bytes16* d, const Bytes8* e, Bytes8* f,
             const std::uint16_t* g, std::uint16_t* h, int n) {
  const int i = static_cast<int>(rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x);
  if (i >= n) return;
  rt::store_once(b + i, rt::load_wide(a + i));
  rt::store_wide(d + i, rt::load_once(c + i));
  rt::store_once(f + i, rt::load_once(e + i));
  rt::store_wide(h + i, rt::load_wide(g + i));
}

}  // namespace kgate::conformance
