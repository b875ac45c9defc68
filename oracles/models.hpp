// Accumulation models: the reduction structure the oracle assumes for a
// kernel whose launch plan kgate cannot read (PyTorch, cuDNN, MIOpen,
// Triton, a user's own). Each model names how one output element's terms
// may have been summed; its bounds are derived from the ReductionPlan it
// gives (docs/NUMERICS.md), exactly as for kgate's own plans.
//
//   fp32-any-order     every term in fp32, in any order (one sequential loop
//                      over all K terms bounds every order: D = K).
//   fp32-split:S       S slices of ceil(K/S) terms, each summed in any order,
//                      the S fp32 partials combined in any order (D =
//                      ceil(K/S) + S - 1).
//   tf32               fp32-any-order with both operands of every product
//                      rounded to tf32 (11 significand bits) first; tier 3
//                      not applicable (the operands' roundings are shared
//                      between terms).
//   bf16-partials:S    fp32-split:S with every slice partial stored in bf16
//                      before the combine (the split-K defect of a library
//                      that keeps its partials in the output dtype); under
//                      fp32-any-order such a kernel fails.
//   mma-sm90           any order of sm_90 mma.sync instructions (16
//                      products and the running sum fused, truncated,
//                      rounded toward zero): bf16 / fp16 convolutions.
//   mfma-cdna3         any order of CDNA3 MFMA chunks (8 products aligned
//                      and truncated): bf16 / fp16 convolutions.
// A convolution's bias may be added before or after the result is rounded
// to the output dtype (PyTorch adds it after cuDNN's convolution): every
// model bounds the later, looser order. GroupNorm takes fp32-any-order and
// fp32-split:S (its bounds are derived for fp32 statistics); the others are
// refused for it, naming --model. GroupNorm's y may fold the mean into a
// shift (ATen's x * s + (beta - mean * s)), which is not exact on constant
// groups: under a model, tier 1 does not apply to y.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reference/problem.hpp"
#include "reference/reduction.hpp"

namespace kgate::oracle {

struct Model {
  enum class Kind : std::uint8_t { any_order, split, tf32, bf16_partials, mma_sm90, mfma_cdna3 };
  Kind kind = Kind::any_order;
  std::int64_t splits = 1;  // split and bf16_partials: S
  std::string name() const;  // the --model spelling, e.g. "bf16-partials:8"
};

// Parses a --model value; an InputError naming --model otherwise.
Model parse_model(const std::string& text);
// The models' spellings, for help texts ("S" stands for the slice count).
std::string model_help();

// Per output role of p (by role name), the reduction the model declares.
// Throws InputError("--model") for a model that does not apply to p.
std::map<std::string, ReductionPlan> model_reductions(const Problem& p, const Model& m);

}  // namespace kgate::oracle
