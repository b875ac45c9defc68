// Convolution kernels for NDHWC tensors: the six operator-directions of
// conv3d and conv_transpose3d as three implicit GEMMs over one geometry
// (reference/conv3d/conv_geometry.hpp: a "small" side S, a "large" side L and
// a weight [small channel][KD][KH][KW][large channel per group]; conv3d's
// small side is its output, conv_transpose3d's its input). One source for
// every backend (kernels/runtime/runtime.hpp).
//
//   contract  out[n, i, cs]  = sum_{tap, q} large[n, j(i, tap), grp*clg + q] * w[cs, tap, q]
//             conv3d.fwd, conv_transpose3d.bwd_data.
//             GEMM: M = N*prod(S), N = cs/g, K = taps*clg.
//   scatter   out[n, j, cl]  = sum_{tap, q} small[n, i(j, tap), grp*csg + q] * w[grp*csg + q, tap, cl]
//             conv3d.bwd_data, conv_transpose3d.fwd.
//             GEMM: M = positions of one stride phase, N = cl/g, K = taps*csg.
//   wgrad     dw[cs, tap, q] = sum_{n, i} small[n, i, cs] * large[n, j(i, tap), grp*clg + q]
//             conv3d.bwd_weight (small = dy, large = x), conv_transpose3d.bwd_weight
//             (small = x, large = dy): the same kernel with the operands swapped.
//             GEMM: M = cs/g, N = taps*clg, K = N*prod(S), split into slices.
// where j(i, tap) = i*stride - pad_front + tap*dil per axis, and a term whose
// j falls outside L (padding) is absent.
//
// Backward-data for stride > 1 (the scatter family) is decomposed by stride
// phase: the large positions j with j mod stride = ph (per axis) form one
// GEMM (grid z = phase), and for that phase the taps k with
// (ph + pad - k*dil) mod stride = 0 are exactly the ones that contribute, the
// same for every position of the phase, with i = t + (ph + pad - k*dil)/stride
// for j = ph + stride*t. A workgroup therefore never evaluates a tap that
// does not land on the stride lattice and never branches per position on
// divisibility; stride 1 is one phase with every tap (the forward contraction
// on the flipped, channel-swapped weight). The non-overlapping case k = s,
// dil = 1 (the U-Net's k2 s2 up-sampling) has exactly one tap per phase,
// tap = (ph + pad) mod s: conv_scatter<.., true> runs it as a 1x1 GEMM per
// phase without the tap loop.
//
// Portable work decomposition: a workgroup is kThreads work-items (one gfx942 wave),
// bn of them along N and kThreads/bn along M; each owns a kTM x kTN register
// tile of the output and loops over K with fp32 accumulators, with no LDS and
// no barrier (cheap to emulate: a work-item runs to completion). Every output
// element is the sequential sum of its terms in the order taps (KD, KH, KW),
// then channels ascending; absent terms are skipped, not added as zero.
// Products and sums are separate IEEE operations (no contraction on any
// backend): bf16 and fp16 products are exact in fp32.
//
// Backward-weight is deterministic by construction: slice s of `splits`
// writes its fp32 partial of every dw element to ws[s][element], and
// conv_tree combines the partials of each element in a fixed pairwise tree
// (stride 1, 2, 4, ... ; depth ceil(log2 splits)), or conv_tree_split the
// same tree with one workgroup per element where few elements meet many
// splits; dbias is the same with conv_colsum's column sums of dy. No atomics; splits and slices are
// functions of the problem alone (kernels/conv3d/conv3d.cpp). conv_mma
// splits K the same way where a layer has few block tiles and a long K
// (GemmArgs::tap_split: runs of whole taps, each split's fp32 partial to
// the workspace, conv_tree adding the splits and then the bias).
//
// Matrix cores (conv_mma<Atom, Tin, Tout, kScatter>): the contract family,
// and the scatter family per stride phase, for bf16 and fp16 inputs run on
// the runtime's MMA atoms (kernels/runtime/mma.hpp) where the channels fill
// an atom and the rows a block tile (plan: "mma-igemm"): gfx942 v_mfma_f32_32x32x8 on HIP and on the
// host emulator's default target, sm_90 mma.sync m16n8k16 on CUDA. Both
// families are one GEMM to this kernel: GEMM row i at tap e reads the source
// position i*mul + off(e) (contract: mul = stride, off = k*dil - pad over
// every tap; scatter: mul = 1, off = the phase's lattice offset of each of
// its taps, listed once per workgroup), and B(q, c) is the weight read
// through an index map, never a transformed copy: contract w[c][tap][q],
// scatter w[q][tap][c] (stride 1: the forward contraction on the flipped,
// channel-swapped weight). A workgroup of four waves owns a
// kMmaBM x kMmaBN block tile (waves in a grid, each a fixed grid of atoms:
// MmaTile) and walks K in block steps of one tap x kMmaBK channels, one
// barrier per step, reading the staged operands back with the runtime's LDS
// fragment loads (ldmatrix on CUDA; layouts come only from the atom's
// tables). How a step reaches LDS depends on the atom's target
// (mma_stages): for sm_90 atoms with 16-byte channel runs, asynchronous
// copies (cp.async) into three stages, two steps ahead of the atoms, the
// scatter family's weight rows staged K-major as they arrive, and where the
// W axis allows it the W-halo step instead (halo_taps: one step stages the
// source rows of a (kd, kh) pair once for all its W taps, kHaloBK channels
// wide); for gfx942
// atoms (no 16-byte asynchronous copy), and where channel counts or
// alignment need element loads, 16-byte (or element) loads into registers
// issued before the current step's atoms and stored into the other of two
// stages after them. Each work-item's A rows are decoded once
// and the block steps advance without a division; per tap only the source
// offsets change. Each output is one chain of atom instructions in the
// order taps, then channels in atom-K chunks (the W-halo step: (kd, kh)
// pairs, then channels in atom-K chunks, then W taps; a chunk past the channels is
// not issued; absent terms and channels past the end of a chunk load as +0,
// which adds nothing to an exact sum): the chain the plan's ReductionPlan
// counts, so the host's sm90 model reproduces CUDA bit for bit.
// Backward-weight has its own matrix-core kernel over the same block tile
// and block step (conv_wgrad_mma), and on sm_90 a W-halo tile of its own
// (wgrad_halo_seg: one (kd, kh) pair's three W taps of 64 large channels,
// their large rows staged once per segment of positions along W). fp32
// inputs and channel counts an atom does not fill take the portable path.
//
// Indexing is 64-bit throughout (tensors may pass 2^31 elements).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/elements.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels::cv {

