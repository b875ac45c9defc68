// conv_mma's GEMM view and its operand iterators: which source elements a
// block step stages, where, and whether they exist. The pipelines
// (conv_mma_tile.hpp) move what an iterator names; the epilogues
// (conv_mma_epilogue.hpp) store what the atoms summed.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_mma_tile.hpp"

namespace kgate::kernels::cv {

// The contract or scatter family as one GEMM, for this workgroup: rows
// decode over extents `ext`; at tap e row i reads source position i*mul +
// off(e) (extents `src`), channels grp*kdim + q of a source row of cstride
// channels; the output has ndim channels per group. The workgroup owns rows
// m0 .. m0 + kMmaBM of stride phase `ph` (scatter) and columns c0 ..
// c0 + kMmaBN of group grp, and split ks of K (GemmArgs::tap_split).
template <bool kScatter>
struct MmaGemm {
  std::int32_t ph[3] = {0, 0, 0}, ext[3], src[3], mul[3];
  std::int64_t kdim, ndim, cstride, M, grp, c0, m0;
  std::int32_t ks;
  KGATE_DEVICE explicit MmaGemm(const GemmArgs& a) {
    const Geom& g = a.g;
    ks = static_cast<std::int32_t>(rt::block_idx().z) % a.splits;
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
    M = std::int64_t{g.n} * ext[0] * ext[1] * ext[2];
    const std::int64_t col_tiles = ceil_div(ndim, kMmaBN);
    grp = rt::block_idx().y / col_tiles;
    c0 = (rt::block_idx().y % col_tiles) * kMmaBN;
    m0 = static_cast<std::int64_t>(rt::block_idx().x) * kMmaBM;
  }
};

// The tap-major operand iterator: a block step is one tap e x kMmaBK
// channels q0 .. of A (the tile's rows at that tap) and B (the weight's
// rows for the tile's columns). Work-item t loads A packs s = 0 ..
// kAPass-1 (row t / kCK + kARows*s, channel pack t % kCK) and B loads s =
// 0 .. kBLoads-1 (load l = t + s*kThreads: contract [output channel l /
// kCK][channel pack l % kCK], scatter [channel l / kBRow][output-channel
// pack l % kBRow], the weight's own order: B is K-major for the scatter
// family). Each A row is decoded once: its source element offset at tap
// offset 0 and its coordinates scaled by mul (a row past M gets
// coordinates far below 0, outside the source at every tap; 32-bit
// coordinates: i*mul + off lies within [-2^30 - 2^24, 3*2^24] for extents,
// pads, kernel and dilation within ConvProblem's limits); each B load's
// weight offset at tap 0, channel 0. Steps advance without a division; per
// tap only the source offsets change.
template <class Tin, int kThreads, bool kScatter>
struct MmaOperands {
  static constexpr int kCK = kMmaBK / kMmaVec;                         // loads per staged A row
  static constexpr int kARows = kThreads / kCK;                        // A rows per pass
  static constexpr int kAPass = kMmaBM / kARows;                       // A loads per work-item
  static constexpr int kBLoads = kMmaBN * kMmaBK / kMmaVec / kThreads;  // B loads per work-item
  static constexpr int kBRow = kMmaBN / kMmaVec;                       // scatter: loads per B row
  static constexpr bool kBKMajor = kScatter;                           // B's natural order is [k][column]

  const Geom& g;
  const MmaGemm<kScatter>& G;
  rt::lds_array<std::int32_t> ptap;  // scatter: the phase's taps (list_phase_taps)
  int t, kc;
  rt::regs<std::int64_t, kAPass> a_base;
  rt::regs<rt::regs<std::int32_t, 3>, kAPass> a_coord;
  rt::regs<std::int64_t, kBLoads> b_base;
  // The block step the next load names: tap number e (contract: its kernel
  // coordinates kk) of [e, e_end), its weight tap, source offsets and their
  // element delta, and channels q0 .. q0 + kMmaBK.
  std::int32_t e, q0 = 0, off[3] = {0, 0, 0}, kk[3];
  std::int64_t e_end, tap = 0, tap_delta = 0;

