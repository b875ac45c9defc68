// The gate's unit of work: one problem, one fill. Generates the inputs,
// runs the production kernel (when there is one) and the fp64 reference,
// and lets the oracle judge every output; then reruns the kernel and
// compares digests (determinism). Data flows one way: problem -> inputs ->
// (kernel, reference) -> oracle -> result.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::gate {

using oracle::State;
bool is_failure(State s);

struct RoleResult {
  std::string role;
  oracle::Report report;
};

struct FillResult {
  Fill fill;
  State state = State::passed;
  std::string detail;             // kernel error, determinism mismatch, ...
  std::vector<RoleResult> roles;  // one per output role
  std::string digest;             // of the kernel's first output
  double worst_margin = 0;        // largest tier-2 margin over the roles
};

struct Result {
  std::string descriptor, op, dtype;
  State state = State::passed;
  std::string reason;             // unsupported / unimplemented / invalid reason
  std::string plan;               // printed launch plan
  std::vector<FillResult> fills;
  double worst_margin = 0;
  double seconds = 0;
  std::string repro() const;      // the exact command reproducing the worst fill
  nlohmann::json to_json() const;
};

// The fills the gate runs by default for a problem: the exact fill (lattice
// for conv, gn_exact for GroupNorm) and a signed random fill.
std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed);

// The oracle's verdict on every output of p: `got` (in the outputs' dtypes)
// against the fp64 reference on inputs `in`, bounds from plan.reduction.
std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got);

// Judges the kernel on one problem with each fill; `repeats` extra kernel
// runs must reproduce the first run's digests bit for bit.
Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats = 1);

// "src:dst" label for tables.
std::string dtype_label(const Problem& p);

}  // namespace kgate::gate
