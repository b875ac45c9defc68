// The one place the reference tests derive their fp64 tolerances. Until the
// oracle library can be used here, every comparison of two fp64 results is
// |a - b| <= factor * A_i with A the absolute companion of the element (the
// same operator on magnitudes, ref_conv.hpp / ref_groupnorm.hpp), and the
// factors below follow from the standard error analysis of sums (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., 3.1 and 4.2):
//
//   gamma_n = n*u / (1 - n*u), u = 2^-53.
//   A sum of products in fp64, any order (a summation tree of depth <= D):
//       |fl(s) - s| <= gamma_D * sum|terms| = gamma_D * A.
//   The MPFR reference is the correctly rounded exact value: |m - s| <= u|s| <= u*A.
//   Dot2 (Ogita, Rump, Oishi 2005): |d - s| <= u|s| + gamma_D^2 * A.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference/conv3d/conv_fast.hpp"
#include "reference/problem.hpp"

namespace kgate::ref::testing {

inline constexpr double kU64 = 0x1p-53;
inline double gamma64(double n) { return n * kU64 / (1.0 - n * kU64); }

// Depth D of the fp64 convolution references: the longest sum of any output
// (a bwd_weight's db sums the whole dy side), plus the bias add, plus
// bwd_weight's chunk reduction in the fast path (at most kMaxSlots chunks).
inline double conv_depth(const ConvProblem& p) {
  const Axis3 o = p.out();
  const double n_in = static_cast<double>(p.n) * p.in[0] * p.in[1] * p.in[2];
  const double n_out = static_cast<double>(p.n) * o[0] * o[1] * o[2];
  return std::max({static_cast<double>(p.reduction_length()), n_in, n_out}) + detail::kMaxSlots + 2;
}

// Two fp64 results of the same sums (direct vs fast): each within gamma_D*A.
inline double pair_factor(double depth) { return 2.0 * gamma64(depth); }
// fp64 result vs the correctly rounded MPFR value.
inline double vs_exact_factor(double depth) { return gamma64(depth) + kU64; }
// Dot2 result vs the correctly rounded MPFR value: both within u|s| plus
// Dot2's second-order term.
inline double dot2_factor(double depth) { return 2.0 * kU64 + gamma64(depth) * gamma64(depth); }

// Adjoint identities <A x, y> = <x, A^T y>: each side is an fp64 operator
// output (depth D1 or D2) paired with exact data by a Dot2 inner product
// (error <= u|s| + gamma_m^2 T <= 2u T for m terms, m*u << 1). Both sides are
// bounded by the same absolute triple product T = <|A| |x|, |y|>, so
//   |lhs - rhs| <= (gamma_D1 + gamma_D2 + 4u) * T.
inline double adjoint_factor(double d1, double d2) { return gamma64(d1) + gamma64(d2) + 4.0 * kU64; }

// GroupNorm, first order with generous constants: mean and the centred sum of
// squares are sums of M terms (gamma_M relative to mean|x| and to var once the
// mean's error, amplified by kappa = |mean|/sigma, is included); rstd, the
// normalisation and the affine add a few roundings; the backward's sums are
// again M terms, and the direct backward's uncentred c2*x + c3 cancels with
// an error of at most kappa * max|xhat| times its companion (ref_groupnorm.hpp):
//   factor = gamma_{4M+64} * (1 + kappa)^2 * (1 + max|xhat|).
inline double gn_factor(double M, double kappa, double max_xhat) {
  return gamma64(4.0 * M + 64.0) * (1.0 + kappa) * (1.0 + kappa) * (1.0 + max_xhat);
}

}  // namespace kgate::ref::testing
