// The convolution references: conv3d and conv_transpose3d, every direction.
//
// One geometry serves both operators. Call the spatially smaller side of the
// convolution "small" (conv3d: y; conv_transpose3d: x) and the other "large"
// (conv3d: x; conv_transpose3d: y). Both weights are [C_small][KD][KH][KW]
// [C_large/groups] (reference/tensor.hpp), and small position i meets large
// position j through tap k when, on every axis,
//     j = i*stride - pad_front + k*dilation,   0 <= j < L,  0 <= i < S.
// (pad_back and output_padding only enter through the extents S and L that
// ConvProblem::out() gives.) Three contractions then cover all six
// operator-directions:
//   contract  small[n,i,cs]   = sum_{k, cl in group(cs)} large[n,j,cl] * w[cs,k,cl']
//             conv3d.fwd (x -> y), conv_transpose3d.bwd_data (dy -> dx)
//   scatter   large[n,j,cl]   = sum_{i,k: j(i,k), cs in group(cl)} small[n,i,cs] * w[cs,k,cl']
//             conv3d.bwd_data (dy -> dx), conv_transpose3d.fwd (x -> y)
//   wgrad     dw[cs,k,cl']    = sum_{n,i} small[n,i,cs] * large[n,j(i,k),cl]
//             bwd_weight of both (conv3d: small = dy, large = x;
//             conv_transpose3d: small = x, large = dy)
// Forward adds the bias to its output channel; bwd_weight with bias also
// returns db[c] = sum over n and space of dy[..., c]. So conv_transpose3d.fwd
// is conv3d.bwd_data with the same weight, by construction and by test.
//
// Impl::fast: contract and wgrad are im2col blocks (P positions x taps*C,
// P from the row width, never the whole matrix) times an Eigen GEMM; scatter
// is computed as a gather per stride phase (positions j with the same j mod s
// share one tap set), again im2col x GEMM, or, where kernel == stride with no
// padding or dilation (every large position takes exactly one tap: the k2 s2
// up-convolution, k1 s1), as small rows times the whole weight, written back
// tap by tap. Blocks run on ref_threads() threads; a problem with few blocks
// gets shorter blocks and column tiles of its GEMM, and wgrad tiles the
// columns of dw and, where that is not enough work, splits its reduction into
// a bounded number of chunks whose partial sums are added in chunk order; db
// is summed the same way, over fixed chunks of dy's positions. The
// decomposition is a function of the problem only and the outputs of work
// items are disjoint, so results do not depend on the thread count. Eigen's
// own blocking depends on the cache sizes it detects, so fp64 results are
// reproducible per machine.
#pragma once

#include "reference/conv3d/ref_common.hpp"

namespace kgate::ref {

// The reference result of p, one fp64 tensor per role of p.outputs().
Outputs conv(const ConvProblem& p, const Inputs& in, Impl impl);

// The absolute companion: the same operator-direction on |inputs| (|x|, |w|,
// |dy|, |b|) in fp64 with `impl` (fast by default). Every output element A_i
// bounds the magnitude of every partial sum of that element (up to the fp64
// rounding of A itself, relative gamma_K: inflate by (1 + 2*gamma_K) if
// needed).
Outputs conv_abs(const ConvProblem& p, const Inputs& in, Impl impl = Impl::fast);

// The MPFR result rounded once, directly to `t`, per output (tensors of dtype
// t). Use this, not conv(.., mpfr) then a cast, for the expected value in a
// narrow dtype: rounding through fp64 can be off by one ulp.
Outputs conv_mpfr_rounded(const ConvProblem& p, const Inputs& in, DType t);

}  // namespace kgate::ref
