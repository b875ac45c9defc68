// The oracle: the one place in kgate where a candidate output is compared
// with a reference (docs/NUMERICS.md). Every comparison returns a Report: a verdict
// per tier with the evidence, never a bare bool.
//
// Contracts common to every entry point:
//   - `reference` is the operator's result in fp64 (from a reference of
//     reference/, or any fp64-or-better computation) with the candidate's dims.
//   - `abs_companion` (conv) is the same operator applied to |inputs| in fp64
//     (A_i = sum |a_j| |b_j| over the element's terms, + |bias_c| for a
//     forward with bias: reference/conv3d's abs_companion).
//   - `candidate` is the kernel's output in its own dtype (the problem's dst,
//     or fp32 for GroupNorm statistics), same dims; elements the kernel never
//     wrote still hold the runtime's poison (a NaN) and are caught.
//   - `plan` is the reduction structure the kernel declares in its launch
//     plan (reference/reduction.hpp); the bounds come from it, never from
//     the test.
//   - `fill` is the generator used for the inputs: tier 1 (exact) applies to
//     lattice fills only (conv) or gn_exact constant groups (GroupNorm fwd).
// The report's `state` is the gate's verdict: failed if any applicable tier
// or the NaN/Inf check fails, else untrusted if the trust check says so,
// else passed.
//
// How the gate calls it (conv):
//   ref::Outputs want = ref::run_reference(problem, inputs, ref::Impl::fast);
//   ref::Outputs abs  = ref::abs_companion(problem, inputs);
//   Report r = oracle::compare_conv(conv, Role::y, want.at(Role::y), abs.at(Role::y),
//                                   candidate_y, plan.reduction.at("y"), fill, bias_or_null);
//   std::cout << oracle::to_table(r);   // or to_json(r) into the run's report
//   exit status from r.state (passed / failed / untrusted).
// GroupNorm: ref::groupnorm_companion(problem, inputs) gives mean, var, rstd
// (fwd); backward passes the fed mean/rstd; see compare_groupnorm below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/conv3d/combine.hpp"
#include "reference/host_memory.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"
#include "reference/reduction.hpp"
#include "reference/tensor.hpp"

