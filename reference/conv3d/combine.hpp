// The split-combine probe of a convolution plan: inputs (the `combine` fill,
// reference/fill.hpp) under which the order a kernel combines its split
// partials shows in its output, and the replay of a published plan on them.
//
// A plan that splits a reduction publishes its slice map
// (ReductionPlan::split_run: runs of terms along the outer axis, run k into
// partial k) and its combine (tree or serial). Under the probe every
// partial of a main output (y, dx, dw) is the sum of two equal terms (the
// run's first and last), exact, so the kernel's in-slice chain, whatever
// its accumulation model, forms it exactly. The partials (combine.cpp: by
// channel, 2^24 and -2^24 at the ends with 3/2 between, or 2^24, 3/2, 3/2,
// -2^24 repeating) round differently in fp32 in another combine order, and
// a run boundary elsewhere than the plan's mixes a 2^23 term with a 3/4.
// The replay forms the partials exactly and combines them as the plan says,
// in fp32, then adds the bias and rounds once to the output dtype: a kernel
// that combines as it publishes matches it bit for bit; one that combines
// in another order, with another slice map or with float atomics, shows.
// db (backward-weight with bias) is replayed as its column sums run: each
// slice summed in row order in fp32, then the tree.
#pragma once

#include <cstdint>
#include <map>

#include "reference/fill.hpp"
#include "reference/problem.hpp"
#include "reference/reduction.hpp"
#include "reference/tensor.hpp"

namespace kgate::ref {

// The combine fill's values of input `role` of p (fill.kind == combine).
void fill_combine_probe(const ConvProblem& p, Role role, const Fill& fill, Tensor& t);

// The replay of output `output` of p on inputs `in` (a combine fill's):
// `value` in fp64 holds the plan's result per element, rounded to the
// output dtype; `probed` (fp64 0/1, same dims) marks the elements whose
// every partial is exact in fp32 in any order (at most two terms with a
// representable sum; the others are not judged). `plan` is the output's published
// reduction; its split_run must be set when it splits.
struct Replay {
  Tensor value;
  Tensor probed;
  std::int64_t probed_count = 0;
  // Probed elements whose plan result differs from the exact sum: where a
  // kernel that ignored the plan's combine order would show.
  std::int64_t order_sensitive = 0;
};
Replay combine_replay(const ConvProblem& p, Role output, const ReductionPlan& plan, const std::map<Role, const Tensor*>& in);

}  // namespace kgate::ref
