// conv_wgrad_mma: backward-weight on matrix cores (and its W-halo tile).
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_mma_tile.hpp"

namespace kgate::kernels::cv {

// ---------------------------------------------------------------------------
// Backward-weight on matrix cores: per group, the GEMM
//   C[m][c] = sum_{rows r of the slice} large[r at tap(m)][ci(m)] * small[r][c]
// with m = tap*clg + ci over every tap and large channel of the group (the
// block tile's 128 side: taps x clg is the long one in every layer) and c
// over the group's small channels (the 64 side), K = the split's slice of
// rows (n, i) in blocks of kMmaBK rows; grid (m tiles, groups x c tiles,
// splits). Both operands arrive with M or N contiguous and K strided: sm_90
// atoms with 16-byte runs stage them so, K-major, by asynchronous copies
// three stages deep and read them with the K-major fragment loads; gfx942
// atoms (and element loads) go through registers and the stash transposes
// them into the [row][k] layout. The M side counts each tap's large
// channels padded to whole packs of 8 (clgp; 4 where a tap has at most 4:
// wgrad_apack), so that a pack of m columns lies in one tap (one load of
// up to 8 channels; where clg is not
// a multiple of 8, element loads, the padding columns holding copies of the
// tap's last channel: their sums are never stored). Rows past the slice and
// taps that fall into the padding load as +0. Each output is one chain over
// the slice's rows in atom-K chunks (the last
// chunk holding a row ends it); the slice's fp32 partial goes to
// ws[split][c][tap][ci] exactly as conv_wgrad writes it, for conv_tree.

// A row of backward-weight's K (n, i) as conv_wgrad_mma's asynchronous
// copies walk it: its coordinates c = (b, i0, i1, i2) and `off`, the element
// offset of large position (b, i*stride) in the large tensor, advanced by
// kMmaBK rows per block step without a division or a product (each carry
// adds its precomputed delta). A row at or past K starts as row 0; the
// callers load no row past their slice.
struct WgradRowCursor {
  std::int32_t c[4];
  std::int64_t off;
  std::int64_t dstep, d2, d1, d0;  // i2 += kMmaBK; i2 -= S2, i1 += 1; i1 -= S1, i0 += 1; i0 -= S0, b += 1
  [[gnu::always_inline]] KGATE_DEVICE WgradRowCursor(const Geom& g, std::int64_t row, std::int64_t K) {
    std::int64_t b, i[3];
    decode_row(row < K ? row : 0, g.S, b, i);
    c[0] = static_cast<std::int32_t>(b);
KGATE_UNROLL
    for (int x = 0; x < 3; ++x) c[1 + x] = static_cast<std::int32_t>(i[x]);
    off = (((b * g.L[0] + i[0] * g.stride[0]) * g.L[1] + i[1] * g.stride[1]) * g.L[2] + i[2] * g.stride[2]) * g.cl;
    const std::int64_t cl = g.cl, l2 = g.L[2] * cl, l12 = g.L[1] * l2;
    dstep = std::int64_t{kMmaBK} * g.stride[2] * cl;
    d2 = std::int64_t{g.stride[1]} * l2 - std::int64_t{g.S[2]} * g.stride[2] * cl;
    d1 = std::int64_t{g.stride[0]} * l12 - std::int64_t{g.S[1]} * g.stride[1] * l2;
    d0 = g.L[0] * l12 - std::int64_t{g.S[0]} * g.stride[0] * l12;
  }
  [[gnu::always_inline]] KGATE_DEVICE void step(const Geom& g) {
    c[3] += kMmaBK;
    off += dstep;
    while (c[3] >= g.S[2]) c[3] -= g.S[2], ++c[2], off += d2;
    while (c[2] >= g.S[1]) c[2] -= g.S[1], ++c[1], off += d1;
    while (c[1] >= g.S[0]) c[1] -= g.S[0], ++c[0], off += d0;
  }
};

// conv_wgrad_mma's W-halo tile (wgrad_halo_seg), asynchronous copies
// kStages deep: per block step, the staged large rows [segment][seg +
// (KW-1)*dil][kWgradHaloCB channels] at sA (pitch kMmaLDN) and the small
// rows [row of K][kMmaBN channels] at sB (pitch kMmaLDN), both K-major.
// Grid x: (kd, kh) pairs x large-channel blocks, y: groups x small-channel
// tiles, z: splits. The eight warps hold 48 x 32 of the 192 x 64 tile, so
// an atom's 16 rows lie in one W tap (kWgradHaloCB is whole atoms).
template <class Atom>
struct WgradHaloTile {  // the wave grid (mma_atoms reads AM, AN)
  static constexpr int WTM = 48, WTN = kMmaWaveTileN, AM = WTM / Atom::M, AN = WTN / Atom::N;
  static constexpr int WM = kWgradHaloM / WTM, WN = kMmaBN / WTN;
};
template <class Atom, class Tin>
KGATE_DEVICE void wgrad_halo_tile(const WgradArgs& a, const rt::lds_array<std::uint16_t>& sA,
                                  const rt::lds_array<std::uint16_t>& sB, int t) {
  namespace mma = kgate::rt::mma;
  using Tile = WgradHaloTile<Atom>;
  using TT = MmaTile<Atom, kWgradWide>;
  static_assert(Tile::AM * Atom::M == Tile::WTM && Tile::WM * Tile::WTM == kWgradHaloM && Tile::WN * Tile::WTN == kMmaBN &&
                Tile::WM * Tile::WN * Atom::lanes == TT::kThreads && kWgradHaloCB % Atom::M == 0);
  static_assert(kHaloMinSeg % Atom::K == 0 && kMmaBK % Atom::K == 0);
  static_assert(kWgradHaloRows * kMmaLDN <= TT::kASize && kMmaBK * kMmaLDN <= TT::kBSize);  // fit the stages
  using P = Pack<Tin, kMmaVec>;
  constexpr int kStages = TT::kStages;
  constexpr int kCP = kWgradHaloCB / kMmaVec;  // packs per staged row (A) and per B row
  static_assert(kCP == kMmaBN / kMmaVec && TT::kThreads / kCP == kMmaBK);  // a slot per row of K, one B pack each
  const Geom& g = a.g;
  const std::int32_t seg = a.halo_seg, hw = seg + (g.K[2] - 1) * g.dil[2];  // hw <= 2*seg (kWgradHaloRows)
  const std::int64_t cblocks = g.clg / kWgradHaloCB;
  const std::int64_t pair = rt::block_idx().x / cblocks, ci0 = (rt::block_idx().x % cblocks) * kWgradHaloCB;
  const std::int32_t kd = static_cast<std::int32_t>(pair / g.K[1]), kh = static_cast<std::int32_t>(pair % g.K[1]);
  const std::int64_t col_tiles = ceil_div(g.csg, kMmaBN);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kMmaBN;
  const std::int64_t split = rt::block_idx().z;
  const std::int64_t K = std::int64_t{g.n} * g.s_pos;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < K ? r_begin + a.slice : K;
  const std::int64_t nblk = r_end > r_begin ? ceil_div(r_end - r_begin, kMmaBK) : 0;
  const int hc = t % kCP, wave = t / Atom::lanes, wm = wave % Tile::WM, wn = wave / Tile::WM;
  const std::int32_t okd = kd * g.dil[0] - g.pad[0], okh = kh * g.dil[1] - g.pad[1];
  const Tin* large0 = static_cast<const Tin*>(a.large);
  const Tin* small0 = static_cast<const Tin*>(a.small);
  const std::int64_t cl = g.cl, l2 = g.L[2] * cl;
  // This work-item's staged rows: slot t / kCP of kMmaBK, seg slots per
  // segment (segment sg = slot / seg), run positions r = slot % seg and r +
  // seg (where the run is that long: hw <= 2*seg), channels pack hc. One
  // segment per work-item, so one position to track: the (b, i) of the
  // segment's first row and the element offset of large position (b,
  // i*stride) there, advanced by kMmaBK rows per step (WgradRowCursor, as
  // the tap-major copies), and the rows' fixed offset: the pair's D and H
  // offsets, the first row's W position in the run, its channels.
  const std::int32_t slot = t / kCP, sg = slot / seg, jr = slot - sg * seg;
  const bool second = jr + seg < hw;
  const std::int32_t jw = jr - g.pad[2];  // W offset of the first row from its segment's start
  std::int64_t rseg = r_begin + std::int64_t{sg} * seg;
  WgradRowCursor rc(g, rseg, K);  // W stride 1
  const std::int64_t toff = (std::int64_t{okd} * g.L[1] + okh) * l2 + std::int64_t{jw} * cl + grp * g.clg + ci0 + hc * kMmaVec;
  const int arun = (sg * hw + jr) * kMmaLDN + hc * kMmaVec;  // the first row's place in a stage
  // B: row t / kCP of the step, pack hc.
  const int kr = t / kCP;
  const bool bcol = c0 + hc * kMmaVec < g.csg;
  std::int64_t brow = r_begin + kr;
  const Tin* sp = small0 + brow * g.cs + grp * g.csg + c0 + hc * kMmaVec;
  auto issue = [&](std::int64_t, int st) {
    // The segment lies in the slice or past it (slices are whole steps,
    // S's W whole segments); a row's position in the padding is +0.
    const bool dh = rseg < r_end && static_cast<std::uint32_t>(rc.c[1] * g.stride[0] + okd) < static_cast<std::uint32_t>(g.L[0]) &&
                    static_cast<std::uint32_t>(rc.c[2] * g.stride[1] + okh) < static_cast<std::uint32_t>(g.L[1]);
KGATE_UNROLL
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && !second) break;
      const bool in = dh && static_cast<std::uint32_t>(rc.c[3] + jw + h * seg) < static_cast<std::uint32_t>(g.L[2]);
      sA.copy_async<P>(st * TT::kASize + arun + h * seg * kMmaLDN,
                       reinterpret_cast<const P*>(in ? large0 + (rc.off + toff + h * seg * cl) : large0), in);
    }
    rseg += kMmaBK;
    rc.step(g);
    const bool in = bcol && brow < r_end;
    sB.copy_async<P>(st * TT::kBSize + kr * kMmaLDN + hc * kMmaVec, reinterpret_cast<const P*>(in ? sp : small0), in);
    brow += kMmaBK;
    sp += kMmaBK * std::int64_t{g.cs};
  };
  // The staged row of each of the warp's atoms at chunk 0, W tap 0, and
  // its column (large channel) in the run; an atom's rows lie in one W tap.
  std::int32_t arow[Tile::AM], acol[Tile::AM];
