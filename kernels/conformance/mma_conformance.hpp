// MMA conformance: the sm90 atoms run over chains of generated operands on
// the backend this file is compiled for, and the host's sm90 numeric model
// (host/mma_numerics) recomputes every instruction's every output on the CPU
// from the same operands: the outputs must be bit-identical.
//
// Operands are a pure function of (seed, instruction, matrix, row, col), so
// the device builds them in registers (through the atom's load_a / load_b:
// the layout tables are checked too) and the CPU rebuilds them. Each
// instruction draws one of kMmaModes operand families: moderate values, the
// whole exponent range, subnormals, heavy cancellation (the second half of K
// negates the first, some by one ulp less), signed zeros, Inf and NaN, wide
// alignment spreads, values near overflow. A chain of `chain` instructions
// feeds each D into the next C (K-loops of many instructions); the model
// checks instruction t with the device's D of t-1 as C (a non-finite D is
// replaced by a fresh value, on the device and in the check alike).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kgate::conformance {

struct MmaReport {
  std::string atom;
  std::uint64_t instructions = 0, outputs = 0, identical = 0;
  std::uint64_t nan = 0, inf = 0, zero = 0, neg_zero = 0, subnormal = 0;  // classes of the device's outputs
  std::vector<std::string> mismatches;  // the first few, with operands and the model's terms
};

inline constexpr int kMmaModes = 8;

// Runs `instructions` (a multiple of 4 * `chain`) of every sm90 atom.
std::vector<MmaReport> run_mma_conformance(std::uint64_t instructions, int chain, std::uint64_t seed);

}  // namespace kgate::conformance
