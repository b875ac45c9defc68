// The matrix-core block tile shared by conv_mma and conv_wgrad_mma: its
// constants, the W-halo rules, the LDS stages, the wave grid, the operand
// loads, the asynchronous staging loop and one block step of atoms.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_common.hpp"

namespace kgate::kernels::cv {

// ---------------------------------------------------------------------------
// Matrix cores: the contract and scatter families as one workgroup-tiled
// implicit GEMM (the header's "Matrix cores" paragraph).

inline constexpr int kMmaBM = 128, kMmaBN = 64;  // block tile: GEMM rows x output channels
inline constexpr int kMmaBK = 32;                // channels of one tap staged per block step
inline constexpr int kMmaVec = 8;                // elements per 16-byte load
// Workgroups of conv_wgrad_mma per multiprocessor the CUDA compiler must fit
// in registers (it waits on global and LDS latency that only more resident
// warps hide).
inline constexpr int kMmaMinBlocks = 2;
inline constexpr int kMmaLDK = kMmaBK + 8;  // LDS row pitch of a staged operand (MmaTile)
// LDS row pitches of K-major staged operands (K rows of M or N contiguous):
// 272- and 144-byte rows (16 bytes past a multiple of 128) put the eight
// row reads of one fragment load in distinct banks, as LDK's 80-byte rows do.
inline constexpr int kMmaLDM = kMmaBM + 8, kMmaLDN = kMmaBN + 8;
static_assert(kMmaBK * kMmaLDM <= kMmaBM * kMmaLDK && kMmaBK * kMmaLDN <= kMmaBN * kMmaLDK);  // fit a stage
// conv_mma's LDS stages, a function of the atom's target: sm_90 fills them
// with asynchronous copies (cp.async), three deep, so that two block steps'
// loads are in flight while one step's atoms run; gfx942 has no 16-byte
// asynchronous copy and stages through registers into two (the next step's
// loads in flight during the current step's atoms).
KGATE_HD constexpr int mma_stages(rt::Target t) { return t == rt::Target::sm90 ? 3 : 2; }

// The W-halo block step of conv_mma (asynchronous copies only): where the W
// axis has stride 1 (the scatter family: every axis, one stride phase with
// every tap) and 2 .. kHaloTaps taps, a block step
// stages the source rows its tile reads at every W tap once, kHaloBK
// channels wide: the tile's GEMM rows are whole runs ("segments") of seg =
// min(output W, kMmaBM) consecutive output positions along W (seg divides
// kMmaBM or output W is a multiple of kMmaBM), and a segment's source row at
// W tap kw is the staged run seg + (KW - 1)*dil long, shifted by kw*dil
// (scatter: by (KW - 1 - kw)*dil, its offsets pad - kw*dil descending). So
// one step covers KW taps of one (kd, kh) pair, and each source row leaves
// L2 once per (kd, kh) instead of once per tap. The chain of each output
// runs (kd, kh) pairs, then channels in blocks of kHaloBK (one atom K), then
// W taps: the same terms and chain length as the tap-major step, in another
// order (ReductionPlan counts the chain, not its order).
inline constexpr int kHaloBK = 16;            // channels per halo block step: one sm_90 atom K
inline constexpr int kHaloTaps = 3;           // most W taps one halo step holds
inline constexpr int kHaloRows = 160;         // most staged source rows of a step
inline constexpr int kHaloMinSeg = 16;        // shortest segment: whole sm_90 atoms of rows lie in one
inline constexpr int kHaloLDK = kHaloBK + 8;  // row pitch: 48-byte rows, eight row reads in distinct banks
// One stage of the halo step, in elements: kHaloRows staged rows, then
// kHaloTaps B tiles of kMmaBN output channels (contract: [output
// channel][channel] with pitch kHaloLDK; scatter: K-major, [channel][output
// channel] with pitch kMmaLDN).
inline constexpr int kHaloStageA = kHaloRows * kHaloLDK, kHaloStage = kHaloStageA + kHaloTaps * kMmaBN * kHaloLDK;
// A halo step's segment length for output W extent w (0: no segments fit).
KGATE_HD constexpr std::int32_t halo_seg(std::int32_t w) {
  const std::int32_t seg = w < kMmaBM ? w : kMmaBM;
  return seg >= kHaloMinSeg && (w % kMmaBM == 0 || kMmaBM % w == 0) ? seg : 0;
}
// The W taps of conv_mma's halo step for geometry `g` of the contract
// family (rows over the output S) or the scatter family (rows over L), or 0
// where it does not apply.
KGATE_HD constexpr int halo_taps(const Geom& g, bool scatter) {
  const std::int32_t seg = halo_seg(scatter ? g.L[2] : g.S[2]);
  const bool unit = g.stride[2] == 1 && (!scatter || (g.stride[0] == 1 && g.stride[1] == 1));
  if (!unit || g.K[2] < 2 || g.K[2] > kHaloTaps || seg == 0) return 0;
  const std::int64_t rows = (kMmaBM / seg) * (seg + std::int64_t{g.K[2] - 1} * g.dil[2]);
  return rows <= kHaloRows ? g.K[2] : 0;
}

// The W-halo tile of conv_wgrad_mma (asynchronous copies only): where the W
// axis has stride 1, KW = kHaloTaps and the large channels per group are
// whole blocks of kWgradHaloCB, a workgroup owns one (kd, kh) pair, one
// block of kWgradHaloCB large channels at all KW W taps (kWgradHaloM GEMM
// rows) and kMmaBN small channels. A block step's kMmaBK rows of K are
// whole segments of seg = min(S's W, kMmaBK) consecutive positions along W
// (S's W a multiple of kMmaBK, or seg = S's W dividing it, at least one
// atom K), and a segment's large rows at W tap kw are one staged run of seg
// + (KW - 1)*dil rows shifted by kw*dil: each large row leaves L2 once per
// (kd, kh) pair instead of once per tap, and the block tile is 1.5 times
// the tap-major one. The chain of every output is the tap-major one (the
// slice's rows in atom-K chunks); slices are whole block steps (the plan
// rounds them), so a segment lies in one slice.
inline constexpr int kWgradHaloCB = 64;                      // large channels per W tap of a tile
inline constexpr int kWgradHaloM = kHaloTaps * kWgradHaloCB;  // GEMM rows of a tile
inline constexpr int kWgradHaloRows = 40;                     // most staged large rows of a step
// The segment length of conv_wgrad_mma's W-halo tile for geometry g, or 0
// where it does not apply.
KGATE_HD constexpr std::int32_t wgrad_halo_seg(const Geom& g) {
  const std::int32_t w = g.S[2], seg = w < kMmaBK ? w : kMmaBK;
  if (g.stride[2] != 1 || g.K[2] != kHaloTaps || g.clg % kWgradHaloCB != 0 || seg < kHaloMinSeg ||
      (w % kMmaBK != 0 && kMmaBK % w != 0))
    return 0;
  return (kMmaBK / seg) * (seg + (g.K[2] - 1) * g.dil[2]) <= kWgradHaloRows ? seg : 0;
}

// conv_mma's stages, A tiles then B tiles (or halo stages: kHaloStage), in
// bytes; they are dynamic LDS
// where they pass CUDA's 48 KiB of static shared memory with the kernel's
// other arrays (three stages), static otherwise (two: so that the gfx942
// resource report counts them).
KGATE_HD constexpr std::size_t mma_stage_bytes(rt::Target t) {
  const std::size_t tap_major = static_cast<std::size_t>(kMmaBM + kMmaBN) * kMmaLDK;
  const std::size_t halo = mma_stages(t) > 2 ? static_cast<std::size_t>(kHaloStage) : 0;  // asynchronous copies only
  return static_cast<std::size_t>(mma_stages(t)) * (halo > tap_major ? halo : tap_major) * sizeof(std::uint16_t);
}
KGATE_HD constexpr std::size_t mma_dynamic_lds_bytes(rt::Target t) { return mma_stages(t) > 2 ? mma_stage_bytes(t) : 0; }
template <rt::Target kT>
KGATE_DEVICE rt::lds_array<std::uint16_t> mma_stage_lds() {
  if constexpr (mma_dynamic_lds_bytes(kT) > 0) {
    KGATE_LDS_DYNAMIC(stages, std::uint16_t);
    return stages;
  } else {
    KGATE_LDS(stages, std::uint16_t, mma_stage_bytes(kT) / sizeof(std::uint16_t));
    return stages;
  }
}

// The wave grid of an atom over the kMmaBM x kMmaBN block tile. Wide
// (conv_mma): a 64x32 wave tile on both targets, so four waves per
// workgroup (gfx942: 2x1 32x32 atoms per wave, 256 work-items; sm_90: 4x4
// 16x8 atoms per warp, 128 work-items). A warp's fragment loads per atom
// halve against a 32x32 tile, at the price of 64 accumulator registers per
// lane. Not wide (conv_wgrad_mma): 64x32 on gfx942, 32x32 on sm_90 (eight
// warps), few accumulators so that more warps are resident to hide the
// latency of its K-strided loads, which the wide tile's fewer fragment loads
// do not make up for (`kgate bench --corpus --config A --full --filter
// op=conv3d.bwd_weight` on the CUDA backend times it; docs/PERFORMANCE.md).
// LDS rows are padded by 8 elements: 80-byte rows put the eight 16-byte row
// reads of a fragment load (ldmatrix on CUDA) in distinct banks and keep
// every 16-byte access aligned.
KGATE_HD constexpr int mma_wave_tile_m(int lanes, bool wide) { return wide || lanes == 64 ? 64 : 32; }
inline constexpr int kMmaWaveTileN = 32;
// Work-items of a workgroup of an atom with `lanes` lanes.
KGATE_HD constexpr int mma_threads(int lanes, bool wide) {
  return (kMmaBM / mma_wave_tile_m(lanes, wide)) * (kMmaBN / kMmaWaveTileN) * lanes;
}
template <class Atom, bool kWide>
struct MmaTile {
  static constexpr int WTM = mma_wave_tile_m(Atom::lanes, kWide), WTN = kMmaWaveTileN;  // wave tile
  static constexpr int AM = WTM / Atom::M, AN = WTN / Atom::N;                          // atoms per wave
  static constexpr int WM = kMmaBM / WTM, WN = kMmaBN / WTN;                            // waves per workgroup
  static constexpr int kThreads = mma_threads(Atom::lanes, kWide);
  static_assert(AM * Atom::M == WTM && AN * Atom::N == WTN && WM * WTM == kMmaBM && WN * WTN == kMmaBN &&
                WM * WN * Atom::lanes == kThreads);
  static_assert(kMmaBK % Atom::K == 0);
  static constexpr int LDK = kMmaLDK;  // A: [row][channel]; B: [output channel][channel]
  static constexpr int kASize = kMmaBM * LDK, kBSize = kMmaBN * LDK;
  static constexpr int kStages = mma_stages(Atom::target);
};
// The two kernels' tiles.
inline constexpr bool kMmaWide = true, kWgradWide = false;

// The kMmaVec elements at p: one 16-byte load when `wide` (all present and
// aligned); otherwise element by element, the ones at or past n as +0.
template <class Tin>
KGATE_DEVICE Pack<Tin, kMmaVec> load_pack(const Tin* p, std::int64_t n, bool wide) {
  if (wide) return rt::load_wide(reinterpret_cast<const Pack<Tin, kMmaVec>*>(p));
  Pack<Tin, kMmaVec> v{};
KGATE_UNROLL
  for (int i = 0; i < kMmaVec; ++i)
    if (i < n) v.v[i] = p[i];
  return v;
}

// As load_pack for GEMM columns past the real ones whose results are never
// stored (any value is right there): element i is p[min(i, n - 1)] (n >= 1),
// an index clamp rather than a compare per element, whose condition masks
// would stay live across the caller's loop on gfx942 (scalar registers).
template <class Tin, int V = kMmaVec>
KGATE_DEVICE Pack<Tin, V> load_pack_clamped(const Tin* p, std::int64_t n, bool wide) {
  if (wide) return rt::load_wide(reinterpret_cast<const Pack<Tin, V>*>(p));
  const std::int32_t last = static_cast<std::int32_t>(n < V ? n : V) - 1;
  Pack<Tin, V> v;
KGATE_UNROLL
  for (int i = 0; i < V; ++i) v.v[i] = p[i < last ? i : last];
  return v;
}

// conv_wgrad_mma's M side: each tap's large channels padded to whole packs
// of this many (a pack of M columns lies in one tap): 8, or 4 where a tap
// has at most 4 (the RGB first layer's 3 channels: its 27 taps fill one
// 128-column tile with packs of 4, two with packs of 8). Packs of 4 only
// on the path through registers (their channels are never 16-byte runs).
KGATE_HD constexpr int wgrad_apack(std::int64_t clg) { return clg <= 4 ? 4 : kMmaVec; }

template <class T>
KGATE_DEVICE std::uint16_t bits_of(T v) { return v.bits; }

// The two pipelines of the matrix-core kernels: how block steps reach the
// LDS stages while earlier steps' atoms run. Both take the operand
// iterator's loads as callables, so one iterator serves both.
//
// The asynchronous staging loop of the matrix-core kernels on sm_90: block
// steps 0 .. nblk-1 through kStages LDS stages, one barrier per step.
// issue(b, st) issues the copies of step b into stage st (called for b = 0,
// 1, ... in order); step(b, st) runs step b's atoms from stage st. At step b
// the copies of step b + kStages - 1 go into the stage step b - 1 used
// (every work-item has left it: the barrier), so kStages - 1 steps' loads
// are in flight while step b's atoms run.
template <int kStages, class Issue, class Step>
KGATE_DEVICE void async_stage_loop(std::int64_t nblk, Issue&& issue, Step&& step) {
  static_assert(kStages > 2);
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nblk) issue(std::int64_t{st}, st);
    rt::async_commit();
  }
  int st = 0, nst = kStages - 1;
  for (std::int64_t blk = 0; blk < nblk; ++blk) {
    rt::async_wait<kStages - 2>();
    rt::barrier();
    if (blk + kStages - 1 < nblk) issue(blk + kStages - 1, nst);
    rt::async_commit();
    step(blk, st);
    st = st + 1 == kStages ? 0 : st + 1;
    nst = nst + 1 == kStages ? 0 : nst + 1;
  }
}

