// conv_mma: the contract and scatter families on matrix cores, composed
// of an operand iterator (conv_mma_operands.hpp: tap-major or W-halo), a
// pipeline (conv_mma_tile.hpp: asynchronous or register stages) and an
// epilogue (conv_mma_epilogue.hpp). One source for every backend
// (kernels/runtime/runtime.hpp); the design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_mma_epilogue.hpp"
#include "kernels/conv3d/conv_mma_operands.hpp"
#include "kernels/conv3d/conv_mma_tile.hpp"

namespace kgate::kernels::cv {

template <class Atom, class Tin, class Tout, bool kScatter>
KGATE_KERNEL_BOUNDS(conv_mma, (MmaTile<Atom, kMmaWide>::kThreads), GemmArgs a) {
  using TT = MmaTile<Atom, kMmaWide>;
  using Ops = MmaOperands<Tin, TT::kThreads, kScatter>;
  using P = Pack<Tin, kMmaVec>;
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const MmaGemm<kScatter> G(a);
  if (G.m0 >= G.M) return;  // a stride phase with fewer positions than phase 0 (the whole workgroup)
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);
  // The stages (mma_stage_lds): A tile of stage st at a_at(st), B tile at
  // b_at(st).
  const rt::lds_array<std::uint16_t> sT = mma_stage_lds<Atom::target>();
  constexpr int kStages = TT::kStages;
  auto a_at = [](int st) { return st * TT::kASize; };
  auto b_at = [](int st) { return kStages * TT::kASize + st * TT::kBSize; };
  KGATE_LDS(ptap, std::int32_t, kScatter ? 4 * kMaxPhaseTaps : 4);
  KGATE_LDS(pcount, std::int32_t, 1);
  KGATE_LDS(orow, std::int64_t, kMmaBM);  // output offset of each row of the tile, -1 past M
  static_assert(kMmaBM <= TT::kThreads);
  if (t < kMmaBM) {
    const std::int64_t m = G.m0 + t;
    orow[t] = m < G.M ? out_row<kScatter>(g, G.ph, G.ext, m) : std::int64_t{-1};
  }
  std::int64_t ntaps = g.taps;
  if constexpr (kScatter) {
    list_phase_taps(g, G.ph, ptap, pcount, t, TT::kThreads);
    rt::barrier();
    ntaps = pcount[0];
  }
  // This split's taps [e_begin, e_end) (all of them without a split).
  const std::int64_t e_begin = a.tap_split > 0 ? std::int64_t{G.ks} * a.tap_split : 0;
  const std::int64_t e_end = a.tap_split > 0 && e_begin + a.tap_split < ntaps ? e_begin + a.tap_split : ntaps;
  const std::int64_t kblocks = ceil_div(G.kdim, kMmaBK), nblk = e_end > e_begin ? (e_end - e_begin) * kblocks : 0;
  const int wave = t / Atom::lanes, wm = wave % TT::WM, wn = wave / TT::WM;
  MmaAcc<Atom, TT::AM, TT::AN> acc;
KGATE_UNROLL
  for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < TT::AN; ++v) acc[u][v] = rt::mma::zero_c<Atom>();
  // A tap-major step's atoms take channels qs .. of its tap, the chain
  // stopping after the last atom-K chunk holding a channel.
  std::int64_t qs = 0;
  auto run_step = [&](int st, auto b_kmajor) {
    mma_block_step<Atom, TT, false, decltype(b_kmajor)::value>(sT, a_at(st), sT, b_at(st), wm, wn,
                                                               ceil_div(G.kdim - qs, Atom::K), acc);
    qs = qs + kMmaBK < G.kdim ? qs + kMmaBK : 0;
  };
  // One main loop, then the one epilogue (inlined once).
  bool staged = false;  // the main loop ran through asynchronous copies
  if constexpr (kStages > 2) {
    if (a.halo_taps > 0) {
      // The W-halo block step: kHaloTaps taps of a (kd, kh) pair per step
      // from one staged run, without a branch between them
      // (mma_block_step).
      using Halo = MmaHaloOperands<Tin, TT::kThreads, kScatter>;
      static_assert(kHaloBK == Atom::K && kHaloMinSeg % Atom::M == 0 && TT::WTM % Atom::M == 0);
      static_assert(kStages * kHaloStage * sizeof(std::uint16_t) <= mma_stage_bytes(Atom::target));
      Halo h(a, G, t);
      // The staged row of each of the wave's atom rows at kw = 0.
      rt::regs<std::int32_t, TT::AM> arow;
KGATE_UNROLL
      for (int u = 0; u < TT::AM; ++u) arow[u] = h.staged_row(wm * TT::WTM + u * Atom::M);
      auto tap_atoms = [&](int st, int kw) {
        mma_atoms<Atom, TT>(
            [&](int u) {
              return rt::mma::load_a_lds<Atom>(
                  sT, Halo::a_at(st) + (arow[u] + (kScatter ? h.wtaps - 1 - kw : kw) * g.dil[2]) * kHaloLDK, kHaloLDK);
            },
            [&](int v) {
              if constexpr (kScatter)
                return rt::mma::load_b_lds_kmajor<Atom>(sT, Halo::b_at(st) + kw * kMmaBN * kHaloLDK + wn * TT::WTN + v * Atom::N,
                                                        kMmaLDN);
              else
                return rt::mma::load_b_lds<Atom>(sT, Halo::b_at(st) + (kw * kMmaBN + wn * TT::WTN + v * Atom::N) * kHaloLDK,
                                                 kHaloLDK);
            },
            acc);
      };
      async_stage_loop<kStages>(
          h.steps(), [&](std::int64_t, int st) { h.issue(sT, A, W, st); },
          [&](std::int64_t, int st) {
            if (h.wtaps == kHaloTaps) {
KGATE_UNROLL
              for (int kw = 0; kw < kHaloTaps; ++kw) tap_atoms(st, kw);
            } else {
              for (int kw = 0; kw < h.wtaps; ++kw) tap_atoms(st, kw);
            }
          });
      staged = true;
    } else if (a.wide) {
      // kStages stages filled by asynchronous copies (async_stage_loop),
      // each load copied to its place in B's natural order: the scatter
      // family's B rows (output channels contiguous) are staged K-major and
      // read with the K-major fragment loads. Steps are issued in order, so
      // the iterator advances per issue.
      Ops it(g, G, ptap, t, e_begin, e_end);
      auto issue = [&](std::int64_t, int st) {
        it.a_loads([&](int s, bool in, std::int64_t off, std::int64_t) {
          sT.copy_async<P>(a_at(st) + it.a_row(s) * TT::LDK + it.kc * kMmaVec, reinterpret_cast<const P*>(in ? A + off : A),
                           in);
        });
        it.b_loads([&](int, int row, int col, bool in, std::int64_t off, std::int64_t) {
          sT.copy_async<P>(b_at(st) + row * (Ops::kBKMajor ? kMmaLDN : TT::LDK) + col,
                           reinterpret_cast<const P*>(in ? W + off : W), in);
        });
        it.advance();
      };
      async_stage_loop<kStages>(nblk, issue,
                                [&](std::int64_t, int st) { run_step(st, std::bool_constant<Ops::kBKMajor>{}); });
      staged = true;
    }
  }
  if (!staged) {
    // Two LDS stages through registers (register_stage_loop); B always as
    // [output channel][channel]: the scatter family's loads, along output
    // channels, are transposed element by element.
    Ops it(g, G, ptap, t, e_begin, e_end);
    rt::regs<P, Ops::kAPass> pa;
    rt::regs<P, Ops::kBLoads> pb;
    auto fetch = [&](std::int64_t) {
      it.a_loads([&](int s, bool in, std::int64_t off, std::int64_t n) { pa[s] = in ? load_pack(A + off, n, a.wide) : P{}; });
      it.b_loads([&](int s, int, int, bool in, std::int64_t off, std::int64_t n) {
        pb[s] = in ? load_pack(W + off, n, a.wide) : P{};
      });
      it.advance();
    };
    auto stash = [&](int st) {
KGATE_UNROLL
      for (int s = 0; s < Ops::kAPass; ++s) sT.store<P>(a_at(st) + it.a_row(s) * TT::LDK + it.kc * kMmaVec, pa[s]);
KGATE_UNROLL
      for (int s = 0; s < Ops::kBLoads; ++s) {
        const int row = it.b_row(s), col = it.b_col(s);
        if constexpr (Ops::kBKMajor) {
KGATE_UNROLL
          for (int i = 0; i < kMmaVec; ++i) sT[b_at(st) + (col + i) * TT::LDK + row] = bits_of(pb[s].v[i]);
        } else {
          sT.store<P>(b_at(st) + row * TT::LDK + col, pb[s]);
        }
      }
    };
    register_stage_loop(nblk, fetch, stash, [&](std::int64_t, int st) { run_step(st, std::false_type{}); });
  }
  MmaEpilogue<Atom, TT, Tin, Tout, kScatter>{a, G, orow, t, wm, wn}(acc, sT);
}

}  // namespace kgate::kernels::cv