inline constexpr int kThreads = 64;  // work-items per workgroup
inline constexpr int kTM = 4;        // register tile rows (M) per work-item
inline constexpr int kTN = 4;        // register tile columns (N) per work-item
// A portable kernel's accumulator tile and one K step's column operands, as
// checked register arrays (rt::regs: an index outside the tile is a kernel
// error on the emulator).
using AccTile = rt::regs<rt::regs<float, kTN>, kTM>;
using ColVec = rt::regs<float, kTN>;
inline constexpr int kMaxPhaseTaps = 256;  // taps one stride phase of the scatter family may have (4 KiB of LDS)

// The geometry of reference/conv3d/conv_geometry.hpp as plain device data.
// Extents and channel counts are at most 2^24 (ConvProblem::validate), so
// they are 32-bit (half the scalar registers of a uniform 64-bit copy);
// every offset and product of them is formed in 64 bits.
struct Geom {
  std::int32_t n, groups, cs, cl, csg, clg;
  std::int32_t S[3], L[3], K[3], stride[3], pad[3], dil[3];
  std::int64_t s_pos, l_pos, taps;
};

struct GemmArgs {
  Geom g;
  const void* a;     // contract: the large operand; scatter: the small operand
  const void* w;     // [cs][KD][KH][KW][clg]
  const void* bias;  // [output channels] or null
  void* out;
  int bn;            // portable kernels: work-items along N (a power of two dividing kThreads)
  // conv_mma's 16-byte accesses (channel runs of multiples of 8 in 16-byte
  // aligned tensors): `wide` for the loads (contract: runs of clg channels
  // in the source and the weight rows; scatter: csg in the source, clg in
  // the weight rows), `wide_out` for the epilogue's stores (runs of the
  // output's channels per group).
  bool wide = false;
  bool wide_out = false;
  // conv_mma's split of K by taps (mma_tap_split): split k of grid z (z =
  // phase * splits + k) runs the taps [k*tap_split, (k+1)*tap_split) of
  // its phase and writes its fp32 sums, without the bias, to ws[k][output
  // element]; conv_tree adds the splits, then the bias. 0: no split.
  // ws_numel: the output's elements, the stride of ws's splits.
  std::int32_t tap_split = 0, splits = 1;
  float* ws = nullptr;
  std::int64_t ws_numel = 0;
  // conv_mma's W-halo block step (halo_taps), taken with `wide` and no
  // split only: its W taps and segment length (halo_seg); 0: tap-major
  // steps.
  std::int32_t halo_taps = 0, halo_seg = 0;
};

