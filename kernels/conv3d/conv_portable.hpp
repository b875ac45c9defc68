// The portable kernels of the contract and scatter families (no LDS, no
// barrier): conv_contract, conv_scatter.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_common.hpp"

namespace kgate::kernels::cv {

// ---------------------------------------------------------------------------
// contract: out on the small side.

template <class Tin, class Tout>
KGATE_KERNEL_BOUNDS(conv_contract, kThreads, GemmArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn;
  const std::int64_t col_tiles = ceil_div(g.csg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kTM * bm + (t / a.bn) * kTM;
  const std::int64_t M = g.n * g.s_pos;
  if (m0 >= M || c0 >= g.csg) return;
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);

  std::int64_t rb[kTM], ri[kTM][3];
  bool rv[kTM];
  decode_rows(m0, M, g.S, rb, ri, rv);
  const Tin* wrow[kTN];
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) {
    const std::int64_t c = c0 + v < g.csg ? c0 + v : c0;  // a column past csg computes a copy, never stored
    wrow[v] = W + (grp * g.csg + c) * g.taps * g.clg;
  }
  AccTile acc{};
  // One flat loop over the taps (KD, KH, KW order): few live counters.
  const std::int32_t taps = static_cast<std::int32_t>(g.taps);
  for (std::int32_t tap = 0; tap < taps; ++tap) {
    const std::int32_t k2 = tap % g.K[2], k1 = (tap / g.K[2]) % g.K[1], k0 = tap / (g.K[2] * g.K[1]);
    const Tin* ap[kTM];
KGATE_UNROLL
    for (int u = 0; u < kTM; ++u) {
      const std::int64_t j0 = ri[u][0] * g.stride[0] - g.pad[0] + k0 * g.dil[0];
      const std::int64_t j1 = ri[u][1] * g.stride[1] - g.pad[1] + k1 * g.dil[1];
      const std::int64_t j2 = ri[u][2] * g.stride[2] - g.pad[2] + k2 * g.dil[2];
      const bool in = rv[u] && j0 >= 0 && j0 < g.L[0] && j1 >= 0 && j1 < g.L[1] && j2 >= 0 && j2 < g.L[2];
      ap[u] = in ? A + ((((rb[u] * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl + grp * g.clg) : nullptr;
    }
    const std::int64_t woff = std::int64_t{tap} * g.clg;
    for (std::int32_t q = 0; q < g.clg; ++q) {
      ColVec b;
KGATE_UNROLL
      for (int v = 0; v < kTN; ++v) b[v] = to_f32(wrow[v][woff + q]);
      tile_step<Tin>(acc, ap, q, b);
    }
  }
  store_tile<Tin, Tout>(a, [&](int u) { return (m0 + u) * g.cs; }, rv, grp, c0, g.csg, acc);
}

// ---------------------------------------------------------------------------
// scatter: out on the large side, one stride phase per grid z.

template <class Tin, class Tout, bool kOneTap>
KGATE_KERNEL_BOUNDS(conv_scatter, kThreads, GemmArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn;
  // Phase coordinates, tap bounds and tap offsets are 32-bit (extents,
  // strides and dilations are at most 2^24, 1024 and 1024).
  std::int32_t ph[3], T[3];
  phase_of(g, static_cast<std::int32_t>(rt::block_idx().z), ph, T);
  const std::int64_t M = std::int64_t{g.n} * T[0] * T[1] * T[2];
  const std::int64_t col_tiles = ceil_div(g.clg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kTM * bm + (t / a.bn) * kTM;
  // The phase's taps: with kOneTap (k = s, dil = 1) exactly k = (ph + pad)
  // mod s, computed in place; otherwise work-item 0 lists them in LDS
  // (list_phase_taps).
  KGATE_LDS(ptap, std::int32_t, 4 * kMaxPhaseTaps);
  KGATE_LDS(pcount, std::int32_t, 1);
  std::int32_t ntaps = 1;
  if constexpr (!kOneTap) {
    list_phase_taps(g, ph, ptap, pcount, t, kThreads);
    rt::barrier();
    ntaps = pcount[0];
  }
  if (m0 >= M || c0 >= g.clg) return;
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);

  std::int64_t rb[kTM], rt_[kTM][3];
  bool rv[kTM];
  decode_rows(m0, M, T, rb, rt_, rv);
  std::int64_t cc[kTN];
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) cc[v] = grp * g.clg + (c0 + v < g.clg ? c0 + v : c0);
  AccTile acc{};
  for (std::int32_t e = 0; e < ntaps; ++e) {
    std::int64_t tap;
    std::int32_t o0, o1, o2;
    if constexpr (kOneTap) {
      const std::int32_t k0 = static_cast<std::int32_t>(pos_mod(ph[0] + g.pad[0], g.stride[0]));
      const std::int32_t k1 = static_cast<std::int32_t>(pos_mod(ph[1] + g.pad[1], g.stride[1]));
      const std::int32_t k2 = static_cast<std::int32_t>(pos_mod(ph[2] + g.pad[2], g.stride[2]));
      tap = (std::int64_t{k0} * g.K[1] + k1) * g.K[2] + k2;
      o0 = (ph[0] + g.pad[0] - k0) / g.stride[0];
      o1 = (ph[1] + g.pad[1] - k1) / g.stride[1];
      o2 = (ph[2] + g.pad[2] - k2) / g.stride[2];
    } else {
      tap = ptap[4 * e];
      o0 = ptap[4 * e + 1];
      o1 = ptap[4 * e + 2];
      o2 = ptap[4 * e + 3];
    }
    const Tin* ap[kTM];
KGATE_UNROLL
    for (int u = 0; u < kTM; ++u) {
      const std::int64_t i0 = rt_[u][0] + o0, i1 = rt_[u][1] + o1, i2 = rt_[u][2] + o2;
      const bool in = rv[u] && i0 >= 0 && i0 < g.S[0] && i1 >= 0 && i1 < g.S[1] && i2 >= 0 && i2 < g.S[2];
      ap[u] = in ? A + ((((rb[u] * g.S[0] + i0) * g.S[1] + i1) * g.S[2] + i2) * g.cs + grp * g.csg) : nullptr;
    }
    const Tin* wq = W + (grp * g.csg * g.taps + tap) * g.clg;
    const std::int64_t wstride = g.taps * g.clg;
    for (std::int32_t q = 0; q < g.csg; ++q, wq += wstride) {
      ColVec b;
KGATE_UNROLL
      for (int v = 0; v < kTN; ++v) b[v] = to_f32(wq[cc[v] - grp * g.clg]);
      tile_step<Tin>(acc, ap, q, b);
    }
  }
  store_tile<Tin, Tout>(a, [&](int u) { return lattice_offset(g, ph, rb[u], rt_[u]); }, rv, grp, c0, g.clg, acc);
}

}  // namespace kgate::kernels::cv