namespace kgate::oracle {

// benchdnn's result states. The oracle itself returns passed, failed,
// untrusted and (per tier) not_applicable; skipped, unimplemented and invalid
// are for the gate (problem not supported, kernel missing, bad input).
enum class State : std::uint8_t { passed, failed, untrusted, not_applicable, skipped, unimplemented, invalid };
std::string_view name(State s);

struct Options {
  double p_false = 1e-6;           // tier-3 false-alarm budget per run
  // Roundings in the whole run for tier 3's union bound: the larger of this,
  // min_run_roundings and this tensor's numel*D is used.
  double run_roundings = 0.0;
  double min_run_roundings = 1e12;  // lambda ~ 9.2 at p_false 1e-6
  // Tier 3 is not applied when a slice's sequential length exceeds this:
  // long same-sign sums stagnate (terms below half an ulp of the running sum
  // are always rounded down), a bias that grows like D, not sqrt(D); the
  // drift is visible at L = 2^18 (mean signed e/(u sqrt(D) A) ~ -0.55,
  // oracle_selftest_report) and would reach lambda near L ~ 2^24.
  std::int64_t tier3_max_sequential = std::int64_t{1} << 20;
  int worst_count = 5;             // worst elements kept per tier
  double max_ref_zero_fraction = 0.95;  // reference with more zeros proves nothing -> untrusted
  double max_extra_zero_fraction = 0.10;  // candidate zeros above the reference's -> untrusted
};

struct WorstElement {
  std::int64_t index = 0;  // linear (row-major) index
  Dims coord;              // NDHWC (or [Cout][KD][KH][KW][Cin/g], [N][G], [C]) coordinates
  double reference = 0, candidate = 0, bound = 0;
  double margin = 0;  // |candidate - reference| / bound (> 1 fails; Inf on a class mismatch)
};

struct TierResult {
  State state = State::not_applicable;
  std::string reason;              // why failed / not applicable
  std::int64_t checked = 0;        // elements the tier judged
  std::int64_t excluded = 0;       // elements the tier could not judge (e.g. A_i > 2^digits in tier 1)
  std::int64_t violations = 0;
  double max_margin = 0;           // largest error/bound over checked elements
  double max_bound_relative = 0;   // largest bound_i / A_i (the tier's relative tolerance)
  std::vector<WorstElement> worst; // by margin, largest first
};

struct ErrorStats {
  // s_i = e_i / (u_acc * sqrt(D) * A_i) over finite elements with A_i > 0.
  double max_scaled = 0, rms_scaled = 0;
  double mean_signed_scaled = 0;  // mean of (cand - ref) / (u sqrt(D) A_i): drift shows here
  double mean_signed_error = 0;   // mean of (cand - ref)
  double max_abs_error = 0;
  std::int64_t count = 0;
};

// The trust check (benchdnn's "mistrusted"), over the finite elements that
// agree in class and that a fused ReLU does not clamp:
//   ref_zero_fraction: elements where a zero candidate would pass every tier
//     that applies to them (the reference is zero, or within its tier-2 and
//     tier-3 bounds of zero and not exact under tier 1);
//   cand_zero_fraction: elements where the candidate is exactly zero;
//   relu_clamped_fraction: share of all elements whose pre-activation a fused
//     ReLU clamps to zero (those are zero by construction and count in
//     neither fraction above).
// Untrusted when no element is left to judge, when the ReLU clamps or the
// reference zeroes more than max_ref_zero_fraction (proves_nothing: this
// comparison cannot tell a kernel from a zero fill, whatever it returns), or
// when the candidate has more than max_extra_zero_fraction more zeros than
// the reference (a candidate that did not compute).
struct TrustResult {
  State state = State::passed;  // passed or untrusted
  double ref_zero_fraction = 0, cand_zero_fraction = 0, relu_clamped_fraction = 0;
  bool proves_nothing = false;  // untrusted because of the reference, not the candidate
  std::string reason;
};

struct SpecialsResult {
  State state = State::passed;  // passed or failed
  std::int64_t nan_mismatch = 0;  // NaN in exactly one of reference, candidate
  std::int64_t inf_mismatch = 0;  // Inf (by sign) in exactly one, beyond overflow of dst
  std::int64_t first_index = -1;
  std::vector<WorstElement> examples;
};

struct Report {
  std::string what;        // "conv3d.fwd y", "groupnorm.bwd dx"
  std::string descriptor;  // reproduction: descriptor
  std::string fill;        // reproduction: fill string + seed
  std::string plan;        // the declared reduction, printed
  std::int64_t numel = 0;
  std::int64_t depth = 0;  // D used by the bounds
  double u_acc = 0, u_out = 0, lambda = 0;
  TierResult tier1, tier2, tier3;
  ErrorStats stats;
  TrustResult trust;
  SpecialsResult specials;
  State state = State::passed;

