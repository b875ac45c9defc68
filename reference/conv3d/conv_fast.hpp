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
// bwd_weight's blocks are the inner dimension of its GEMM, so they are taller
// (kWgradRowFactor times): the weight-sized accumulator is then read and
// written less often per multiply-add.
inline constexpr std::int64_t kWgradRowFactor = 4;

// Work items a call is cut into where the problem allows: a problem with
// fewer row blocks also cuts the GEMM's output columns into tiles of at least
// kMinCols (and bwd_weight its reduction into at most kMaxSlots chunks). A
// function of the problem only, never of the thread count, so results do not
// depend on the threads; large enough to keep 16 threads busy.
inline constexpr std::int64_t kTargetItems = 64;
inline constexpr std::int64_t kMinCols = 64;

// Column tiles for `items` row blocks of a GEMM with `cols` output columns.
std::int64_t col_tiles(std::int64_t cols, std::int64_t items);

// Bytes the partial sums of bwd_weight's reduction chunks may take (a fixed
// number of weight-sized slots, at most kMaxSlots).
inline constexpr std::int64_t kSlotBudgetBytes = std::int64_t{512} << 20;
inline constexpr std::int64_t kMaxSlots = kTargetItems;

// Whether a geometry is non-overlapping: kernel == stride, no padding, unit
// dilation and L = S * K on every axis, so each large position takes exactly
// one tap of exactly one small position (the U-Net's k2 s2 up-convolution,
// every k1 s1 convolution). scatter() then is one GEMM per block, small rows
// times the whole weight, written back tap by tap.
struct ConvGeom;
bool non_overlapping(const ConvGeom& g);

}  // namespace kgate::ref::detail