  // The iterator of split G.ks's taps [e_begin, e_end) of the ntaps taps,
  // positioned at its first step.
  KGATE_DEVICE MmaOperands(const Geom& g_, const MmaGemm<kScatter>& G_, const rt::lds_array<std::int32_t>& ptap_, int t_,
                           std::int64_t e_begin, std::int64_t e_end_)
      : g(g_), G(G_), ptap(ptap_), t(t_), kc(t_ % kCK), e(static_cast<std::int32_t>(e_begin)), e_end(e_end_) {
KGATE_UNROLL
    for (int s = 0; s < kAPass; ++s) {
      const std::int64_t m = G.m0 + t / kCK + kARows * s;
      std::int64_t b, i[3];
      decode_row(m < G.M ? m : G.m0, G.ext, b, i);
KGATE_UNROLL
      for (int x = 0; x < 3; ++x)
        a_coord[s][x] = m < G.M ? static_cast<std::int32_t>(i[x] * G.mul[x]) : -(std::int32_t{1} << 30);
      a_base[s] = (((b * G.src[0] + a_coord[s][0]) * G.src[1] + a_coord[s][1]) * G.src[2] + a_coord[s][2]) * G.cstride + G.grp * G.kdim +
                 kc * kMmaVec;
    }
    // Contract B(q, c) = w[grp*csg + c][tap][q] (rows of channels), scatter
    // B(q, c) = w[grp*csg + q][tap][c] (rows of output channels).
KGATE_UNROLL
    for (int s = 0; s < kBLoads; ++s)
      b_base[s] = kScatter ? (G.grp * g.csg + b_row(s)) * g.taps * g.clg + G.c0 + b_col(s)
                           : (G.grp * g.csg + G.c0 + b_row(s)) * g.taps * g.clg + b_col(s);
    kk[0] = e / (g.K[1] * g.K[2]), kk[1] = (e / g.K[2]) % g.K[1], kk[2] = e % g.K[2];
    if (e < e_end) enter_tap();
  }
  KGATE_DEVICE void enter_tap() {
    if constexpr (kScatter) {
      tap = ptap[4 * e];
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) off[x] = ptap[4 * e + 1 + x];
    } else {
      tap = (std::int64_t{kk[0]} * g.K[1] + kk[1]) * g.K[2] + kk[2];
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) off[x] = kk[x] * g.dil[x] - g.pad[x];
    }
    tap_delta = ((std::int64_t{off[0]} * G.src[1] + off[1]) * G.src[2] + off[2]) * G.cstride;
  }
  // To the next block step.
  KGATE_DEVICE void advance() {
    q0 += kMmaBK;
    if (q0 < G.kdim) return;
    q0 = 0;
    ++e;
    if constexpr (!kScatter) {
      if (++kk[2] == g.K[2]) {
        kk[2] = 0;
        if (++kk[1] == g.K[1]) kk[1] = 0, ++kk[0];
      }
    }
    if (e < e_end) enter_tap();
  }
  // The A row of load s in the block tile.
  KGATE_DEVICE int a_row(int s) const { return t / kCK + kARows * s; }
  // f(s, in, offset, n) for each A load s of the current step: whether it
  // exists (the channel, and at this tap a source position inside the
  // source), its element offset in A and the channels left from it.
  template <class F>
  KGATE_DEVICE void a_loads(F&& f) const {
    const std::int64_t q = q0 + kc * kMmaVec;
KGATE_UNROLL
    for (int s = 0; s < kAPass; ++s) {
      bool in = q < G.kdim;
KGATE_UNROLL
      for (int x = 0; x < 3; ++x)
        in = in && static_cast<std::uint32_t>(a_coord[s][x] + off[x]) < static_cast<std::uint32_t>(G.src[x]);
      f(s, in, a_base[s] + tap_delta + q0, G.kdim - q);
    }
  }
  // B load s's pack in B's natural order: row (contract: output channel;
  // scatter: channel of K) and col (the pack's first element along the row).
  KGATE_DEVICE int b_row(int s) const { return (t + s * kThreads) / (kScatter ? kBRow : kCK); }
  KGATE_DEVICE int b_col(int s) const { return (t + s * kThreads) % (kScatter ? kBRow : kCK) * kMmaVec; }
  // f(s, row, col, in, offset, n) for each B load s of the current step:
  // its pack's place (b_row, b_col), whether it exists, its element offset
  // in the weight and the elements left along the row.
  template <class F>
  KGATE_DEVICE void b_loads(F&& f) const {
KGATE_UNROLL
    for (int s = 0; s < kBLoads; ++s) {
      const int row = b_row(s), col = b_col(s);
      if constexpr (kScatter) {
        const std::int64_t qq = q0 + row, c = G.c0 + col;
        f(s, row, col, qq < G.kdim && c < G.ndim, b_base[s] + (q0 * g.taps + tap) * g.clg, G.ndim - c);
      } else {
        const std::int64_t c = G.c0 + row, qq = q0 + col;
        f(s, row, col, c < G.ndim && qq < G.kdim, b_base[s] + tap * g.clg + q0, G.kdim - qq);
      }
    }
  }
};

