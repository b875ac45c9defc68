// Problem selection shared by the commands that walk the corpus (verify,
// audit, bench): configurations, --filter, reduced or full extents.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "corpus/corpus_file.hpp"
#include "reference/problem.hpp"

namespace kgate {

struct Selection {
  std::string corpus;                                    // shapes corpus file
  std::vector<std::string> configs{"A", "B", "C", "D"};  // configurations
  std::vector<std::string> filters;                      // KEY=VALUE, all must match
  bool full = false;                                     // full extents
  double flop_budget = 3e8;                              // reduced extents (reduce_extents)
};

// Whether a corpus entry's problem p passes every filter (op, dir, dtype,
// site, config, form). Throws InputError("--filter") on a malformed filter.
bool filter_matches(const corpus::Entry& e, const Problem& p, const std::vector<std::string>& filters);

// The selected corpus problems, reduced unless `full`, deduplicated across
// configurations by descriptor, in corpus order. Throws InputError for an
// unknown configuration (--config) and for filters that select nothing when
// `require_some`.
std::vector<Problem> select_corpus(const Selection& s, bool require_some = true);

// The bitwise corpus's problems that pass the filters (its entries carry no
// configuration or site: such filters select none of them).
std::vector<Problem> select_bitwise(const std::string& path, const std::vector<std::string>& filters);

// A command's problems in order, each descriptor once (the first wins).
class ProblemList {
 public:
  void add(const Problem& p);
  // The bitwise corpus's problems that pass s.filters (unless `bitwise` is
  // ''), then the corpus selection (select_corpus; it must select some when
  // the list is still empty).
  void add_corpora(const Selection& s, const std::string& bitwise);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
  std::set<std::string> seen_;
};

// The selection flags of a command over both corpora (audit, digests):
// --corpus, --bitwise (into `bitwise`), --config, --filter, --full,
// --flop-budget.
void add_corpora_options(CLI::App& c, Selection& s, std::string& bitwise);

}  // namespace kgate