struct WgradArgs {
  Geom g;
  const void* small;
  const void* large;
  float* ws;           // [splits][cs*taps*clg]
  int bn;              // portable kernel: work-items along N
  std::int64_t slice;  // rows (n, i) per split
  bool wide = false;   // conv_wgrad_mma: 16-byte loads (as GemmArgs::wide)
  // conv_wgrad_mma through registers: 16-byte loads of the small operand
  // alone (csg a multiple of 8, the tensor 16-byte aligned), where the large
  // one's channels are too few for them (the 3-channel first layer).
  bool wide_small = false;
  // conv_wgrad_mma's W-halo tile: its segment length (wgrad_halo_seg;
  // the plan's grid and slices are then the halo tile's), set with `wide`
  // only; 0: the tap-major tiles.
  std::int32_t halo_seg = 0;
  // The portable kernel: a work-item's kTN large channels in one load
  // (clg a multiple of kTN, the large tensor aligned to kTN elements).
  bool quad_large = false;
  // The portable kernel: row groups (of kTM small channels) per split, a
  // power of two dividing kThreads / bn; the workgroup's other row groups
  // take the next splits (grid z * (bm / rgroups) + row group / rgroups),
  // those past `splits` none (kThreads / bn: one split per workgroup).
  int rgroups = 1;
  std::int64_t splits = 0;
};

struct ColsumArgs {
  const void* x;       // [rows][cols]
  std::int64_t rows, cols, slice, splits;
  float* ws;           // [splits][cols]
};

struct TreeArgs {
  float* ws;  // [splits][numel], combined in place
  std::int64_t numel, splits;
  void* out;
  int runs = 1;  // runs of kThreads elements per workgroup (tree_runs)
  // conv_mma's split of K: the bias (Tb) of element e's channel e % channels,
  // added to the sum before it is rounded (as conv_mma's epilogue does).
  const void* bias = nullptr;
  std::int64_t channels = 1;
};

KGATE_HD constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One K step of a portable register tile: acc[u][v] += x_u * b[v], x_u the
// channel-q element of row u's source (rows without a source at this tap,
// ap[u] null, take no term).
template <class Tin>
KGATE_DEVICE void tile_step(AccTile& acc, const Tin* const (&ap)[kTM], std::int32_t q, const ColVec& b) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!ap[u]) continue;
    const float x = to_f32(ap[u][q]);
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) acc[u][v] = acc[u][v] + x * b[v];
  }
}

// Row m of a GEMM over M = n * ext[0] * ext[1] * ext[2] positions: its batch
// index b and coordinates i.
[[gnu::always_inline]] KGATE_DEVICE void decode_row(std::int64_t m, const std::int32_t (&ext)[3], std::int64_t& b, std::int64_t (&i)[3]) {
  i[2] = m % ext[2]; m /= ext[2];
  i[1] = m % ext[1]; m /= ext[1];
  i[0] = m % ext[0];
  b = m / ext[0];
}

