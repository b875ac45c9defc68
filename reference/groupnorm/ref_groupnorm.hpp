// The GroupNorm references (PyTorch group_norm semantics, NDHWC).
//
// Per (n, g), over the M = (C/G)*D*H*W elements of channels [g*C/G, (g+1)*C/G):
//   mean = sum(x)/M,  var = sum((x - mean)^2)/M (biased),  rstd = 1/sqrt(var + eps)
//   y    = (x - mean) * rstd * gamma_c + beta_c, then max(y, 0) when relu
//          (affine off: gamma = 1, beta = 0; ReLU maps -0 to +0 and keeps NaN).
// Backward (inputs x, dy, gamma, beta, and the forward's mean and rstd as
// given, e.g. fp32): with relu, dy is first masked by [y_fwd > 0], y_fwd
// recomputed in fp64 from x and the given mean, rstd, gamma, beta. Then
// (docs/NUMERICS.md, with mu = mean, r = rstd, sums over the group's elements):
//   sum1 = sum_c gamma_c * sum(dy*x),  sum2 = sum_c gamma_c * sum(dy)
//   c2 = (sum2*mu - sum1) * r^3 / M,   c3 = -c2*mu - sum2*r/M
//   dx = r*gamma_c*dy + c2*x + c3
//   dgamma_c = sum_n (sum(dy*x) - sum(dy)*mu) * r,  dbeta_c = sum_n sum(dy)
//
// Impl::direct evaluates exactly these formulas in fp64 (plain two-pass sums).
// Impl::fast is two-pass with compensated (Dot2) sums, threaded over (n, g),
// and evaluates the backward in centred form (x - mu), which avoids the
// cancellation of c2*x + c3 when |mean| >> sigma. Impl::dot2 is fast.
// Impl::mpfr sums exactly and evaluates the rest with P >= 256 + log2(M) bits;
// each output is then rounded once, so it is the correctly rounded value
// unless the exact value lies within a relative 2^-(P-log2(M)-8) of a rounding
// boundary (sqrt and division are not exact in any precision).
#pragma once

#include "reference/conv3d/ref_common.hpp"

namespace kgate::ref {

// y, mean, rstd (fwd) or dx, dgamma, dbeta (bwd), fp64.
Outputs groupnorm(const GroupNormProblem& p, const Inputs& in, Impl impl);

// The MPFR result rounded once, directly to t (tensors of dtype t).
Outputs groupnorm_mpfr_rounded(const GroupNormProblem& p, const Inputs& in, DType t);

// The derived inputs of a backward problem (mean and rstd, TensorSpec::derived)
// from its x (and gamma, beta) through the forward reference `impl`, stored in
// the spec's dtype (fp32): with Impl::mpfr rounded once from the MPFR value,
// otherwise from the fp64 value. Add them to the generated inputs to get a
// consistent backward input set.
Outputs groupnorm_derived_inputs(const GroupNormProblem& bwd, const Inputs& in, Impl impl = Impl::fast);

// What the GroupNorm tolerance of docs/NUMERICS.md needs, computed in fp64 with the
// fast (compensated two-pass) statistics of x. Statistics are [N][G], the rest
// has x's dims or [C].
struct GroupNormCompanion {
  std::int64_t group_size = 0;  // M
  Tensor mean, var, rstd;       // of x (var biased)
  Tensor mean_abs;              // mean |x| per group
  Tensor kappa;                 // |mean| / sqrt(var + eps)
  Tensor xhat;                  // (x - mean) * rstd
  // The absolute companion per output role (each the same formula on
  // magnitudes, so |error of a correct kernel| scales with it):
  //   fwd: y     |gamma_c| * |xhat| + |beta_c|
  //        mean  mean |x|;  rstd  rstd
  //   bwd (dy masked as the operator masks it, mu/r the given mean/rstd inputs):
  //        dx     r * (|gamma_c dy| + mean_g|gamma dy| + |xhat'| * mean_g|gamma dy xhat'|),
  //               xhat' = (x - mu) * r
  //        dgamma sum_n sum |dy * xhat'|;  dbeta  sum_n sum |dy|
  Outputs abs;
};
GroupNormCompanion groupnorm_companion(const GroupNormProblem& p, const Inputs& in);

}  // namespace kgate::ref
