// Simulated references and kernels for the oracle's self-tests. Not a
// reference of kgate (those are reference/conv3d, reference/groupnorm): a
// small, independent model so that the oracle can be tested before and apart
// from them.
//
// - Reference: per output element the list of its terms (a_j, b_j) in the
//   direction's canonical order; the fp64 result is a compensated (TwoSum)
//   sum of the exact products (float*float is exact in double), A_i the sum
//   of |a_j b_j|. Products and sums of at most 2^20 terms: the result is the
//   exact value to within 2^-52 relative plus 2^-100 A.
// - Kernels: the same terms accumulated in fp32 in a declared Strategy
//   (sequential, reversed, pairwise, blocked, split-K tree, split-K serial,
//   MFMA cdna3 chunks), optionally with one planted Defect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/fill.hpp"
#include "reference/problem.hpp"
#include "reference/reduction.hpp"
#include "reference/tensor.hpp"

namespace kgate::sim {

enum class Order : std::uint8_t { sequential, reversed, pairwise, blocked, split_tree, split_serial, mfma };
std::string_view name(Order o);

enum class Defect : std::uint8_t {
  none,
  tap_off_by_one,      // the first W tap reads one input position further
  pad_wrong_side,      // pad_back used where pad_front belongs
  missing_element,     // one output element never written (poison stays)
  drop_last_chunk,     // the last kDroppedChunk terms of each reduction are skipped
  bf16_accumulation,   // the accumulator is rounded to bf16 after every add
  tf32_inputs,         // fp32 inputs rounded to tf32 (10-bit mantissa) first
  truncate_output,     // fp32 -> dst conversion truncates instead of rounding
  wrong_bias_broadcast,// bias[(c + 1) % C] added to channel c
  gn_unbiased_var,     // GroupNorm variance divided by M - 1
  gn_eps_outside_sqrt, // r = 1 / (sqrt(var) + eps)
  gn_relu_before_affine,
};
std::string_view name(Defect d);
inline constexpr std::int64_t kDroppedChunk = 32;  // a K tile

struct Strategy {
  Order order = Order::sequential;
  std::int64_t param = 0;  // block size (blocked) or split count (split_*)
  DType partial = DType::fp32;
  std::string label() const;
};

// The plan a kernel using `s` over at most k terms declares.
ReductionPlan plan_of(const Strategy& s, std::int64_t k, DType src);

// Sums the products a_j * b_j in fp32 as strategy s does (with the
// accumulation-level defects: drop_last_chunk, bf16_accumulation, tf32_inputs).
float accumulate(const float* a, const float* b, std::int64_t k, const Strategy& s, DType src,
                 Defect d = Defect::none);

// One MFMA cdna3 step (docs/EMULATOR.md): c + sum of 8 exact products under the
// chunk model (align to the chunk max exponent, truncate to 24 fractional
// bits, chunk sum truncated to 31 and c to 24 fractional bits relative to the
// larger exponent, one round-to-nearest-even to fp32).
float cdna3_chunk(float c, const double* products, int n);

// Exact-ish fp64 sum of products and its absolute companion.
void reference_dot(const float* a, const float* b, std::int64_t k, double* value, double* abs_value);

// ---------------------------------------------------------------------------
// Convolution cases

struct Terms {
  std::vector<std::int64_t> start;  // CSR: terms of output i are [start[i], start[i+1])
  std::vector<float> a, b;
};

struct ConvCase {
  ConvProblem p;
  Fill fill;
  Role out = Role::y;
  Tensor in0, in1, bias;  // inputs in the order of p.inputs()
  Tensor ref, abs;        // fp64 reference and absolute companion (both include the bias, |b| in abs)
  Terms terms;            // the correct terms
  std::int64_t kmax = 1;  // declared reduction length
};

// Fills inputs (fill_tensor) and computes the reference.
ConvCase make_conv_case(const ConvProblem& p, const Fill& fill);
// A simulated kernel's output in p.dst (poison where not written).
Tensor run_conv(const ConvCase& c, const Strategy& s, Defect d = Defect::none);

// Poison pattern of the emulator: signalling-NaN bytes.
void poison(Tensor& t);

// ---------------------------------------------------------------------------
// GroupNorm cases (two-pass statistics in fp32)

struct GnCase {
  GroupNormProblem p;
  Fill fill;
  Tensor x, dy, gamma, beta;          // inputs; dy for bwd
  Tensor mean, var, rstd;             // fp64 exact statistics [N][G]
  Tensor mean_fed, rstd_fed;          // bwd: fp32 statistics fed to the kernel (fp64 tensors holding fp32 values)
  Tensor y_ref;                       // fwd: fp64 y;  bwd: fp64 dx
  Tensor dgamma_ref, dbeta_ref;       // bwd
  Tensor dy_masked_ref;               // bwd with relu: dy * [y_fwd > 0] (fp64 mask)
};
GnCase make_gn_case(const GroupNormProblem& p, const Fill& fill);
struct GnOutputs {
  Tensor y;  // fwd y / bwd dx in the problem's dtype
  Tensor mean, rstd;  // fwd, fp32
  Tensor dgamma, dbeta;  // bwd, fp32
};
// pairwise = false: sequential group sums; true: pairwise.
GnOutputs run_gn(const GnCase& c, bool pairwise, Defect d = Defect::none);
// The plan a GroupNorm kernel with sequential/pairwise group sums declares
// over n terms.
ReductionPlan gn_plan(std::int64_t n, bool pairwise);

}  // namespace kgate::sim