// Rows m0 .. m0 + kTM - 1: each row's batch index and coordinates; a row
// past M (valid false) decodes as row m0 so its loads stay in bounds.
KGATE_DEVICE void decode_rows(std::int64_t m0, std::int64_t M, const std::int32_t (&ext)[3], std::int64_t (&rb)[kTM],
                              std::int64_t (&ri)[kTM][3], bool (&rv)[kTM]) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    rv[u] = m0 + u < M;
    decode_row(rv[u] ? m0 + u : m0, ext, rb[u], ri[u]);
  }
}

// The helpers below are always inlined: called from several kernels, the
// gfx942 compiler otherwise may keep them as calls whose ABI costs scalar
// registers (spills in conv_scatter).

// (r mod s) for any sign of r, s > 0.
KGATE_HD constexpr std::int64_t pos_mod(std::int64_t r, std::int64_t s) { return ((r % s) + s) % s; }

// Stride phase z of the scatter family (grid z): per axis its residue ph and
// the number T of large positions on its lattice.
[[gnu::always_inline]] KGATE_DEVICE void phase_of(const Geom& g, std::int32_t z, std::int32_t (&ph)[3], std::int32_t (&T)[3]) {
  ph[2] = z % g.stride[2]; z /= g.stride[2];
  ph[1] = z % g.stride[1];
  ph[0] = z / g.stride[1];
KGATE_UNROLL
  for (int x = 0; x < 3; ++x) T[x] = ph[x] < g.L[x] ? static_cast<std::int32_t>(ceil_div(g.L[x] - ph[x], g.stride[x])) : 0;
}

// Whether kernel index k of an axis lands on stride phase ph's lattice, and
// then the source offset o = (ph + pad - k*dil) / stride of the lattice
// position. 32-bit (the operands stay below 2^31 within ConvProblem's
// limits), and no division on a stride-1 axis: one work-item runs this for
// every tap while its workgroup waits.
[[gnu::always_inline]] KGATE_DEVICE bool on_lattice(std::int32_t ph, std::int32_t pad, std::int32_t k, std::int32_t dil,
                                                    std::int32_t stride, std::int32_t& o) {
  const std::int32_t r = ph + pad - k * dil;
  if (stride == 1) {
    o = r;
    return true;
  }
  if (r % stride != 0) return false;  // divisible, whatever the sign of r
  o = r / stride;
  return true;
}

// The taps of stride phase ph, in (KD, KH, KW) order: per axis, k with
// (ph + pad - k*dil) divisible by the stride. Written as (tap, o0, o1, o2)
// quadruples, o = (ph + pad - k*dil) / stride the source offset of the
// lattice position (at most kMaxPhaseTaps: is_supported); returns the count.
// One work-item lists them for its workgroup.
[[gnu::always_inline]] KGATE_DEVICE std::int32_t list_phase_taps(const Geom& g, const std::int32_t (&ph)[3], const rt::lds_array<std::int32_t>& ptap) {
  std::int32_t count = 0, o0, o1, o2;
  for (std::int32_t k0 = 0; k0 < g.K[0]; ++k0) {
    if (!on_lattice(ph[0], g.pad[0], k0, g.dil[0], g.stride[0], o0)) continue;
    for (std::int32_t k1 = 0; k1 < g.K[1]; ++k1) {
      if (!on_lattice(ph[1], g.pad[1], k1, g.dil[1], g.stride[1], o1)) continue;
      for (std::int32_t k2 = 0; k2 < g.K[2]; ++k2) {
        if (!on_lattice(ph[2], g.pad[2], k2, g.dil[2], g.stride[2], o2)) continue;
        ptap[4 * count] = (k0 * g.K[1] + k1) * g.K[2] + k2;
        ptap[4 * count + 1] = o0;
        ptap[4 * count + 2] = o1;
        ptap[4 * count + 3] = o2;
        ++count;
      }
    }
  }
  return count;
}