// The register staging loop of the matrix-core kernels (gfx942 atoms, and
// element loads on any target): block steps 0 .. nblk-1 through two LDS
// stages, one barrier per step. fetch(b) loads step b into the work-item's
// registers (called for b = 0, 1, ... in order), stash(st) stores them into
// stage st, step(b, st) runs step b's atoms from stage st. Step b + 1 is
// fetched before step b's atoms run (its loads in flight during them) and
// stashed into the other stage after them.
template <class Fetch, class Stash, class Step>
KGATE_DEVICE void register_stage_loop(std::int64_t nblk, Fetch&& fetch, Stash&& stash, Step&& step) {
  if (nblk > 0) {
    fetch(std::int64_t{0});
    stash(0);
  }
  rt::barrier();
  for (std::int64_t blk = 0; blk < nblk; ++blk) {
    const bool more = blk + 1 < nblk;
    if (more) fetch(blk + 1);
    step(blk, static_cast<int>(blk & 1));
    if (more) {
      stash(static_cast<int>((blk + 1) & 1));
      rt::barrier();
    }
  }
}

// A matrix-core kernel's accumulators: M x N atoms' C fragments per wave (a
// checked register array, as AccTile).
template <class Atom, int M, int N>
using MmaAcc = rt::regs<rt::regs<rt::mma::c_frag<Atom>, N>, M>;

