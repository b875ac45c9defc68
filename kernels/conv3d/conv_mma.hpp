// conv_mma: the contract and scatter families on matrix cores.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_mma_tile.hpp"

namespace kgate::kernels::cv {

template <class Atom, class Tin, class Tout, bool kScatter>
KGATE_KERNEL_BOUNDS(conv_mma, (MmaTile<Atom, kMmaWide>::kThreads), GemmArgs a) {
  namespace mma = kgate::rt::mma;
  using TT = MmaTile<Atom, kMmaWide>;
  constexpr int kMmaThreads = TT::kThreads;
  using P = Pack<Tin, kMmaVec>;
  constexpr int kCK = kMmaBK / kMmaVec;                                 // loads per staged row
  constexpr int kARows = kMmaThreads / kCK;                             // A rows per pass
  constexpr int kAPass = kMmaBM / kARows;                               // A loads per work-item
  constexpr int kBLoads = kMmaBN * kMmaBK / kMmaVec / kMmaThreads;      // B loads per work-item
  constexpr int kBRow = kMmaBN / kMmaVec;                               // scatter: loads per B row
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  // The family as one GEMM: rows decode over extents `ext`; at tap e row i
  // reads source position i*mul + off(e) (extents `src`), channels
  // grp*kdim + q of a source row of cstride channels; the output has ndim
  // channels per group.
  std::int32_t ph[3] = {0, 0, 0}, ext[3], src[3], mul[3];
  std::int64_t kdim, ndim, cstride;
  const std::int32_t ks = static_cast<std::int32_t>(rt::block_idx().z) % a.splits;  // the split of K (tap_split)
  if constexpr (kScatter) {
    phase_of(g, static_cast<std::int32_t>(rt::block_idx().z) / a.splits, ph, ext);
KGATE_UNROLL
    for (int x = 0; x < 3; ++x) src[x] = g.S[x], mul[x] = 1;
    kdim = g.csg, ndim = g.clg, cstride = g.cs;
  } else {
KGATE_UNROLL
    for (int x = 0; x < 3; ++x) ext[x] = g.S[x], src[x] = g.L[x], mul[x] = g.stride[x];
    kdim = g.clg, ndim = g.csg, cstride = g.cl;
  }
  const std::int64_t M = std::int64_t{g.n} * ext[0] * ext[1] * ext[2];
  const std::int64_t col_tiles = ceil_div(ndim, kMmaBN);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kMmaBN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kMmaBM;
  if (m0 >= M) return;  // a stride phase with fewer positions than phase 0 (the whole workgroup)
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
  static_assert(kMmaBM <= kMmaThreads);
  if (t < kMmaBM) {
    const std::int64_t m = m0 + t;
    orow[t] = m < M ? out_row<kScatter>(g, ph, ext, m) : std::int64_t{-1};
  }
  std::int64_t ntaps = g.taps;
  if constexpr (kScatter) {
    list_phase_taps(g, ph, ptap, pcount, t, kMmaThreads);
    rt::barrier();
    ntaps = pcount[0];
  }
  // Each A row this work-item stages (t / kCK + kARows*s, channel load
  // t % kCK) is decoded once: its source element offset at tap offset 0
  // (channel grp*kdim + its load's first) and its coordinates scaled by mul;
  // a row past M gets coordinates far below 0, outside the source at every
  // tap. (32-bit coordinates: i*mul + off lies within [-2^30 - 2^24, 3*2^24]
  // for extents, pads, kernel and dilation within ConvProblem's limits.)
  const int kc = t % kCK;
  std::int64_t abase[kAPass];
  std::int32_t rj[kAPass][3];
KGATE_UNROLL
  for (int s = 0; s < kAPass; ++s) {
    const std::int64_t m = m0 + t / kCK + kARows * s;
    std::int64_t b, i[3];
    decode_row(m < M ? m : m0, ext, b, i);
KGATE_UNROLL
    for (int x = 0; x < 3; ++x) rj[s][x] = m < M ? static_cast<std::int32_t>(i[x] * mul[x]) : -(std::int32_t{1} << 30);
    abase[s] = (((b * src[0] + rj[s][0]) * src[1] + rj[s][1]) * src[2] + rj[s][2]) * cstride + grp * kdim + kc * kMmaVec;
  }
  // Each B load's weight offset at tap 0, channel 0 of the step: contract
  // B(q, c) = w[grp*csg + c][tap][q] (rows of channels), scatter
  // B(q, c) = w[grp*csg + q][tap][c] (rows of output channels).
  std::int64_t wb[kBLoads];
KGATE_UNROLL
  for (int s = 0; s < kBLoads; ++s) {
    const int l = t + s * kMmaThreads;
    wb[s] = kScatter ? (grp * g.csg + l / kBRow) * g.taps * g.clg + c0 + (l % kBRow) * kMmaVec
                     : (grp * g.csg + c0 + l / kCK) * g.taps * g.clg + (l % kCK) * kMmaVec;
  }
  // This split's taps [e_begin, e_end) (all of them without a split).
  const std::int64_t e_begin = a.tap_split > 0 ? std::int64_t{ks} * a.tap_split : 0;
  const std::int64_t e_end = a.tap_split > 0 && e_begin + a.tap_split < ntaps ? e_begin + a.tap_split : ntaps;
  const std::int64_t kblocks = ceil_div(kdim, kMmaBK), nblk = e_end > e_begin ? (e_end - e_begin) * kblocks : 0;
  // The block step the next fetch loads, advanced without a division: tap
  // number e (contract: its kernel coordinates kk), its weight tap, source
  // offsets and the source element delta of those offsets, and channels
  // q0 .. q0 + kMmaBK.
  std::int32_t e = static_cast<std::int32_t>(e_begin), q0 = 0, off[3] = {0, 0, 0};
  std::int32_t kk[3] = {e / (g.K[1] * g.K[2]), (e / g.K[2]) % g.K[1], e % g.K[2]};  // contract: tap e's coordinates
  std::int64_t tap = 0, tdelta = 0;
  auto enter_tap = [&] {
    if constexpr (kScatter) {
      tap = ptap[4 * e];
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) off[x] = ptap[4 * e + 1 + x];
    } else {
      tap = (std::int64_t{kk[0]} * g.K[1] + kk[1]) * g.K[2] + kk[2];
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) off[x] = kk[x] * g.dil[x] - g.pad[x];
    }
    tdelta = ((std::int64_t{off[0]} * src[1] + off[1]) * src[2] + off[2]) * cstride;
  };
  auto advance = [&] {
    q0 += kMmaBK;
    if (q0 < kdim) return;
    q0 = 0;
    ++e;
    if constexpr (!kScatter) {
      if (++kk[2] == g.K[2]) {
        kk[2] = 0;
        if (++kk[1] == g.K[1]) kk[1] = 0, ++kk[0];
      }
    }
    if (e < e_end) enter_tap();
  };
  P pa[kAPass], pb[kBLoads];
  // Whether this work-item's A row s has channel q and, at the current tap,
  // a source position inside the source.
  auto a_in = [&](int s, std::int64_t q) {
    bool in = q < kdim;
KGATE_UNROLL
    for (int x = 0; x < 3; ++x)
      in = in && static_cast<std::uint32_t>(rj[s][x] + off[x]) < static_cast<std::uint32_t>(src[x]);
    return in;
  };
  // Global to registers: the block step (tap e, channels q0 .. q0 + BK),
  // then advance to the next.
  auto fetch = [&] {
    const std::int64_t q = q0 + kc * kMmaVec;
KGATE_UNROLL
    for (int s = 0; s < kAPass; ++s)
      pa[s] = a_in(s, q) ? load_pack(A + (abase[s] + tdelta + q0), kdim - q, a.wide) : P{};
KGATE_UNROLL
    for (int s = 0; s < kBLoads; ++s) {
      const int l = t + s * kMmaThreads;
      if constexpr (kScatter) {
        const std::int64_t qq = q0 + l / kBRow, c = c0 + (l % kBRow) * kMmaVec;
        pb[s] = qq < kdim && c < ndim ? load_pack(W + (wb[s] + (q0 * g.taps + tap) * g.clg), ndim - c, a.wide) : P{};
      } else {
        const std::int64_t c = c0 + l / kCK, qq = q0 + (l % kCK) * kMmaVec;
        pb[s] = c < ndim && qq < kdim ? load_pack(W + (wb[s] + tap * g.clg + q0), kdim - qq, a.wide) : P{};
      }
    }
    advance();
  };
  // Registers to LDS stage `st`; B always as [output channel][channel]
  // (the scatter family's loads, along output channels, are transposed
  // element by element).
  auto stash = [&](int st) {
KGATE_UNROLL
    for (int s = 0; s < kAPass; ++s) sT.store<P>(a_at(st) + (t / kCK + kARows * s) * TT::LDK + kc * kMmaVec, pa[s]);
KGATE_UNROLL
    for (int s = 0; s < kBLoads; ++s) {
      const int l = t + s * kMmaThreads;
      if constexpr (kScatter) {
KGATE_UNROLL
        for (int i = 0; i < kMmaVec; ++i)
          sT[b_at(st) + ((l % kBRow) * kMmaVec + i) * TT::LDK + l / kBRow] = bits_of(pb[s].v[i]);
      } else {
        sT.store<P>(b_at(st) + (l / kCK) * TT::LDK + (l % kCK) * kMmaVec, pb[s]);
      }
    }
  };
  const int wave = t / Atom::lanes, wm = wave % TT::WM, wn = wave / TT::WM;
  MmaAcc<Atom, TT::AM, TT::AN> acc;
