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

// Bytes the partial sums of bwd_weight may take (a fixed number of weight-
// sized slots, at most kMaxSlots).
inline constexpr std::int64_t kSlotBudgetBytes = std::int64_t{512} << 20;
inline constexpr std::int64_t kMaxSlots = 16;

}  // namespace kgate::ref::detail
