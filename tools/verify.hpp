// `kgate verify`: the gate over the shapes corpus.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "reference/problem.hpp"
#include "tools/bitwise_cmd.hpp"
#include "tools/gate.hpp"

namespace kgate {

struct VerifyOptions {
  std::string corpus;                    // shapes corpus file
  std::string backend = "auto";          // auto | host | hip | cuda | torch | python:MODULE[:ATTR]
  std::vector<std::string> backend_options;  // external backends: KEY=VALUE for the driver
  std::string model = "fp32-any-order";  // external backends: the accumulation model
  double driver_timeout = 600;           // external backends: seconds per request
  std::vector<std::string> filters;      // KEY=VALUE, all must match
  // Configurations to run: the corpus's, and "plan" (the kernels' boundary problems).
  std::vector<std::string> configs{"A", "B", "C", "D", "plan"};
  bool full = false;                     // full extents (GPU backends)
  // The developer's loop: the kernels' boundary problems (--config plan) of
  // the --filter'ed operators, the exact fill alone, and the bitwise entries
  // those filters select.
  bool quick = false;
  std::string reference = "auto";        // host | device | auto (gate::resolve_reference)
  double flop_budget = 3e8;              // reduced extents: largest extent within this
  int jobs = 1;
  std::uint64_t seed = 1;
  int repeats = 1;                       // extra kernel runs that must reproduce the digests
  std::string bitwise;                   // bitwise corpus ("" skips it)
  std::string report = "kgate-report.json";  // "-": standard output
  std::string junit = "kgate-junit.xml";
  bool require_all = false;              // unimplemented or skipped is a failure
  double memory_limit = 0;               // bytes the run may use; 0: available memory
  // Spreads the evaluation over processes (tools/verify_mpi.hpp): given the
  // work list and the evaluation of one problem, returns every result in
  // work order on the process that reports, nullopt on the others, which
  // then print and write nothing. Unset: a pool of `jobs` threads here.
  std::function<std::optional<std::vector<gate::Result>>(const std::vector<Problem>&,
                                                         const std::function<gate::Result(const Problem&)>&)>
      distribute;
  bool reports = true;          // this process prints the header (false on MPI ranks other than 0)
  std::string processes_label;  // added to the header, e.g. ", 2 MPI ranks"
};

std::string verify_default_corpus();

// The JUnit XML of a run's results: one testcase per problem and bitwise
// entry; failed (and, with require_all, unverified) ones carry the evidence
// and the repro line.
std::string junit_xml(const std::vector<gate::Result>& results, const std::vector<BitwiseResult>& bitwise,
                      double seconds, bool require_all, const std::string& suite = "kgate verify");
void add_verify_options(CLI::App& cmd, VerifyOptions& opt);
int run_verify(const VerifyOptions& opt);

// Refuses (InputError naming `flag`) a set of problems whose estimated
// footprint (gate::footprint_bytes) does not fit in memory when `jobs` of
// them run at once: the `jobs` largest must fit in `limit` bytes (0: the
// available memory).
void check_memory(const std::vector<Problem>& problems, int jobs, double limit);

// The reduced-extent version of a problem: the same channels, groups, kernel,
// stride, padding, form and dtypes, with the interior spatial extent cut to
// the largest cube side (at most the original) whose cost is within budget
// (never below 1): conv FLOPs <= flop_budget; GroupNorm elements <=
// flop_budget / 256. A conv is never cut below the smallest side at which
// every kernel tap meets the input (when the original has that property).
Problem reduce_extents(const Problem& p, double flop_budget);

}  // namespace kgate
