// The gate's unit of work: one problem, one fill. Generates the inputs,
// runs the production kernel (when there is one) and the fp64 reference,
// and lets the oracle judge every output; then reruns the kernel and
// compares digests (determinism). Data flows one way: problem -> inputs ->
// (kernel, reference) -> oracle -> result.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
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

// An error of the run, not a verdict on the kernel (an allocation failed):
// evaluate() throws it, naming the problem; the command line exits 2.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Told the phase evaluate() enters, e.g. "kernel (fill signed seed 1)";
// phases: inputs, kernel, rerun, reference, oracle.
using PhaseFn = std::function<void(const std::string&)>;

// The oracle's verdict on every output of p: `got` (in the outputs' dtypes)
// against the fp64 reference on inputs `in`, bounds from plan.reduction.
std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got,
                              const std::function<void(const char*)>& phase = [](const char*) {});

// Judges the kernel on one problem with each fill; `repeats` extra kernel
// runs must reproduce the first run's digests bit for bit. A failed
// allocation throws RunError; a kernel's own error is a failed verdict.
Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats = 1, const PhaseFn& phase = {});

// The bytes evaluate() holds at its peak for p, estimated from the tensor
// shapes and the plan: the inputs twice (host and device copies), the
// outputs three times (device, the first run's, a rerun's), the fp64
// reference and its absolute companion per output element, and the plan's
// workspace. 0 when no kernel runs p (unimplemented or unsupported).
double footprint_bytes(const Problem& p);

// The memory a run may use: MemAvailable of /proc/meminfo (the free physical
// memory from sysconf when it cannot be read).
double available_memory();

// The emulator's settings as a run uses them (the host backend's
// configuration, read from the KGATE_HOST_* / KGATE_MFMA_MODEL /
// KGATE_LDS_CHECK environment). A bad environment value is an InputError
// naming the variable.
nlohmann::json backend_settings();

// "src:dst" label for tables.
std::string dtype_label(const Problem& p);

}  // namespace kgate::gate
