// How a run ends: its exit code and its last line. One definition for every
// subcommand, so that "nothing was verified" can never read as "passed".
//   0  passed: every check ran and passed
//   1  failed: a check failed (or, with --require-all, was not verified)
//   2  error: bad input, or the run could not go on (e.g. out of memory)
//   3  incomplete: nothing failed, but some checks were not verified
//      (no kernel yet: unimplemented; declined by is_supported: skipped),
//      or nothing was checked at all (an empty selection or corpus)
#pragma once

#include <string>

#include "oracles/oracle.hpp"

namespace kgate {

inline constexpr int exit_passed = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_error = 2;
inline constexpr int exit_incomplete = 3;

// The exit codes as --help and the README state them.
inline constexpr const char* exit_codes_help =
    "Exit codes: 0 passed (everything verified), 1 failed, 2 bad input or run error,\n"
    "3 incomplete (nothing failed, but something was unimplemented or skipped;\n"
    "--require-all makes that a failure, 1).";

struct Tally {
  int passed = 0, failed = 0, unimplemented = 0, skipped = 0;
  void add(oracle::State s);
  int total() const { return passed + failed + unimplemented + skipped; }
  int not_verified() const { return unimplemented + skipped; }
  // "passed", "failed" or "incomplete".
  std::string verdict(bool require_all) const;
  int exit_code(bool require_all) const;
  // OK: ... | FAILED: ... | INCOMPLETE: ..., with every count.
  std::string summary_line(bool require_all) const;
};

}  // namespace kgate