  bool passed() const { return state == State::passed; }
};

// ---------------------------------------------------------------------------
// Convolution, every op and direction. `output` is the role compared: y (fwd),
// dx (bwd_data), dw or db (bwd_weight). `bias` (fwd with problem.bias, any
// dtype, [Cout]) feeds the epilogue term u_acc*(|y| + |b|) per epilogue op,
// plus u_out*(|y| + |b|) when the plan rounds the sum to the output dtype
// before the epilogue (ReductionPlan::rounded_before_epilogue); pass nullptr
// otherwise. For db the terms are dy alone (A = sum |dy|).
Report compare_conv(const ConvProblem& problem, Role output, const Tensor& reference,
                    const Tensor& abs_companion, const Tensor& candidate, const ReductionPlan& plan,
                    const Fill& fill, const Tensor* bias = nullptr, const Options& options = {});

// The combine probe (reference/conv3d/combine.hpp: the fill `combine`): the
// candidate must equal the replay of its plan's split combine bit for bit on
// every probed element (tier 1; tiers 2 and 3 do not apply). Untrusted,
// proving nothing, when no element is probed.
Report compare_replay(const ConvProblem& problem, Role output, const ref::Replay& replay, const Tensor& candidate,
                      const ReductionPlan& plan, const Fill& fill, const Options& options = {});

// ---------------------------------------------------------------------------
// GroupNorm. The per-element tolerance needs the statistics and the inputs.
// Forward (docs/NUMERICS.md), with r = rstd, mu = mean, xhat_i = (x_i - mu) r,
// meanabs = mean |x| over the group, kappa = meanabs * r:
//   tol_i = |g_c| [gamma_{D+5} r (|x_i| + meanabs) + 0.5 |xhat_i| dvar]
//           + u (|beta_c| + |y_i|) + u_out |y_i| + eta_out
// (eta_out = output_subnormal_floor(dst): a y below the dtype's smallest
// normal errs by up to half a subnormal quantum when stored)
//   dvar  = (gamma_{D+4} (3 var + 4 sqrt(var) meanabs) + (gamma_D meanabs)^2
//            + 2u (var + eps)) / (var + eps)
// (mean error <= gamma_D meanabs; the centred squares of a two-pass or
// Welford/Chan variance err by gamma (3 var + 4 sigma meanabs) to first order;
// rsqrt adds a few u, covered by the +5). Statistics outputs: mean
// |m^ - mu| <= gamma_{D+1} meanabs; rstd |r^ - r| <= r (0.5 dvar + 4u).
// Backward: see oracles/groupnorm_bounds.cpp for the derivation.
struct GroupNormInputs {
  const Tensor* x = nullptr;      // [N][D][H][W][C], as fed to both
  const Tensor* dy = nullptr;     // bwd: as fed to the kernel (with relu the oracle applies the mask)
  const Tensor* gamma = nullptr;  // [C] or nullptr when !affine (gamma = 1)
  const Tensor* beta = nullptr;   // [C] or nullptr (beta = 0)
  const Tensor* mean = nullptr;   // [N][G]: fwd: exact statistics (fp64); bwd: as fed to the kernel
  const Tensor* rstd = nullptr;   // [N][G]: same
  const Tensor* var = nullptr;    // [N][G] fwd: exact biased variance (fp64); bwd: unused
};

// `output`: fwd y, mean, rstd; bwd dx, dgamma, dbeta. `plan`: the declared
// reduction over one group's M elements (fwd statistics, bwd sum1/sum2) or,
// for dgamma/dbeta, over the N*D*H*W elements of a channel.
Report compare_groupnorm(const GroupNormProblem& problem, Role output, const Tensor& reference,
                         const Tensor& candidate, const GroupNormInputs& inputs, const ReductionPlan& plan,
                         const Fill& fill, const Options& options = {});

// ---------------------------------------------------------------------------
// The generic core: per-element bounds are given, the tiers and checks are
// decided here. Used by the two above and by tests of other elementwise
// steps. bound2/bound3 are absolute per-element bounds (bound3 may be empty:
// tier 3 not applicable, with `tier3_reason`); exact_ok[i] says tier 1 may
// judge element i (empty: tier 1 not applicable, with `tier1_reason`);
// scale[i] = u*sqrt(D)*A_i for the statistics (0: not counted).
struct ElementwiseCheck {
  std::string what, descriptor, fill, plan;
  DType dst = DType::fp32;
  Dims dims;
  std::int64_t depth = 0;
  double u_acc = 0, u_out = 0, lambda = 0;
  LargeVector<double> bound2, bound3, scale;
  LargeVector<char> exact_ok;
  // Per element, 1 where a fused ReLU clamps the output to zero by
  // construction (pre-activation below zero beyond its tolerance); empty when
  // the operator has no ReLU. Only the trust check reads it.
  LargeVector<char> relu_clamped;
  std::string tier1_reason, tier3_reason;
};
Report decide(const ElementwiseCheck& check, const Tensor& reference, const Tensor& candidate,
              const Options& options = {});

// ---------------------------------------------------------------------------
// Range: inputs under which a correct kernel cannot be held to the fp64
// reference. Each returns "" when the comparison is sound, else the reason
// (the gate refuses such inputs as bad input before any kernel runs).
//   nonfinite_input: an input element is NaN or Inf (a fill scaled beyond its
//     dtype's range rounds to Inf).
//   conv_range: the absolute companion A_i (the sum of |products|, which
//     bounds every partial sum of every order) exceeds the accumulator's
//     largest finite value (plan.acc): a correct kernel may overflow.
//   groupnorm_range: a statistic's sum may overflow plan.acc: per group
//     M * max (x - mu)^2 (the variance's sum of squares) or M * max |x|
//     (the mean's sum); backward also sum |gamma dy x|, sum |gamma dy| and
//     rstd^3 times them (the c2 = T rstd^3 / M term).
std::string nonfinite_input(Role role, const Tensor& t);
std::string conv_range(Role output, const Tensor& abs_companion, const ReductionPlan& plan);
std::string groupnorm_range(const GroupNormProblem& p, const GroupNormInputs& in, const ReductionPlan& plan);

// ---------------------------------------------------------------------------
// Output.
std::string to_table(const Report& r);  // a short human-readable table
nlohmann::json to_json(const Report& r);
// NDHWC coordinates of a linear index.
Dims unravel(std::int64_t index, const Dims& dims);

}  // namespace kgate::oracle