// The W-halo operand iterator (halo_taps; asynchronous copies only): a
// block step is one (kd, kh) pair x kHaloBK channels: staged rows
// [segment][seg + (wtaps-1)*dil] of A, then wtaps B tiles, one per W tap.
// Work-item t copies pack pack = t % kHP of staged rows t/kHP + kHR*s, each
// decoded once: its source position at (kd, kh) = (0, 0) less that pair's
// offsets (W: the staged run's own position, checked once), and one pack
// of every W tap's B tile (contract: pack pack of output channel t/kHP;
// scatter: pack t % kBRow of channel t / kBRow). Source offsets: contract
// k*dil - pad, scatter pad - k*dil; the staged run starts at the W tap of
// the lowest offset (contract kw = 0, scatter kw = KW - 1).
template <class Tin, int kThreads, bool kScatter>
struct MmaHaloOperands {
  static constexpr int kHP = kHaloBK / kMmaVec;                  // packs per staged row
  static constexpr int kHR = kThreads / kHP;                     // staged rows per pass
  static constexpr int kHPass = (kHaloRows + kHR - 1) / kHR;     // staged rows per work-item
  static constexpr int kBRow = kMmaBN / kMmaVec;                 // scatter: packs per B row
  static_assert(kHR == kMmaBN && kHaloBK * kBRow == kThreads && kHaloBK * kMmaLDN <= kMmaBN * kHaloLDK);
  KGATE_HD static constexpr int a_at(int st) { return st * kHaloStage; }
  KGATE_HD static constexpr int b_at(int st) { return st * kHaloStage + kHaloStageA; }

  const Geom& g;
  const MmaGemm<kScatter>& G;
  int t, pack;
  std::int32_t wtaps, seg, run, rows;  // W taps, segment, staged run, staged rows of the tile
  rt::regs<std::int64_t, kHPass> a_base;
  rt::regs<rt::regs<std::int32_t, 2>, kHPass> row_dh;
  rt::regs<bool, kHPass> row_live;
  bool b_live;         // this work-item's B pack has output channels
  std::int64_t b_base;  // its B pack's weight offset at the kw = 0 tap of pair (0, 0), channel 0
  // The step the next issue copies: channels q0.., pair (kd, kh) = kdh, its
  // source offsets pair_off, their element delta and its kw = 0 tap.
  std::int32_t q0 = 0, kdh[2] = {0, 0}, pair_off[2] = {0, 0};
  std::int64_t pair_delta = 0, pair_tap = 0;

