// What the gate adds to the shapes corpus so that it can fail every wrong
// kernel it should: the problems each kernel's plan chooses for its own
// branches and boundaries (kernels::boundary_problems), and the fills that
// pin every output.
#pragma once

#include <cstdint>
#include <vector>

#include "corpus/corpus_file.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::gate {

// The configuration name the plan-derived problems carry in `kgate verify`
// (`--config plan` selects them alone; `--filter site=plan` too).
inline constexpr const char* kPlanConfig = "plan";

// One corpus entry per boundary problem of every implemented
// operator-direction: config kPlanConfig, site "plan: <why>", logical form.
// Their extents are the plan's own and are never reduced.
std::vector<corpus::Entry> plan_entries();

// Fills under which a correct kernel's error is far below the oracle's bound
// while a wrong formula's is far above it, beside the default ones.
// GroupNorm: constant groups (gn_exact constant=1: variance 0, so rstd is
// 1/sqrt(eps) and y is beta, exact) and a near-eps variance sweep (gn_sweep
// with mean 0 and variance eps, where rstd depends on eps as much as on the
// data). Conv: none beyond the lattice and signed fills.
std::vector<Fill> pinning_fills(const Problem& p, std::uint64_t seed);

}  // namespace kgate::gate
