// The bitwise corpus: problems whose inputs come from a declared exact
// generator, with the XXH3-128 digest of the expected output. On these
// inputs every partial sum is exact, so any correct kernel, whatever its
// reduction order, reproduces each digest bit for bit (tier 1 stored as
// digests). GroupNorm forward enters with constant groups (gn_exact
// constant=1): y = relu(beta) and mean are exact, and rstd = 1/sqrt(eps)
// when eps is a power of 4 (entries with eps = 2^-16); only exact outputs
// carry a digest. GroupNorm backward enters with unit deltas (gn_exact
// unit=1: variance 1) and eps = 3, so the fed rstd is 1/2, and groups of a
// power-of-two size: dx, dgamma and dbeta are exact in any order of the
// sums (make_bitwise_entry refuses an entry that is not).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::corpus {

struct BitwiseEntry {
  std::string descriptor;
  Problem problem;
  Fill fill;
  std::map<Role, std::string> digests;  // output role -> digest of the expected output in its dtype
};

// The chosen problems: every operator-direction, each dtype, reduced
// extents, the adapter form, groups / dilation / stride / asymmetric padding.
std::vector<Problem> bitwise_problems();

// The exact fill of a problem (lattice for conv, constant gn_exact for the
// GroupNorm forward, unit gn_exact for its backward) with the corpus seed.
Fill bitwise_fill(const Problem& p);

// Computes the expected digests from the fp64 reference (exact on these
// inputs) rounded once to each output's dtype.
BitwiseEntry make_bitwise_entry(const Problem& p);

nlohmann::json bitwise_document(const std::vector<BitwiseEntry>& entries);

// Throws InputError naming the file, the entry index and the field.
std::vector<BitwiseEntry> load_bitwise(const std::string& path);
// The same on a parsed document; `path` names it in errors.
std::vector<BitwiseEntry> bitwise_from_json(const nlohmann::json& doc, const std::string& path);

// The generated inputs of an entry (derived ones from the reference).
std::map<Role, Tensor> bitwise_inputs(const BitwiseEntry& e);

// The expected outputs of an entry (fp64 reference rounded once to dtype).
std::map<Role, Tensor> bitwise_expected(const Problem& p, const std::map<Role, Tensor>& inputs);

inline constexpr std::uint64_t kBitwiseSeed = 20261202;

}  // namespace kgate::corpus
