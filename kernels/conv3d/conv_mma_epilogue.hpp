// conv_mma's epilogues: a block tile's fp32 sums to the output (bias added,
// rounded once to Tout) or, for a split of K, to the workspace.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_mma_operands.hpp"

namespace kgate::kernels::cv {

// The output side of a conv_mma block tile: the element offset of each
// tile row's output row (orow, -1 past M), the wave's place in the wave
// grid, and the tile's group and columns (MmaGemm).
template <class Atom, class TT, class Tin, class Tout, bool kScatter>
struct MmaEpilogue {
  const GemmArgs& a;
  const MmaGemm<kScatter>& G;
  const rt::lds_array<std::int64_t>& orow;
  int t, wm, wn;

  // f(row, c, y) for every accumulator whose output exists: the element
  // offset of its output row, its channel c of the group, its sum y.
  template <class F>
  KGATE_DEVICE void visit(const MmaAcc<Atom, TT::AM, TT::AN>& acc, F&& f) const {
KGATE_UNROLL
    for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
      for (int v = 0; v < TT::AN; ++v)
        rt::mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
          const std::int64_t row = orow[wm * TT::WTM + u * Atom::M + i], c = G.c0 + wn * TT::WTN + v * Atom::N + j;
          if (row < 0 || c >= G.ndim) return;
          f(row, c, y);
        });
  }
  // A split's partial sums (tap_split): fp32, no bias, at the output
  // element's place in ws[ks].
  KGATE_DEVICE void store_partial(const MmaAcc<Atom, TT::AM, TT::AN>& acc) const {
    float* O = a.ws + std::int64_t{G.ks} * a.ws_numel;
    visit(acc, [&](std::int64_t row, std::int64_t c, float y) { O[row + G.grp * G.ndim + c] = y; });
  }
  // Element stores from the fragments.
  KGATE_DEVICE void store_direct(const MmaAcc<Atom, TT::AM, TT::AN>& acc) const {
    Tout* O = static_cast<Tout*>(a.out);
    const Tin* B = static_cast<const Tin*>(a.bias);
    visit(acc, [&](std::int64_t row, std::int64_t c, float y) { put_output<Tin, Tout>(O, B, row, G.grp * G.ndim + c, y); });
  }
  // Through LDS (sm_90 stages; `wide_out`: channel runs of 8 and a 16-byte
  // aligned output): the accumulators go to the stages as fp32
  // [row][column] (they are free once every wave has passed the barrier
  // after its last block step), then each work-item writes runs of kV
  // output channels of a row with one 16-byte store, bias added (with_bias)
  // and rounded once as in put_output (the same values, bit for bit). A
  // wave's fragments alone would write 2- or 4-byte pieces of eight rows
  // per instruction.
  KGATE_DEVICE void store_staged(const MmaAcc<Atom, TT::AM, TT::AN>& acc, const rt::lds_array<std::uint16_t>& sT) const {
    constexpr int kV = 16 / static_cast<int>(sizeof(Tout));  // output elements per 16-byte store
    constexpr int kCP = kMmaBN + 4;                           // fp32 row pitch of the staged tile
    constexpr int kRuns = kMmaBN / kV;                        // runs per tile row
    static_assert(kMmaBM * kCP * sizeof(float) <= mma_stage_bytes(rt::Target::sm90) && kMmaBN % kV == 0 && kV % 4 == 0);
    constexpr int kF = static_cast<int>(sizeof(float) / sizeof(std::uint16_t));  // stage elements per fp32
    rt::barrier();
KGATE_UNROLL
    for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
      for (int v = 0; v < TT::AN; ++v)
        rt::mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
          sT.store<float>(kF * ((wm * TT::WTM + u * Atom::M + i) * kCP + wn * TT::WTN + v * Atom::N + j), y);
        });
    rt::barrier();
    Tout* O = static_cast<Tout*>(a.out);
    const Tin* B = static_cast<const Tin*>(a.bias);
    for (int l = t; l < kMmaBM * kRuns; l += TT::kThreads) {
      const int r = l / kRuns, cc = (l % kRuns) * kV;
      const std::int64_t row = orow[r], c = G.c0 + cc;
      if (row < 0 || c >= G.ndim) continue;  // ndim is a multiple of 8 (wide_out): a run is whole or absent
      float y[kV];
KGATE_UNROLL
      for (int h = 0; h < kV / 4; ++h) {
        const Pack<float, 4> q = sT.load<Pack<float, 4>>(kF * (r * kCP + cc + 4 * h));
KGATE_UNROLL
        for (int e = 0; e < 4; ++e) y[4 * h + e] = q.v[e];
      }
KGATE_UNROLL
      for (int e = 0; e < kV; ++e) y[e] = with_bias(B, G.grp * G.ndim + c + e, y[e]);
      store_f32<Tout, kV>(O + row + G.grp * G.ndim + c, y);  // from_f32 per element, as put_output
    }
  }
  // The epilogue: a split's partials (tap_split); else the staged one where
  // the stages are sm_90's (their LDS holds the fp32 tile) and the output's
  // runs allow it; else element stores.
  KGATE_DEVICE void operator()(const MmaAcc<Atom, TT::AM, TT::AN>& acc, const rt::lds_array<std::uint16_t>& sT) const {
    if (a.ws) {
      store_partial(acc);
      return;
    }
    if constexpr (TT::kStages > 2) {
      if (a.wide_out) {
        store_staged(acc, sT);
        return;
      }
    }
    store_direct(acc);
  }
};

}  // namespace kgate::kernels::cv
