// `kgate verify`: the gate over the shapes corpus.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "reference/problem.hpp"

namespace kgate {

struct VerifyOptions {
  std::string corpus;                    // shapes corpus file
  std::string backend = "auto";          // auto | host | hip | cuda
  std::vector<std::string> filters;      // KEY=VALUE, all must match
  std::vector<std::string> configs{"A", "B", "C", "D"};  // configurations to run
  bool full = false;                     // full extents (GPU backends)
  double flop_budget = 3e8;              // reduced extents: largest extent within this
  int jobs = 1;
  std::uint64_t seed = 1;
  int repeats = 1;                       // extra kernel runs that must reproduce the digests
  std::string bitwise;                   // bitwise corpus ("" skips it)
  std::string report = "kgate-report.json";
  std::string junit = "kgate-junit.xml";
};

std::string verify_default_corpus();
void add_verify_options(CLI::App& cmd, VerifyOptions& opt);
int run_verify(const VerifyOptions& opt);

// The reduced-extent version of a problem: the same channels, groups, kernel,
// stride, padding, form and dtypes, with the interior spatial extent cut to
// the largest cube side (at most the original) whose cost is within budget
// (never below 1): conv FLOPs <= flop_budget; GroupNorm elements <=
// flop_budget / 256. A conv is never cut below the smallest side at which
// every kernel tap meets the input (when the original has that property).
Problem reduce_extents(const Problem& p, double flop_budget);

}  // namespace kgate
