// conv_wgrad: backward-weight's portable kernel.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_common.hpp"

namespace kgate::kernels::cv {

// ---------------------------------------------------------------------------
// wgrad: one slice of K per grid z; partials to the workspace.
inline constexpr int kWgradRows = 4;  // rows of K whose loads conv_wgrad issues together

// kQuad: a work-item's kTN large channels as one load (clg a multiple of
// kTN, the large tensor aligned to kTN elements: WgradArgs::quad_large).
template <class Tin, bool kQuad = false>
KGATE_KERNEL_BOUNDS(conv_wgrad, kThreads, WgradArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn, rg = a.rgroups, tr = t / a.bn;
  const std::int64_t col_tiles = ceil_div(g.clg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t row_tiles = ceil_div(g.csg, static_cast<std::int64_t>(kTM) * rg);
  const std::int64_t tap = rt::block_idx().x / col_tiles;
  const std::int64_t l0 = (rt::block_idx().x % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t grp = rt::block_idx().y / row_tiles;
  const std::int64_t c0 = (rt::block_idx().y % row_tiles) * kTM * rg + (tr % rg) * kTM;
  const std::int64_t split = static_cast<std::int64_t>(rt::block_idx().z) * (bm / rg) + tr / rg;
  if (c0 >= g.csg || l0 >= g.clg || split >= a.splits) return;
  const std::int64_t K = g.n * g.s_pos;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < K ? r_begin + a.slice : K;
  const std::int64_t k2 = tap % g.K[2], k1 = (tap / g.K[2]) % g.K[1], k0 = tap / (g.K[2] * g.K[1]);
  const std::int64_t d0 = k0 * g.dil[0] - g.pad[0], d1 = k1 * g.dil[1] - g.pad[1], d2 = k2 * g.dil[2] - g.pad[2];
  const Tin* Sm = static_cast<const Tin*>(a.small);
  const Tin* Lg = static_cast<const Tin*>(a.large);
  // Columns past the tile's end read a valid copy, never stored.
  int cu[kTM], lv[kTN];
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) cu[u] = c0 + u < g.csg ? u : 0;
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) lv[v] = l0 + v < g.clg ? v : 0;
  AccTile acc{};
  // (bn, i0, i1, i2) of row r_begin, then advanced row by row. The loads
  // of kWgradRows rows are issued before their products (a loop of one row
  // at a time waits on each row's load latency: with few work-items per
  // slice, that latency is the kernel's time); the products are added in
  // row order as before, rows without a large position (padding) or past
  // the slice skipped.
  std::int64_t r = r_begin;
  std::int64_t i2 = r % g.S[2], i1 = (r / g.S[2]) % g.S[1], i0 = (r / (std::int64_t{g.S[2]} * g.S[1])) % g.S[0];
  std::int64_t bn = r / g.s_pos;
  for (; r < r_end; r += kWgradRows) {
    rt::regs<rt::regs<float, kTM>, kWgradRows> x;
    rt::regs<ColVec, kWgradRows> y;
    bool ok[kWgradRows];
KGATE_UNROLL
    for (int k = 0; k < kWgradRows; ++k) {
      const std::int64_t j0 = i0 * g.stride[0] + d0, j1 = i1 * g.stride[1] + d1, j2 = i2 * g.stride[2] + d2;
      ok[k] = r + k < r_end && j0 >= 0 && j0 < g.L[0] && j1 >= 0 && j1 < g.L[1] && j2 >= 0 && j2 < g.L[2];
      const Tin* sp = Sm + (ok[k] ? (r + k) * g.cs + grp * g.csg + c0 : 0);
      const Tin* lp = Lg + (ok[k] ? (((bn * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl + grp * g.clg + l0 : 0);
KGATE_UNROLL
      for (int u = 0; u < kTM; ++u) x[k][u] = ok[k] ? to_f32(sp[cu[u]]) : 0.0f;
      if constexpr (kQuad) {
        float q[kTN];
        load_f32<Tin, kTN>(lp, q);
KGATE_UNROLL
        for (int v = 0; v < kTN; ++v) y[k][v] = ok[k] ? q[v] : 0.0f;
      } else {
KGATE_UNROLL
        for (int v = 0; v < kTN; ++v) y[k][v] = ok[k] ? to_f32(lp[lv[v]]) : 0.0f;
      }
      if (++i2 == g.S[2]) {
        i2 = 0;
        if (++i1 == g.S[1]) {
          i1 = 0;
          if (++i0 == g.S[0]) {
            i0 = 0;
            ++bn;
          }
        }
      }
    }
KGATE_UNROLL
    for (int k = 0; k < kWgradRows; ++k) {
      if (!ok[k]) continue;
KGATE_UNROLL
      for (int u = 0; u < kTM; ++u)
KGATE_UNROLL
        for (int v = 0; v < kTN; ++v) acc[u][v] = acc[u][v] + x[k][u] * y[k][v];
    }
  }
  const std::int64_t numel = g.cs * g.taps * g.clg;
  float* out = a.ws + split * numel;
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (c0 + u >= g.csg) continue;
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) {
      if (l0 + v >= g.clg) continue;
      out[((grp * g.csg + c0 + u) * g.taps + tap) * g.clg + l0 + v] = acc[u][v];
    }
  }
}

}  // namespace kgate::kernels::cv