KGATE_UNROLL
  for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < TT::AN; ++v) acc[u][v] = mma::zero_c<Atom>();
  // Step blk's atoms take channels qs .. of its tap, the chain stopping
  // after the last atom-K chunk holding a channel.
  std::int64_t qs = 0;
  auto run_step = [&](int st, auto b_kmajor) {
    mma_block_step<Atom, TT, false, decltype(b_kmajor)::value>(sT, a_at(st), sT, b_at(st), wm, wn,
                                                           ceil_div(kdim - qs, Atom::K), acc);
    qs = qs + kMmaBK < kdim ? qs + kMmaBK : 0;
  };
  // f(row, c, y) for every accumulator whose output exists: the element
  // offset of its output row, its channel c of the group, its sum y.
  auto visit_out = [&](auto&& f) {
KGATE_UNROLL
    for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
      for (int v = 0; v < TT::AN; ++v)
        mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
          const std::int64_t row = orow[wm * TT::WTM + u * Atom::M + i], c = c0 + wn * TT::WTN + v * Atom::N + j;
          if (row < 0 || c >= ndim) return;
          f(row, c, y);
        });
  };
  // A split's partial sums (tap_split): fp32, no bias, at the output
  // element's place in ws[ks].
  auto store_partial = [&] {
    float* O = a.ws + std::int64_t{ks} * a.ws_numel;
    visit_out([&](std::int64_t row, std::int64_t c, float y) { O[row + grp * ndim + c] = y; });
  };
  auto store_c = [&] {
    Tout* O = static_cast<Tout*>(a.out);
    const Tin* B = static_cast<const Tin*>(a.bias);
    visit_out([&](std::int64_t row, std::int64_t c, float y) { put_output<Tin, Tout>(O, B, row, grp * ndim + c, y); });
  };
  // The epilogue through LDS (sm_90 stages; `wide_out`: channel runs of 8
  // and a 16-byte aligned output): the accumulators go to the stages as fp32 [row][column]
  // (they are free once every wave has passed the barrier after its last
  // block step), then each work-item writes runs of kV output channels of
  // a row with one 16-byte store, bias added (with_bias) and rounded once as
  // in put_output (the same values, bit for bit). A wave's fragments alone
  // would write 2- or 4-byte pieces of eight rows per instruction.
  auto store_c_staged = [&] {
    constexpr int kV = 16 / static_cast<int>(sizeof(Tout));   // output elements per 16-byte store
    constexpr int kCP = kMmaBN + 4;                            // fp32 row pitch of the staged tile
    constexpr int kRuns = kMmaBN / kV;                         // runs per tile row
    static_assert(kMmaBM * kCP * sizeof(float) <= mma_stage_bytes(rt::Target::sm90) && kMmaBN % kV == 0 && kV % 4 == 0);
    constexpr int kF = static_cast<int>(sizeof(float) / sizeof(std::uint16_t));  // stage elements per fp32
    rt::barrier();
KGATE_UNROLL
    for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
      for (int v = 0; v < TT::AN; ++v)
        mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
          sT.store<float>(kF * ((wm * TT::WTM + u * Atom::M + i) * kCP + wn * TT::WTN + v * Atom::N + j), y);
        });
    rt::barrier();
    Tout* O = static_cast<Tout*>(a.out);
    const Tin* B = static_cast<const Tin*>(a.bias);
    for (int l = t; l < kMmaBM * kRuns; l += kMmaThreads) {
      const int r = l / kRuns, cc = (l % kRuns) * kV;
      const std::int64_t row = orow[r], c = c0 + cc;
      if (row < 0 || c >= ndim) continue;  // ndim is a multiple of 8 (wide_out): a run is whole or absent
      float y[kV];
KGATE_UNROLL
      for (int h = 0; h < kV / 4; ++h) {
        const Pack<float, 4> q = sT.load<Pack<float, 4>>(kF * (r * kCP + cc + 4 * h));
KGATE_UNROLL
        for (int e = 0; e < 4; ++e) y[4 * h + e] = q.v[e];
      }
KGATE_UNROLL
      for (int e = 0; e < kV; ++e) y[e] = with_bias(B, grp * ndim + c + e, y[e]);
      store_f32<Tout, kV>(O + row + grp * ndim + c, y);  // from_f32 per element, as put_output
    }
  };
  // The epilogue: a split's partials (tap_split); else the staged one
  // where the stages are sm_90's (their LDS holds the fp32 tile) and the
  // output's runs allow it; else element stores from the fragments.
  auto store_out = [&] {
    if (a.ws) {
      store_partial();
      return;
    }
    if constexpr (kStages > 2) {
      if (a.wide_out) {
        store_c_staged();
        return;
      }
    }
    store_c();
  };
  if (nblk > 0) enter_tap();
  // One main loop, then the one epilogue (store_out, inlined once).
  bool staged = false;  // the main loop ran through asynchronous copies
  if constexpr (kStages > 2) {
    if (const int kwt = a.halo_taps; kwt > 0) {
      // The W-halo block step (halo_taps), kStages stages of kHaloStage:
      // staged rows [segment][seg + (KW-1)*dil] of kHaloBK channels, then
      // KW B tiles. A work-item copies pack hc of staged rows t/kHP +
      // kHR*s, each decoded once: its source position at (kd, kh) = (0,
      // 0) less that pair's offsets (W: the staged run's own position,
      // checked once), and one pack of every W tap's B tile (contract:
      // pack hc of output channel t/kHP; scatter: pack t % kBRow of
      // channel t / kBRow).
      static_assert(kHaloBK == Atom::K && kHaloMinSeg % Atom::M == 0 && TT::WTM % Atom::M == 0);
      constexpr int kHP = kHaloBK / kMmaVec, kHR = kMmaThreads / kHP, kHPass = (kHaloRows + kHR - 1) / kHR;
      static_assert(kHR == kMmaBN && kStages * kHaloStage * sizeof(std::uint16_t) <= mma_stage_bytes(Atom::target));
      static_assert(kHaloBK * kBRow == kMmaThreads && kHaloBK * kMmaLDN <= kMmaBN * kHaloLDK);
      // Source offsets: contract k*dil - pad, scatter pad - k*dil; the
      // staged run starts at the W tap of the lowest offset (contract kw
      // = 0, scatter kw = KW - 1).
      const std::int32_t sgn = kScatter ? -1 : 1;
      const std::int32_t w_lo = kScatter ? g.pad[2] - (kwt - 1) * g.dil[2] : -g.pad[2];
      auto ha_at = [](int st) { return st * kHaloStage; };
      auto hb_at = [](int st) { return st * kHaloStage + kHaloStageA; };
      const std::int32_t seg = a.halo_seg, hw = seg + (kwt - 1) * g.dil[2], rows = (kMmaBM / seg) * hw;
      const int hc = t % kHP;
      std::int64_t hbase[kHPass];
      std::int32_t hr[kHPass][2];
      bool hok[kHPass];
KGATE_UNROLL
      for (int s = 0; s < kHPass; ++s) {
        const std::int32_t j = t / kHP + kHR * s, sg = j / hw;
        const std::int64_t m = m0 + std::int64_t{sg} * seg;
        std::int64_t b, i[3];
        decode_row(j < rows && m < M ? m : m0, ext, b, i);
        const std::int32_t w = static_cast<std::int32_t>(i[2]) + (j - sg * hw) + w_lo;
        hok[s] = j < rows && m < M && static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(src[2]);
        hr[s][0] = static_cast<std::int32_t>(i[0] * mul[0]);
        hr[s][1] = static_cast<std::int32_t>(i[1] * mul[1]);
        hbase[s] = (((b * src[0] + hr[s][0]) * src[1] + hr[s][1]) * src[2] + w) * cstride + grp * kdim + hc * kMmaVec;
      }
      const bool hcol = kScatter ? c0 + (t % kBRow) * kMmaVec < ndim : c0 + t / kHP < ndim;
      const std::int64_t hwb = kScatter ? (grp * g.csg + t / kBRow) * g.taps * g.clg + c0 + (t % kBRow) * kMmaVec
                                        : (grp * g.csg + c0 + t / kHP) * g.taps * g.clg + hc * kMmaVec;
      // The step the next issue copies: channels hq.., pair (kd, kh) = hk,
      // its source offsets ho, their element delta and its kw = 0 tap.
      std::int32_t hq = 0, hk[2] = {0, 0}, ho[2] = {0, 0};
      std::int64_t hdelta = 0, htap = 0;
      auto enter_pair = [&] {
KGATE_UNROLL
        for (int x = 0; x < 2; ++x) ho[x] = sgn * (hk[x] * g.dil[x] - g.pad[x]);
        hdelta = (std::int64_t{ho[0]} * src[1] + ho[1]) * src[2] * cstride;
        htap = (std::int64_t{hk[0]} * g.K[1] + hk[1]) * g.K[2];
      };
      enter_pair();
      auto issue = [&](std::int64_t, int st) {
        const bool qin = hq + hc * kMmaVec < kdim;  // A's pack (contract: also B's)
KGATE_UNROLL
        for (int s = 0; s < kHPass; ++s) {
          const std::int32_t j = t / kHP + kHR * s;
          if (j >= rows) break;  // no atom reads it (rows ascend with s)
          const bool in = qin && hok[s] && static_cast<std::uint32_t>(hr[s][0] + ho[0]) < static_cast<std::uint32_t>(src[0]) &&
                          static_cast<std::uint32_t>(hr[s][1] + ho[1]) < static_cast<std::uint32_t>(src[1]);
          sT.copy_async<P>(ha_at(st) + j * kHaloLDK + hc * kMmaVec,
                           reinterpret_cast<const P*>(in ? A + (hbase[s] + hdelta + hq) : A), in);
        }
KGATE_UNROLL
        for (int kw = 0; kw < kHaloTaps; ++kw) {
          if (kw >= kwt) break;
          if constexpr (kScatter) {
            const bool in = hq + t / kBRow < kdim && hcol;
            sT.copy_async<P>(hb_at(st) + kw * kMmaBN * kHaloLDK + (t / kBRow) * kMmaLDN + (t % kBRow) * kMmaVec,
                             reinterpret_cast<const P*>(in ? W + (hwb + hq * g.taps * g.clg + (htap + kw) * g.clg) : W), in);
          } else {
            const bool in = qin && hcol;
            sT.copy_async<P>(hb_at(st) + (kw * kMmaBN + t / kHP) * kHaloLDK + hc * kMmaVec,
                             reinterpret_cast<const P*>(in ? W + (hwb + (htap + kw) * g.clg + hq) : W), in);
          }
        }
        hq += kHaloBK;
        if (hq < kdim) return;
        hq = 0;
        if (++hk[1] == g.K[1]) hk[1] = 0, ++hk[0];
        if (hk[0] < g.K[0]) enter_pair();
      };
      // The staged row of each of the wave's atom rows at kw = 0 (an
      // atom's rows lie in one segment).
      std::int32_t arow[TT::AM];
KGATE_UNROLL
      for (int u = 0; u < TT::AM; ++u) {
        const std::int32_t r = wm * TT::WTM + u * Atom::M;
        arow[u] = (r / seg) * hw + r % seg;
      }
      auto tap_atoms = [&](int st, int kw) {
        mma_atoms<Atom, TT>(
            [&](int u) {
              return mma::load_a_lds<Atom>(sT, ha_at(st) + (arow[u] + (kScatter ? kwt - 1 - kw : kw) * g.dil[2]) * kHaloLDK,
                                           kHaloLDK);
            },
            [&](int v) {
              if constexpr (kScatter)
                return mma::load_b_lds_kmajor<Atom>(sT, hb_at(st) + kw * kMmaBN * kHaloLDK + wn * TT::WTN + v * Atom::N, kMmaLDN);
              else
                return mma::load_b_lds<Atom>(sT, hb_at(st) + (kw * kMmaBN + wn * TT::WTN + v * Atom::N) * kHaloLDK, kHaloLDK);
            },
            acc);
      };
      // kHaloTaps taps without a branch between them (mma_block_step).
      auto step = [&](std::int64_t, int st) {
        if (kwt == kHaloTaps) {
KGATE_UNROLL
          for (int kw = 0; kw < kHaloTaps; ++kw) tap_atoms(st, kw);
        } else {
          for (int kw = 0; kw < kwt; ++kw) tap_atoms(st, kw);
        }
      };
      async_stage_loop<kStages>(std::int64_t{g.K[0]} * g.K[1] * ceil_div(kdim, kHaloBK), issue, step);
      staged = true;
    } else if (a.wide) {
      // kStages stages filled by asynchronous copies (async_stage_loop). The
      // scatter family's B rows (output channels contiguous) are staged as
      // they are, K-major, and read with the K-major fragment loads. Steps
      // are issued in order, so the block-step state advances per issue.
      auto issue = [&](std::int64_t, int st) {
        const std::int64_t q = q0 + kc * kMmaVec;
KGATE_UNROLL
        for (int s = 0; s < kAPass; ++s) {
          const bool in = a_in(s, q);
          sT.copy_async<P>(a_at(st) + (t / kCK + kARows * s) * TT::LDK + kc * kMmaVec,
                           reinterpret_cast<const P*>(in ? A + (abase[s] + tdelta + q0) : A), in);
        }
KGATE_UNROLL
        for (int s = 0; s < kBLoads; ++s) {
          const int l = t + s * kMmaThreads;
          if constexpr (kScatter) {
            const std::int64_t qq = q0 + l / kBRow, c = c0 + (l % kBRow) * kMmaVec;
            const bool in = qq < kdim && c < ndim;
            sT.copy_async<P>(b_at(st) + (l / kBRow) * kMmaLDN + (l % kBRow) * kMmaVec,
                             reinterpret_cast<const P*>(in ? W + (wb[s] + (q0 * g.taps + tap) * g.clg) : W), in);
          } else {
            const std::int64_t c = c0 + l / kCK, qq = q0 + (l % kCK) * kMmaVec;
            const bool in = c < ndim && qq < kdim;
            sT.copy_async<P>(b_at(st) + (l / kCK) * TT::LDK + (l % kCK) * kMmaVec,
                             reinterpret_cast<const P*>(in ? W + (wb[s] + tap * g.clg + q0) : W), in);
          }
        }
        advance();
      };
      async_stage_loop<kStages>(nblk, issue,
                                [&](std::int64_t, int st) { run_step(st, std::bool_constant<kScatter>{}); });
      staged = true;
    }
  }
  if (!staged) {
    // Two LDS stages through registers, one barrier per block step: step
    // blk+1 is loaded into registers before step blk's atoms run and
    // stored into the other stage after them.
    if (nblk > 0) {
      fetch();
      stash(0);
    }
    rt::barrier();
    for (std::int64_t blk = 0; blk < nblk; ++blk) {
      const bool more = blk + 1 < nblk;
      if (more) fetch();
      run_step(static_cast<int>(blk & 1), std::false_type{});
      if (more) {
        stash(static_cast<int>((blk + 1) & 1));
        rt::barrier();
      }
    }
  }
  store_out();
}

}  // namespace kgate::kernels::cv
