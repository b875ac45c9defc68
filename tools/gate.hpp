// The gate's unit of work: one problem, one fill. Generates the inputs,
// runs the production kernel (when there is one) and the fp64 reference,
// and lets the oracle judge every output; then reruns the kernel and
// compares digests (determinism). Data flows one way: problem -> inputs ->
// (kernel, reference) -> oracle -> result.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracles/oracle.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::gate {

using oracle::State;
bool is_failure(State s);

// The verdict an output earns under one fill: the report's state, except that
// "untrusted" only because the reference itself is (nearly) all zeros counts
// as passed: every tier and the NaN/Inf check still had to pass, and such a
// comparison proves nothing about any kernel (a group of one element, dgamma
// of constant groups, y = beta = 0 without affine); the other fills pin that
// output.
State verdict(const oracle::Report& r);

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
// for conv, gn_exact for GroupNorm), a signed random fill, then the pinning
// fills (gate_problems.hpp).
std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed);

// Judges the kernel on one problem with each fill; `repeats` extra kernel
// runs must reproduce the first run's digests bit for bit.
Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats = 1);

// "src:dst" label for tables.
std::string dtype_label(const Problem& p);

}  // namespace kgate::gate