// The atoms of one atom-K chunk: the wave's fragments, A fragment u from
// load_a(u) and B fragment v from load_b(v) (LDS fragment loads), then
// every atom of the wave's tile.
template <class Atom, class TT, class LoadA, class LoadB>
[[gnu::always_inline]] KGATE_DEVICE void mma_atoms(LoadA&& load_a, LoadB&& load_b,
                                                   MmaAcc<Atom, TT::AM, TT::AN>& acc) {
  rt::mma::a_frag<Atom> af[TT::AM];
  rt::mma::b_frag<Atom> bf[TT::AN];
KGATE_UNROLL
  for (int u = 0; u < TT::AM; ++u) af[u] = load_a(u);
KGATE_UNROLL
  for (int v = 0; v < TT::AN; ++v) bf[v] = load_b(v);
KGATE_UNROLL
  for (int u = 0; u < TT::AM; ++u)
KGATE_UNROLL
    for (int v = 0; v < TT::AN; ++v) acc[u][v] = rt::mma::mma<Atom>(af[u], bf[v], acc[u][v]);
}

// One LDS stage through a wave's atoms: K chunks 0 .. chunks-1 of the block
// step (chunks <= kMmaBK / Atom::K; the caller stops the chain after the
// last chunk holding a term, as the reduction plan counts it). A is staged
// at sA[a0..] as [GEMM row][k], B at sB[b0..] as [GEMM column][k], both
// with row pitch LDK; K-major (kAK, kBK): as [k][GEMM row] with pitch
// kMmaLDM, [k][GEMM column] with pitch kMmaLDN. The wave's tile is rows
// wm*WTM.., columns wn*WTN.. of the block tile.
template <class Atom, class TT, bool kAK = false, bool kBK = false, bool kFreeChunks = true>
KGATE_DEVICE void mma_block_step(const rt::lds_array<std::uint16_t>& sA, int a0, const rt::lds_array<std::uint16_t>& sB,
                                 int b0, int wm, int wn, std::int64_t chunks, MmaAcc<Atom, TT::AM, TT::AN>& acc) {
  namespace mma = kgate::rt::mma;
  static_assert(TT::LDK % 8 == 0 && Atom::K % 8 == 0);  // 16-byte rows for the fragment loads
  const int abase = a0 + wm * TT::WTM * (kAK ? 1 : TT::LDK), bbase = b0 + wn * TT::WTN * (kBK ? 1 : TT::LDK);
  // A whole step without a branch between its chunks, so that the
  // compiler may issue one chunk's fragment loads under the previous
  // chunk's atoms (a branch between them keeps each chunk's atoms waiting
  // on its own loads); a step with fewer chunks stops after the last.
  auto chunk = [&](int kk) {
    mma_atoms<Atom, TT>(
        [&](int u) {
          if constexpr (kAK) return mma::load_a_lds_kmajor<Atom>(sA, abase + u * Atom::M + kk * Atom::K * kMmaLDM, kMmaLDM);
          else return mma::load_a_lds<Atom>(sA, abase + u * Atom::M * TT::LDK + kk * Atom::K, TT::LDK);
        },
        [&](int v) {
          if constexpr (kBK) return mma::load_b_lds_kmajor<Atom>(sB, bbase + v * Atom::N + kk * Atom::K * kMmaLDN, kMmaLDN);
          else return mma::load_b_lds<Atom>(sB, bbase + v * Atom::N * TT::LDK + kk * Atom::K, TT::LDK);
        },
        acc);
  };
  constexpr int kChunks = kMmaBK / Atom::K;
  if constexpr (kFreeChunks) {
    if (chunks >= kChunks) {
KGATE_UNROLL
      for (int kk = 0; kk < kChunks; ++kk) chunk(kk);
      return;
    }
  }
  for (int kk = 0; kk < kChunks; ++kk) {
    if (kk >= chunks) break;
    chunk(kk);
  }
}

}  // namespace kgate::kernels::cv
