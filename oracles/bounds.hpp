// The error-bound formulas of docs/NUMERICS.md as pure functions. Every tolerance in
// kgate is one of these; nothing else states a tolerance.
#pragma once

#include <cstdint>

#include "reference/dtype.hpp"
#include "reference/reduction.hpp"

namespace kgate::oracle {

// gamma_k(u) = k*u / (1 - k*u); +Inf when k*u >= 1 (the bound says nothing).
double gamma(double k, double u);

// Unit roundoff of an accumulation: 2^-23 for the matrix-core models (MFMA
// cdna3 truncating chunks, sm_90 mma.sync round-toward-zero: docs/NUMERICS.md),
// the IEEE u of the accumulator dtype otherwise.
double accumulation_u(const ReductionPlan& plan);

// u_out: 0 for fp64/fp32 outputs (the fp32 rounding of the result is one of
// the D accumulator roundings), the dtype's u for bf16 and fp16.
double output_u(DType dst);

// Depth D seen by one product term: plan.depth(), plus 1 when the products
// themselves round (fp32 inputs multiplied in fp32 without fma: products of
// bf16/fp16 are exact in fp32).
std::int64_t term_depth(const ReductionPlan& plan, DType src);

// Relative tier-2 factor on A_i: (1 + gamma_D(u_acc)) * (1 + u_partial) *
// (1 + u_operand)^2 - 1, u_partial only when the plan stores partials in a
// narrower format, u_operand = 2^-operand_bits only when the plan rounds the
// operands (each product's two factors err by u_operand relative).
double rigorous_relative(const ReductionPlan& plan, DType src);

// lambda of Higham and Mary (2019) so that a run with `roundings` independent
// round-to-nearest roundings has false-alarm probability <= p_false:
// roundings * 2 * exp(-lambda^2 (1-u)^2 / 2) <= p_false.
double hm_lambda(double roundings, double u, double p_false = 1e-6);

// Relative tier-3 factor on A_i: exp(lambda*sqrt(D*u^2 + u_p^2) + D*u^2/(1-u)) - 1
// (the Azuma-Hoeffding sum of squared bounds generalises lambda*sqrt(D)*u to
// one extra rounding of the narrower partial with u_p).
double probabilistic_relative(const ReductionPlan& plan, DType src, double lambda);

// Half the subnormal quantum of a bf16 or fp16 output (2^-134, 2^-25): the
// absolute error of rounding a result below the dtype's smallest normal
// once, which u_out*|y| does not cover there. 0 for fp32 and fp64 outputs
// (their rounding is one of the accumulator's, covered by underflow_floor).
double output_subnormal_floor(DType dst);

// Absolute floor for underflow: D * 2^-126 for an fp32 accumulator (D *
// 2^-1074 for fp64), plus output_subnormal_floor(dst) for the output's own
// rounding.
double underflow_floor(const ReductionPlan& plan, DType src, DType dst);

// Error of the fp64 reference itself: gamma_K(2^-53) * A_i (the reference
// sums K exact products in fp64 in some order); added so the bound is
// against the exact result, not against the reference.
double reference_relative(std::int64_t k);

}  // namespace kgate::oracle
