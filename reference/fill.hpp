// Input generators. Each is a value (kind + parameters) that serialises, and
// every element it produces depends only on (seed, tensor role, element index):
// never on thread count, call order or tensor strides.
//
// Kinds and their contracts:
//   uniform(lo, hi)   u in [lo, hi), drawn in fp32, then rounded once to the
//                     tensor's dtype; the rounded values are what any
//                     reference sees.
//   signed(scale)     uniform(-scale, scale)
//   positive(scale)   uniform(0, scale)       (post-ReLU-like data)
//   lattice           integers; the sparse operand of the direction is
//                     nonzero with probability `density`. With
//                     max_a = max |first operand|, max_b = max |second|,
//                     digits = min(significand bits of dst, of acc),
//                     safe = 2^digits / (max_a*max_b), density = min(1, safe/K)
//                     (K the reduction length), so that the expected absolute
//                     sum of an output is far below 2^digits: then every
//                     partial sum in every order is an exact integer in the
//                     accumulator and the result is exact in dst. Whether a
//                     given element's exactness is guaranteed is decided by
//                     the oracle from the absolute companion, not assumed.
//   gn_exact(mean)    GroupNorm x: per (n, group) a representable integer
//                     centre m (mean + an integer in [-8, 8]); elements taken
//                     in pairs (2j, 2j+1) of the group's NDHWC order are
//                     m + delta_j and m - delta_j with integer delta_j in
//                     [1, 4] (an odd last element is m): mean and variance are
//                     exact in any summation order. constant=1 makes every
//                     delta 0 (the output must equal beta). unit=1 makes
//                     every delta +-q (random sign; q the spacing below):
//                     a group of even size has variance q^2 exactly, so
//                     with eps = 3 q^2 its rstd is 1/(2q), exact.
//   gn_sweep(mean, sigma)  GroupNorm x = mean + sigma*u, u in [-1, 1):
//                     cancellation sweeps (mean/sigma from 1 to 1e6).
//   combine(run, db_run)  convolutions: the split-combine probe of a plan
//                     that cuts its reduction into runs of `run` terms
//                     along the outer axis (ReductionPlan::split_run) and
//                     db's rows into runs of db_run (0: none). One operand
//                     is the constant 2^12; the other (the weight for y and
//                     dx, the small operand for dw) is nonzero only at the
//                     first and last term of each run, equal values per run
//                     (+-2^11 or 3*2^-14 by the run's place and the
//                     channel): each partial is exact, and the partials
//                     round differently in another combine order or under
//                     other run boundaries, so the result shows how the
//                     kernel split and combined (reference/conv3d/combine.hpp
//                     replays the plan's).
// Roles other than the main operand (gamma, beta, dy, bias) get small
// integers under lattice/gn_exact and the kind's distribution otherwise.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"
#include "reference/tensor.hpp"

namespace kgate {

enum class FillKind : std::uint8_t { uniform, signed_, positive, lattice, gn_exact, gn_sweep, combine };
std::string_view name(FillKind k);

struct Fill {
  FillKind kind = FillKind::signed_;
  std::uint64_t seed = 0;
  double lo = -1.0, hi = 1.0;    // uniform
  double scale = 1.0;            // signed, positive
  double density = 1.0;          // lattice: probability a sparse-operand element is nonzero
  double mean = 0.0, sigma = 1.0;  // gn_exact (mean), gn_sweep (mean, sigma)
  bool constant = false;         // gn_exact
  bool unit = false;             // gn_exact: deltas +-1
  double run = 1.0, db_run = 0.0;  // combine: terms per split run, db rows per run (0: none)

  bool operator==(const Fill&) const = default;
};

// Parses "signed", "positive:scale=4", "uniform:lo=-2,hi=3", "lattice",
// "lattice:density=0.25", "gn_exact:mean=1024", "gn_exact:unit=1", "gn_sweep:mean=1e4,sigma=1",
// "combine:run=9,db_run=256"
// (seed given separately). Throws InputError(field "fill").
Fill parse_fill(std::string_view text, std::uint64_t seed);
// The text form (without the seed); parse_fill(fill_string(f), f.seed) == f.
std::string fill_string(const Fill& f);
nlohmann::json to_json(const Fill& f);
Fill fill_from_json(const nlohmann::json& j, const std::string& where = "fill");

// Whether every summation order gives the same bits under fill f (lattice,
// gn_exact), where the tiers' exactness conditions hold.
bool exact_in_any_order(const Fill& f);

// A lattice fill for this problem with its density derived as above.
Fill lattice_fill(const Problem& p, std::uint64_t seed);
// Largest magnitude the lattice fill gives a role.
std::int64_t lattice_max(Role r);
// The role that lattice fill makes sparse for a direction.
Role sparse_role(const Problem& p);

// The counter-based generator: 64 uniformly distributed bits of (seed, role, index).
std::uint64_t counter_hash(std::uint64_t seed, Role role, std::int64_t index);

// Fills one input tensor of problem p; t must have the spec's dtype and dims.
void fill_tensor(const Fill& f, const Problem& p, Role role, Tensor& t);

}  // namespace kgate