// list_phase_taps for a workgroup of `threads` work-items, work-item t of
// them: with stride 1 on every axis (one phase, every tap on it) the
// work-items write the entries in parallel, entry e for tap e; otherwise
// work-item 0 lists them. The caller's barrier makes
// ptap and pcount[0] (the count) visible.
[[gnu::always_inline]] KGATE_DEVICE void list_phase_taps(const Geom& g, const std::int32_t (&ph)[3], const rt::lds_array<std::int32_t>& ptap,
                                                         const rt::lds_array<std::int32_t>& pcount, int t, int threads) {
  if (g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) {
    const std::int32_t taps = static_cast<std::int32_t>(g.taps);
    for (std::int32_t e = t; e < taps; e += threads) {
      const std::int32_t k[3] = {e / (g.K[2] * g.K[1]), (e / g.K[2]) % g.K[1], e % g.K[2]};
      ptap[4 * e] = e;
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) {
        std::int32_t o;
        on_lattice(ph[x], g.pad[x], k[x], g.dil[x], 1, o);  // stride 1: every k is on the lattice
        ptap[4 * e + 1 + x] = o;
      }
    }
    if (t == 0) pcount[0] = taps;
  } else if (t == 0) {
    pcount[0] = list_phase_taps(g, ph, ptap);
  }
}

// The element offset of channel 0 of the large position ph + stride * t of
// batch b (a scatter output row with phase coordinates t).
[[gnu::always_inline]] KGATE_DEVICE std::int64_t lattice_offset(const Geom& g, const std::int32_t (&ph)[3], std::int64_t b, const std::int64_t (&t)[3]) {
  const std::int64_t j0 = ph[0] + g.stride[0] * t[0], j1 = ph[1] + g.stride[1] * t[1], j2 = ph[2] + g.stride[2] * t[2];
  return (((b * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl;
}

// The element offset of channel 0 of output row m: on the small side
// (contract) row m itself; on the large side (scatter) the lattice position
// of row m's phase coordinates (extents T).
template <bool kScatter>
KGATE_DEVICE std::int64_t out_row(const Geom& g, const std::int32_t (&ph)[3], const std::int32_t (&T)[3], std::int64_t m) {
  if constexpr (!kScatter) {
    return m * g.cs;
  } else {
    std::int64_t b, i[3];
    decode_row(m, T, b, i);
    return lattice_offset(g, ph, b, i);
  }
}

// The epilogue of the contract and scatter families: the fp32 sum y of
// output channel c (counted over all groups) plus the bias, if any; the
// result is rounded once to Tout.
template <class Tin>
KGATE_DEVICE float with_bias(const Tin* B, std::int64_t c, float y) {
  return B ? y + to_f32(B[c]) : y;
}
// One output element: channel c of the row at element offset `row`.
template <class Tin, class Tout>
KGATE_DEVICE void put_output(Tout* O, const Tin* B, std::int64_t row, std::int64_t c, float y) {
  O[row + c] = from_f32<Tout>(with_bias(B, c, y));
}

// A portable register tile's outputs: the rows that exist (rv) at element
// offsets row_of(u), columns c0 + v below ncols of group grp.
template <class Tin, class Tout, class RowOf>
KGATE_DEVICE void store_tile(const GemmArgs& a, RowOf&& row_of, const bool (&rv)[kTM], std::int64_t grp, std::int64_t c0,
                             std::int64_t ncols, const AccTile& acc) {
  Tout* O = static_cast<Tout*>(a.out);
  const Tin* B = static_cast<const Tin*>(a.bias);
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!rv[u]) continue;
    const std::int64_t row = row_of(u);
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v)
      if (c0 + v < ncols) put_output<Tin, Tout>(O, B, row, grp * ncols + c0 + v, acc[u][v]);
  }
}

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
  // Two stages through registers (the next step's loads in flight during
  // the current step's atoms), transposed on the way into LDS.
  if (nblk > 0) {
    fetch(r_begin);
    stash(0);
  }
  rt::barrier();
  for (std::int64_t blk = 0; blk < nblk; ++blk) {
    const std::int64_t r0 = r_begin + blk * kMmaBK;
    const bool more = blk + 1 < nblk;
    if (more) fetch(r0 + kMmaBK);
    const int st = static_cast<int>(blk & 1);
    mma_block_step<Atom, TT>(sA, st * TT::kASize, sB, st * TT::kBSize, wm, wn, ceil_div(r_end - r0, Atom::K), acc);
    if (more) {
      stash(static_cast<int>((blk + 1) & 1));
      rt::barrier();
    }
  }
  store_out();
}

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

