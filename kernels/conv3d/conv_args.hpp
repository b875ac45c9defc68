// The conv kernels' shared constants, their geometry as device data and
// their argument structs (what a plan hands each kernel: conv_plan.hpp).
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
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

}  // namespace kgate::kernels::cv