  KGATE_DEVICE MmaHaloOperands(const GemmArgs& a, const MmaGemm<kScatter>& G_, int t_)
      : g(a.g), G(G_), t(t_), pack(t_ % kHP), wtaps(a.halo_taps), seg(a.halo_seg) {
    run = seg + (wtaps - 1) * g.dil[2];
    rows = (kMmaBM / seg) * run;
    const std::int32_t w_lo = kScatter ? g.pad[2] - (wtaps - 1) * g.dil[2] : -g.pad[2];
KGATE_UNROLL
    for (int s = 0; s < kHPass; ++s) {
      const std::int32_t j = t / kHP + kHR * s, sg = j / run;
      const std::int64_t m = G.m0 + std::int64_t{sg} * seg;
      std::int64_t b, i[3];
      decode_row(j < rows && m < G.M ? m : G.m0, G.ext, b, i);
      const std::int32_t w = static_cast<std::int32_t>(i[2]) + (j - sg * run) + w_lo;
      row_live[s] = j < rows && m < G.M && static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(G.src[2]);
      row_dh[s][0] = static_cast<std::int32_t>(i[0] * G.mul[0]);
      row_dh[s][1] = static_cast<std::int32_t>(i[1] * G.mul[1]);
      a_base[s] = (((b * G.src[0] + row_dh[s][0]) * G.src[1] + row_dh[s][1]) * G.src[2] + w) * G.cstride + G.grp * G.kdim +
                  pack * kMmaVec;
    }
    b_live = kScatter ? G.c0 + (t % kBRow) * kMmaVec < G.ndim : G.c0 + t / kHP < G.ndim;
    b_base = kScatter ? (G.grp * g.csg + t / kBRow) * g.taps * g.clg + G.c0 + (t % kBRow) * kMmaVec
                      : (G.grp * g.csg + G.c0 + t / kHP) * g.taps * g.clg + pack * kMmaVec;
    enter_pair();
  }
  KGATE_DEVICE void enter_pair() {
    const std::int32_t sgn = kScatter ? -1 : 1;
KGATE_UNROLL
    for (int x = 0; x < 2; ++x) pair_off[x] = sgn * (kdh[x] * g.dil[x] - g.pad[x]);
    pair_delta = (std::int64_t{pair_off[0]} * G.src[1] + pair_off[1]) * G.src[2] * G.cstride;
    pair_tap = (std::int64_t{kdh[0]} * g.K[1] + kdh[1]) * g.K[2];
  }
  // Block steps of the tile: (kd, kh) pairs x channel blocks.
  KGATE_DEVICE std::int64_t steps() const { return std::int64_t{g.K[0]} * g.K[1] * ceil_div(G.kdim, kHaloBK); }
  // Copies the current step into stage st (sT.copy_async) and advances.
  KGATE_DEVICE void issue(const rt::lds_array<std::uint16_t>& sT, const Tin* A, const Tin* W, int st) {
    using P = Pack<Tin, kMmaVec>;
    const bool qin = q0 + pack * kMmaVec < G.kdim;  // A's pack (contract: also B's)
KGATE_UNROLL
    for (int s = 0; s < kHPass; ++s) {
      const std::int32_t j = t / kHP + kHR * s;
      if (j >= rows) break;  // no atom reads it (rows ascend with s)
      const bool in = qin && row_live[s] && static_cast<std::uint32_t>(row_dh[s][0] + pair_off[0]) < static_cast<std::uint32_t>(G.src[0]) &&
                      static_cast<std::uint32_t>(row_dh[s][1] + pair_off[1]) < static_cast<std::uint32_t>(G.src[1]);
      sT.copy_async<P>(a_at(st) + j * kHaloLDK + pack * kMmaVec,
                                reinterpret_cast<const P*>(in ? A + (a_base[s] + pair_delta + q0) : A), in);
    }
KGATE_UNROLL
    for (int kw = 0; kw < kHaloTaps; ++kw) {
      if (kw >= wtaps) break;
      if constexpr (kScatter) {
        const bool in = q0 + t / kBRow < G.kdim && b_live;
        sT.copy_async<P>(b_at(st) + kw * kMmaBN * kHaloLDK + (t / kBRow) * kMmaLDN + (t % kBRow) * kMmaVec,
                                  reinterpret_cast<const P*>(in ? W + (b_base + q0 * g.taps * g.clg + (pair_tap + kw) * g.clg) : W), in);
      } else {
        const bool in = qin && b_live;
        sT.copy_async<P>(b_at(st) + (kw * kMmaBN + t / kHP) * kHaloLDK + pack * kMmaVec,
                                  reinterpret_cast<const P*>(in ? W + (b_base + (pair_tap + kw) * g.clg + q0) : W), in);
      }
    }
    q0 += kHaloBK;
    if (q0 < G.kdim) return;
    q0 = 0;
    if (++kdh[1] == g.K[1]) kdh[1] = 0, ++kdh[0];
    if (kdh[0] < g.K[0]) enter_pair();
  }
  // The staged row of block-tile row r (the first row of an atom: an
  // atom's rows lie in one segment) at W tap kw = 0 of the run.
  KGATE_DEVICE std::int32_t staged_row(std::int32_t r) const { return (r / seg) * run + r % seg; }
};

}  // namespace kgate::kernels::cv
