#include "oracles/bounds.hpp"

#include <cmath>
#include <limits>

namespace kgate::oracle {

double gamma(double k, double u) {
  const double ku = k * u;
  if (ku >= 1.0) return std::numeric_limits<double>::infinity();
  return ku / (1.0 - ku);
}

double accumulation_u(const ReductionPlan& plan) {
  // cdna3: alignment truncation and one rounding per 8-product chunk; sm_90:
  // truncation at 25 fractional bits and one round-toward-zero per
  // instruction. Either errs by less than 2^-23 of the chunk's absolute sum
  // per chunk, so over `length` terms gamma_length(2^-23) bounds both.
  if (plan.model != AccumModel::ieee_rn) return std::ldexp(1.0, -23);
  return unit_roundoff(plan.acc);
}

double output_u(DType dst) {
  if (dst == DType::fp32 || dst == DType::fp64) return 0.0;
  return unit_roundoff(dst);
}

std::int64_t term_depth(const ReductionPlan& plan, DType src) {
  return plan.depth() + (src == DType::fp32 || src == DType::fp64 ? 1 : 0);
}

double rigorous_relative(const ReductionPlan& plan, DType src) {
  const double g = gamma(static_cast<double>(term_depth(plan, src)), accumulation_u(plan));
  const double up = plan.narrow_partials() ? unit_roundoff(plan.partial) : 0.0;
  const double uo = plan.operand_bits > 0 ? std::ldexp(1.0, -plan.operand_bits) : 0.0;
  return (1.0 + g) * (1.0 + up) * (1.0 + uo) * (1.0 + uo) - 1.0;
}

double hm_lambda(double roundings, double u, double p_false) {
  if (roundings < 1.0) roundings = 1.0;
  // 2*R*exp(-l^2 (1-u)^2 / 2) = p  ->  l = sqrt(2 ln(2R/p)) / (1-u)
  return std::sqrt(2.0 * std::log(2.0 * roundings / p_false)) / (1.0 - u);
}

double probabilistic_relative(const ReductionPlan& plan, DType src, double lambda) {
  const double u = accumulation_u(plan);
  const double d = static_cast<double>(term_depth(plan, src));
  const double up = plan.narrow_partials() ? unit_roundoff(plan.partial) : 0.0;
  return std::expm1(lambda * std::sqrt(d * u * u + up * up) + d * u * u / (1.0 - u));
}

double output_subnormal_floor(DType dst) {
  switch (dst) {
    case DType::fp16: return std::ldexp(1.0, -25);
    case DType::bf16: return std::ldexp(1.0, -134);
    default: return 0.0;
  }
}

double underflow_floor(const ReductionPlan& plan, DType src, DType dst) {
  const double d = static_cast<double>(term_depth(plan, src));
  const double eta = plan.acc == DType::fp64 ? std::ldexp(1.0, -1074) : std::ldexp(1.0, -149);
  // Each rounding in the subnormal range errs by at most half a quantum; a
  // product of two tiny fp32 numbers can flush entirely: bound by 2^-126 per step.
  return d * (plan.acc == DType::fp64 ? eta : std::ldexp(1.0, -126)) + output_subnormal_floor(dst);
}

double reference_relative(std::int64_t k) { return gamma(static_cast<double>(k), std::ldexp(1.0, -53)); }

}  // namespace kgate::oracle