KGATE_UNROLL
  for (int u = 0; u < Tile::AM; ++u) {
    const int m = wm * Tile::WTM + u * Atom::M;
    arow[u] = (m / kWgradHaloCB) * g.dil[2];
    acol[u] = m % kWgradHaloCB;
  }
  MmaAcc<Atom, Tile::AM, Tile::AN> acc;
KGATE_UNROLL
  for (int u = 0; u < Tile::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < Tile::AN; ++v) acc[u][v] = rt::mma::zero_c<Atom>();
  auto chunk = [&](int st, int kk) {
    const std::int32_t r = kk * Atom::K, srow = (r / seg) * hw + r % seg;  // the chunk's rows lie in one segment
    mma_atoms<Atom, Tile>(
        [&](int u) { return mma::load_a_lds_kmajor<Atom>(sA, st * TT::kASize + (srow + arow[u]) * kMmaLDN + acol[u], kMmaLDN); },
        [&](int v) {
          return mma::load_b_lds_kmajor<Atom>(sB, st * TT::kBSize + r * kMmaLDN + wn * Tile::WTN + v * Atom::N, kMmaLDN);
        },
        acc);
  };
  constexpr int kChunks = kMmaBK / Atom::K;
  async_stage_loop<kStages>(nblk, issue, [&](std::int64_t blk, int st) {
    // As mma_block_step: whole steps without a branch between chunks, the
    // chain stopped after the last chunk holding a row of the slice.
    const std::int64_t chunks = ceil_div(r_end - (r_begin + blk * kMmaBK), Atom::K);
    if (chunks >= kChunks) {
KGATE_UNROLL
      for (int kk = 0; kk < kChunks; ++kk) chunk(st, kk);
    } else {
      for (int kk = 0; kk < kChunks && kk < chunks; ++kk) chunk(st, kk);
    }
  });
  float* out = a.ws + split * (std::int64_t{g.cs} * g.taps * g.clg);
  const std::int64_t tap0 = pair * g.K[2];
