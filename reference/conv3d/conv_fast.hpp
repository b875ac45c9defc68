// Internal: the fast fp64 convolution reference (blocked im2col x Eigen GEMM,
// threaded). See ref_conv.hpp for the contract; call it through conv().
#pragma once

#include "reference/conv3d/ref_common.hpp"

namespace kgate::ref::detail {

Outputs conv_fast(const ConvProblem& p, const Inputs& in);

// Rows of an im2col block of `width` doubles: about kBlockBytes per block,
// clamped to [kMinRows, kMaxRows].
inline constexpr std::int64_t kBlockBytes = std::int64_t{8} << 20;
inline constexpr std::int64_t kMinRows = 128, kMaxRows = 2048;
std::int64_t block_rows(std::int64_t width);
// bwd_weight's row blocks are what its reduction chunks are made of,
// kWgradRowFactor times taller than block_rows(); each is filled and
// multiplied in wgrad_fill_rows() pieces, so their height only bounds how
// finely the reduction can be chunked.
inline constexpr std::int64_t kWgradRowFactor = 4;

// Work items a call is cut into where the problem allows, so that 16
// threads stay busy: row blocks are made shorter (split_rows(), down to
// kSplitRows) and, where there are still fewer than kTargetItems, the GEMM's
// output columns are cut into tiles of at least kMinCols (col_tiles(); each
// tile fills its block's operand itself: no buffer beyond the per-worker
// scratch). Each GEMM packs its weight operand (width x tile columns) once
// per block and its block operand once per tile, so that work per multiply-
// add is 1/(2 rows) + 1/(tile columns): the two floors keep it under 1/128.
// bwd_weight tiles the columns of dw (at least kMinWgradCols wide) and cuts
// its reduction into at most kMaxSlots chunks. All of it is a function of the
// problem, never of the thread count, so results do not depend on the
// threads.
inline constexpr std::int64_t kTargetItems = 64;
inline constexpr std::int64_t kSplitRows = 128;
inline constexpr std::int64_t kMinCols = 256;
inline constexpr std::int64_t kMinWgradCols = 256;

// Rows of the blocks for `positions` rows in all, given the blocks' natural
// height `rows`: shorter where that gives fewer than kTargetItems blocks.
std::int64_t split_rows(std::int64_t rows, std::int64_t positions);
// Column tiles for `items` row blocks of a GEMM with `cols` output columns,
// each at least `min_cols` wide.
std::int64_t col_tiles(std::int64_t cols, std::int64_t items, std::int64_t min_cols = kMinCols);

// bwd_weight's decomposition: column tiles of each group's dw, row blocks
// of `rows` positions, reduction chunks (1: none).
struct WgradSplit {
  std::int64_t tiles = 1, rows = 1, chunks = 1;
};
struct ConvGeom;
WgradSplit wgrad_split(const ConvGeom& g);

// Bytes of a scatter item's GEMM result computed at once (result_rows()
// rows): it is still in cache when its rows are stored to their positions.
inline constexpr std::int64_t kResultBytes = std::int64_t{1} << 20;

// Rows of dy (positions over n and space) per partial sum of db: the partial
// sums are independent work items, added in order at the end.
inline constexpr std::int64_t kDbRows = 4096;

// Operand bytes of a bwd_weight fill (see wgrad_fill_rows()): it stays in
// cache until the GEMM packs it.
inline constexpr std::int64_t kWgradFillBytes = std::int64_t{1} << 20;
inline constexpr std::int64_t kWgradMinFillRows = 256;

// Bytes the partial sums of bwd_weight's reduction chunks may take (a fixed
// number of weight-sized slots, at most kMaxSlots).
inline constexpr std::int64_t kSlotBudgetBytes = std::int64_t{512} << 20;
inline constexpr std::int64_t kMaxSlots = kTargetItems;
// Positions (n and space) per reduction chunk, at least, so that a chunk's
// slot (written, then added to dw: two weight-sized passes) stays small
// beside its multiply-adds (kMinChunkRows or more per weight element). Where
// the blocks are too few for the chunks, they are made shorter (down to
// kSplitRows) so that every chunk gets one.
inline constexpr std::int64_t kMinChunkRows = 512;

// Whether a geometry is non-overlapping: kernel == stride, no padding, unit
// dilation and L = S * K on every axis, so each large position takes exactly
// one tap of exactly one small position (the U-Net's k2 s2 up-convolution,
// every k1 s1 convolution). scatter() then is one GEMM per block, small rows
// times the whole weight, written back tap by tap.
bool non_overlapping(const ConvGeom& g);

}  // namespace kgate::ref::detail