// ---------------------------------------------------------------------------
// Column sums of a [rows][cols] tensor (dbias): work-item w of the grid
// sums column w % cols over slice w / cols, the rows in order (so a layer
// of few columns, the head's 6, still has a work-item per column and
// slice, not a workgroup mostly idle), with the loads of kColsumRows rows
// issued before their sums.
inline constexpr int kColsumRows = 8;

template <class Tin>
KGATE_KERNEL_BOUNDS(conv_colsum, kThreads, ColsumArgs a) {
  const std::int64_t w = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  const std::int64_t c = w % a.cols, split = w / a.cols;
  if (split >= a.splits) return;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < a.rows ? r_begin + a.slice : a.rows;
  const Tin* x = static_cast<const Tin*>(a.x) + c;
  float acc = 0.0f;
  for (std::int64_t r = r_begin; r < r_end; r += kColsumRows) {
    float v[kColsumRows];
KGATE_UNROLL
    for (int k = 0; k < kColsumRows; ++k) v[k] = r + k < r_end ? to_f32(x[(r + k) * a.cols]) : 0.0f;
KGATE_UNROLL
    for (int k = 0; k < kColsumRows; ++k)
      if (r + k < r_end) acc = acc + v[k];
  }
  a.ws[split * a.cols + c] = acc;
}

// ---------------------------------------------------------------------------
// The fixed tree over split partials: level w adds partial s + w into s for
// s = 0, 2w, 4w, ... (w = 1, 2, 4, ...), then element e of partial 0 is the
// result, rounded once to Tout. A workgroup covers `runs` consecutive runs
// of kThreads elements (a work-item one element of each run, so every access
// stays coalesced; the plan chooses the runs: kernels/conv3d/conv_plan.hpp).

// The combined sum of element e (at p[0]), the bias added, rounded once.
template <class Tout, class Tb>
KGATE_DEVICE void put_tree(const TreeArgs& a, std::int64_t e, float y) {
  if (a.bias) y = with_bias(static_cast<const Tb*>(a.bias), e % a.channels, y);
  static_cast<Tout*>(a.out)[e] = from_f32<Tout>(y);
}

template <class Tout, class Tb = Tout>
KGATE_KERNEL_BOUNDS(conv_tree, kThreads, TreeArgs a) {
  const std::int64_t e0 = static_cast<std::int64_t>(rt::block_idx().x) * kThreads * a.runs + rt::thread_idx().x;
  for (int run = 0; run < a.runs; ++run) {
    const std::int64_t e = e0 + std::int64_t{run} * kThreads;
    if (e >= a.numel) return;
    float* p = a.ws + e;
    for (std::int64_t w = 1; w < a.splits; w *= 2)
      for (std::int64_t s = 0; s + w < a.splits; s += 2 * w) {
        const float l = p[s * a.numel], r = p[(s + w) * a.numel];
        p[s * a.numel] = l + r;
      }
    put_tree<Tout, Tb>(a, e, p[0]);
  }
}

// The same tree with the splits of one element across a workgroup (grid x
// = the element): at level w its work-items add the pairs (s, s + w) side
// by side, a barrier between levels, every pair's sum l + r as conv_tree
// forms it (the same bits). For few elements over many splits
// (the plan's choice), where conv_tree's one work-item per element would
// add its splits - 1 pairs one after another.

template <class Tout, class Tb = Tout>
KGATE_KERNEL_BOUNDS(conv_tree_split, kThreads, TreeArgs a) {
  const std::int64_t e = rt::block_idx().x;
  const std::int64_t t = rt::thread_idx().x;
  float* p = a.ws + e;
  for (std::int64_t w = 1; w < a.splits; w *= 2) {
    for (std::int64_t s = t * 2 * w; s + w < a.splits; s += kThreads * 2 * w) {
      const float l = p[s * a.numel], r = p[(s + w) * a.numel];
      p[s * a.numel] = l + r;
    }
    rt::barrier();  // level w's sums before level 2w reads them
  }
  if (t == 0) put_tree<Tout, Tb>(a, e, p[0]);
}

}  // namespace kgate::kernels::cv