KGATE_UNROLL
  for (int u = 0; u < Tile::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < Tile::AN; ++v)
      rt::mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
        const int m = wm * Tile::WTM + u * Atom::M + i;
        const std::int64_t cc = c0 + wn * Tile::WTN + v * Atom::N + j;
        if (cc >= g.csg) return;
        out[(grp * g.csg + cc) * g.taps * g.clg + (tap0 + m / kWgradHaloCB) * g.clg + ci0 + m % kWgradHaloCB] = y;
      });
}

// kAV: the A packs' width (wgrad_apack; the asynchronous paths take 8).
template <class Atom, class Tin, int kAV = kMmaVec>
KGATE_KERNEL_OCCUPANCY(conv_wgrad_mma, (MmaTile<Atom, kWgradWide>::kThreads), kMmaMinBlocks, WgradArgs a) {
  using TT = MmaTile<Atom, kWgradWide>;
  constexpr int kMmaThreads = TT::kThreads;
  using P = Pack<Tin, kMmaVec>;
  using PA = Pack<Tin, kAV>;
  constexpr int kAPacks = kMmaBM / kAV;                        // packs per A row (m)
  constexpr int kBPacks = kMmaBN / kMmaVec;                    // packs per B row (c)
  constexpr int kAPass = kMmaBK * kAPacks / kMmaThreads;       // A loads per work-item
  constexpr int kBPass = kMmaBK * kBPacks / kMmaThreads;       // B loads per work-item
  static_assert(kAPass * (kMmaThreads / kAPacks) == kMmaBK && kBPass * (kMmaThreads / kBPacks) == kMmaBK);
  static_assert(TT::LDK % kAPass == 0 && TT::LDK % kBPass == 0);  // aligned transposed stores
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const std::int64_t mdim = g.taps * g.clg;                     // dw columns per small channel
  // Large channels per tap on the M side; the plan keeps taps x clgp below
  // 2^31 (32-bit column arithmetic).
  static_assert(kAV == kMmaVec || kAV == 4);
  const std::int32_t clgp = static_cast<std::int32_t>(ceil_div(g.clg, kAV) * kAV);
  const std::int64_t col_tiles = ceil_div(g.csg, kMmaBN);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kMmaBN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kMmaBM;
  const std::int64_t split = rt::block_idx().z;
  const std::int64_t K = std::int64_t{g.n} * g.s_pos;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < K ? r_begin + a.slice : K;
  constexpr int kStages = TT::kStages;
  KGATE_LDS(sA, std::uint16_t, kStages * TT::kASize);
  KGATE_LDS(sB, std::uint16_t, kStages * TT::kBSize);
  if constexpr (kStages > 2 && kAV == kMmaVec) {
    if (a.halo_seg > 0) {
      wgrad_halo_tile<Atom, Tin>(a, sA, sB, t);
      return;
    }
  }
  // The tap offsets of large channel column m (in KD, KH, KW order).
  auto offsets_of = [&](std::int64_t m, std::int32_t (&off)[3]) {
    const std::int64_t tap = m / clgp;
    const std::int32_t k2 = static_cast<std::int32_t>(tap % g.K[2]), k1 = static_cast<std::int32_t>((tap / g.K[2]) % g.K[1]),
                       k0 = static_cast<std::int32_t>(tap / (std::int64_t{g.K[2]} * g.K[1]));
    off[0] = k0 * g.dil[0] - g.pad[0];
    off[1] = k1 * g.dil[1] - g.pad[1];
    off[2] = k2 * g.dil[2] - g.pad[2];
  };
  const int wave = t / Atom::lanes, wm = wave % TT::WM, wn = wave / TT::WM;
  MmaAcc<Atom, TT::AM, TT::AN> acc;
KGATE_UNROLL
  for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < TT::AN; ++v) acc[u][v] = rt::mma::zero_c<Atom>();
  const std::int64_t nblk = r_end > r_begin ? ceil_div(r_end - r_begin, kMmaBK) : 0;
  auto store_out = [&] {
    float* out = a.ws + split * (std::int64_t{g.cs} * mdim);
KGATE_UNROLL
    for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
      for (int v = 0; v < TT::AN; ++v)
        rt::mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
          const std::int64_t m = m0 + wm * TT::WTM + u * Atom::M + i, c = c0 + wn * TT::WTN + v * Atom::N + j;
          if (c >= g.csg) return;
          const std::uint32_t tap = static_cast<std::uint32_t>(m) / static_cast<std::uint32_t>(clgp),
                              ci = static_cast<std::uint32_t>(m) - tap * static_cast<std::uint32_t>(clgp);
          if (tap >= static_cast<std::uint32_t>(g.taps) || ci >= static_cast<std::uint32_t>(g.clg)) return;  // past M, a padding column
          out[(grp * g.csg + c) * mdim + std::int64_t{tap} * g.clg + ci] = y;
        });
  };
  if constexpr (kStages > 2 && kAV == kMmaVec) {
    if (a.wide) {
      // Asynchronous copies kStages deep (async_stage_loop): both operands
      // are staged as they arrive, K-major (A: [row of K][m] with pitch
      // kMmaLDM, B: [row of K][c] with pitch kMmaLDN), and read with the
      // K-major fragment loads; rows past the slice and padding taps are
      // zero-filled. A work-item copies within one row of K (kRowT of them
      // share a row): kAP packs of A and kBP of B, so that the row's
      // position is advanced and its offset formed once per block step for
      // all of them (the copies' address arithmetic, not the atoms, is most
      // of this kernel's instructions).
      constexpr int kRowT = kMmaThreads / kMmaBK;
      constexpr int kAP = kAPacks / kRowT, kBP = kBPacks / kRowT;
      static_assert(kRowT * kMmaBK == kMmaThreads && kAP * kRowT == kAPacks && kBP * kRowT == kBPacks);
      const int kr = t / kRowT, kp = t % kRowT;
      const Tin* large0 = static_cast<const Tin*>(a.large);
      const Tin* small0 = static_cast<const Tin*>(a.small);
      // A pack u: columns m0 + (kp*kAP + u)*8 .. +7 (one tap), its tap
      // offsets and the element offset of that tap and channel relative to
      // its row's position (negative offsets are fine: a position inside
      // the large tensor is checked before the sum is used).
      std::int32_t uoff[kAP][3];
      std::int64_t utap[kAP];
      bool ulive[kAP];
KGATE_UNROLL
      for (int u = 0; u < kAP; ++u) {
        const std::int64_t m = m0 + (kp * kAP + u) * kMmaVec;
        ulive[u] = m < std::int64_t{g.taps} * clgp;
        uoff[u][0] = uoff[u][1] = uoff[u][2] = 0;
        if (ulive[u]) offsets_of(m, uoff[u]);
        utap[u] = ((std::int64_t{uoff[u][0]} * g.L[1] + uoff[u][1]) * g.L[2] + uoff[u][2]) * g.cl + grp * g.clg + m % clgp;
      }
      // The row this work-item copies in the next block step.
      WgradRowCursor rc(g, r_begin + kr, K);
      const Tin* sp = small0 + (r_begin + kr) * g.cs + grp * g.csg + c0 + kp * kBP * kMmaVec;
      const std::int64_t cbp = c0 + kp * kBP * kMmaVec;  // this work-item's first B channel
      auto issue = [&](std::int64_t b, int st) {
        const bool row_in = kr < r_end - (r_begin + b * kMmaBK);
KGATE_UNROLL
        for (int u = 0; u < kAP; ++u) {
          bool in = row_in && ulive[u];
KGATE_UNROLL
          for (int x = 0; x < 3; ++x)
            in = in && static_cast<std::uint32_t>(rc.c[1 + x] * g.stride[x] + uoff[u][x]) < static_cast<std::uint32_t>(g.L[x]);
          sA.copy_async<P>(st * TT::kASize + kr * kMmaLDM + (kp * kAP + u) * kMmaVec,
                           reinterpret_cast<const P*>(in ? large0 + (rc.off + utap[u]) : large0), in);
        }
KGATE_UNROLL
        for (int v = 0; v < kBP; ++v) {
          const bool in = row_in && cbp + v * kMmaVec < g.csg;
          sB.copy_async<P>(st * TT::kBSize + kr * kMmaLDN + (kp * kBP + v) * kMmaVec,
                           reinterpret_cast<const P*>(in ? sp + v * kMmaVec : small0), in);
        }
        // The next step's row.
        sp += kMmaBK * std::int64_t{g.cs};
        rc.step(g);
      };
      async_stage_loop<kStages>(nblk, issue, [&](std::int64_t blk, int st) {
        mma_block_step<Atom, TT, true, true, false>(sA, st * TT::kASize, sB, st * TT::kBSize, wm, wn,
                                         ceil_div(r_end - (r_begin + blk * kMmaBK), Atom::K), acc);
      });
      store_out();
      return;
    }
  }
  // This work-item's A pack: columns ma .. ma+kAV-1 (one tap: clgp is
  // whole packs), large channels ma % clgp .. of which acount exist, and
  // its B pack: small channels cb .. cb+7.
  const std::int64_t ma = m0 + (t % kAPacks) * kAV;
  const bool a_live = ma < std::int64_t{g.taps} * clgp;
  std::int32_t aoff[3] = {0, 0, 0};
  if (a_live) offsets_of(ma, aoff);
  const std::int64_t acount = g.clg - ma % clgp;
  const std::int64_t cb = c0 + (t % kBPacks) * kMmaVec;
  const Tin* Lg = static_cast<const Tin*>(a.large) + grp * g.clg + ma % clgp;
  const Tin* Sm = static_cast<const Tin*>(a.small) + grp * g.csg + cb;
  // The offset of large position i*stride + off of batch b, or -1 in the padding.
  // (32-bit coordinates: i*stride + off stays below 2^31 for extents and
  // strides below 2^24 whose output is not empty.)
  auto large_at = [&](const std::int32_t (&c)[4], const std::int32_t (&off)[3]) -> std::int64_t {
    const std::int32_t j0 = c[1] * g.stride[0] + off[0], j1 = c[2] * g.stride[1] + off[1], j2 = c[3] * g.stride[2] + off[2];
    if (j0 < 0 || j0 >= g.L[0] || j1 < 0 || j1 >= g.L[1] || j2 < 0 || j2 >= g.L[2]) return -1;
    return (((std::int64_t{c[0]} * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl;
  };
  // This work-item stages kAPass consecutive A rows (K) from r0 + ra and
  // kBPass consecutive B rows from r0 + rb, so that the transposed stash
  // writes each column's rows as one LDS store. The coordinates (b, i) of
  // its first A row are decoded once at the slice's start and advanced by
  // one block step per fetch without a division (32-bit: extents and the
  // batch are below 2^24).
  const int ra = (t / kAPacks) * kAPass, rb = (t / kBPacks) * kBPass;
  std::int32_t rc[4];
  {
    std::int64_t b, i[3];
    decode_row(r_begin + ra, g.S, b, i);
    rc[0] = static_cast<std::int32_t>(b);
KGATE_UNROLL
    for (int x = 0; x < 3; ++x) rc[1 + x] = static_cast<std::int32_t>(i[x]);
  }
  // (b, i) `by` rows further.
  auto next_row = [&](std::int32_t (&c)[4], std::int32_t by) {
    c[3] += by;
    while (c[3] >= g.S[2]) c[3] -= g.S[2], ++c[2];
    while (c[2] >= g.S[1]) c[2] -= g.S[1], ++c[1];
    while (c[1] >= g.S[0]) c[1] -= g.S[0], ++c[0];
  };
  PA pa[kAPass];
  P pb[kBPass];
  // B rows advance by a pointer (kMmaBK rows of cs channels per step).
  const Tin* sp = Sm + (r_begin + rb) * g.cs;
  // The position of block step r0 (called for r_begin, then each next step).
  auto step_to = [&](std::int64_t r0) {
    if (r0 != r_begin) {
      next_row(rc, kMmaBK);
      sp += kMmaBK * std::int64_t{g.cs};
    }
  };
  auto fetch = [&](std::int64_t r0) {
    step_to(r0);
    const std::int64_t left = r_end - r0;  // rows of the slice from r0
    std::int32_t c[4] = {rc[0], rc[1], rc[2], rc[3]};
KGATE_UNROLL
    for (int s = 0; s < kAPass; ++s) {
      if (s > 0) next_row(c, 1);
      pa[s] = PA{};
      if (ra + s >= left || !a_live) continue;
      const std::int64_t at = large_at(c, aoff);
      if (at >= 0) pa[s] = load_pack_clamped<Tin, kAV>(Lg + at, acount, a.wide);  // columns past clg: padding
    }
KGATE_UNROLL
    for (int s = 0; s < kBPass; ++s)
      pb[s] = rb + s < left && cb < g.csg ? load_pack(sp + s * std::int64_t{g.cs}, g.csg - cb, a.wide || a.wide_small) : P{};
  };
  // Registers to LDS stage st, transposed to [column][row of K]: per
  // column, this work-item's consecutive rows in one store.
  auto stash = [&](int st) {
KGATE_UNROLL
    for (int e = 0; e < kAV; ++e) {
      Pack<std::uint16_t, kAPass> va;
KGATE_UNROLL
      for (int s = 0; s < kAPass; ++s) va.v[s] = bits_of(pa[s].v[e]);
      sA.store(st * TT::kASize + ((t % kAPacks) * kAV + e) * TT::LDK + ra, va);
    }
KGATE_UNROLL
    for (int e = 0; e < kMmaVec; ++e) {
      Pack<std::uint16_t, kBPass> vb;
KGATE_UNROLL
      for (int s = 0; s < kBPass; ++s) vb.v[s] = bits_of(pb[s].v[e]);
      sB.store(st * TT::kBSize + ((t % kBPacks) * kMmaVec + e) * TT::LDK + rb, vb);
    }
  };
  // Two stages through registers (register_stage_loop), transposed on the
  // way into LDS.
  register_stage_loop(
      nblk, [&](std::int64_t blk) { fetch(r_begin + blk * kMmaBK); }, stash,
      [&](std::int64_t blk, int st) {
        const std::int64_t r0 = r_begin + blk * kMmaBK;
        mma_block_step<Atom, TT>(sA, st * TT::kASize, sB, st * TT::kBSize, wm, wn, ceil_div(r_end - r0, Atom::K), acc);
      });
  store_out();
}

}  // namespace kgate::kernels::cv
