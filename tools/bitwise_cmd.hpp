// `kgate bitwise make|run`: the bitwise corpus's commands.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corpus/bitwise.hpp"
#include "oracles/oracle.hpp"

namespace kgate {

// One bitwise entry's outcome: passed, failed (a digest differs; `detail`
// has the evidence) or unimplemented (no kernel runs it).
struct BitwiseResult {
  std::string descriptor, op, fill;
  std::uint64_t seed = 0;
  oracle::State state = oracle::State::passed;
  std::string detail;
  double seconds = 0;
  std::string repro() const;
  nlohmann::json to_json() const;
};

std::string bitwise_default_path();
// Writes the corpus (or, with check, proves the committed file is
// reproduced byte for byte; never modifies it). Exit code.
int bitwise_make(const std::string& path, bool check);
// Runs every entry's kernel and compares digests; a mismatch prints the
// descriptor, the fill and seed, and the first differing elements. Entries
// without a kernel are unimplemented.
std::vector<BitwiseResult> bitwise_results(const std::string& path);
// The same on entries already loaded (corpus::load_bitwise, so that a bad
// file is refused before any other work); mismatches are printed to `log`.
std::vector<BitwiseResult> bitwise_results(const std::vector<corpus::BitwiseEntry>& entries, std::ostream& log);
// `kgate bitwise run`: the results and a summary line. Exit code: 1 when an
// entry failed (or, with require_all, lacks a kernel), 3 when entries lack a
// kernel, else 0.
int bitwise_run(const std::string& path, bool require_all);

}  // namespace kgate
