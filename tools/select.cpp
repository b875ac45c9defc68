#include "tools/options.hpp"
#include "tools/select.hpp"

#include <algorithm>
#include <set>

#include "corpus/bitwise.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "tools/gate.hpp"
#include "tools/gate_problems.hpp"
#include "tools/verify.hpp"

namespace kgate {

bool filter_matches(const corpus::Entry& e, const Problem& p, const std::vector<std::string>& filters) {
  const std::string od = op_dir_name(p);
  const std::string op = od.substr(0, od.find('.')), dir = od.substr(od.find('.') + 1);
  for (const std::string& f : filters) {
    const auto eq = f.find('=');
    if (eq == std::string::npos) throw InputError("--filter", "expected KEY=VALUE, got '" + f + "'");
    const std::string k = f.substr(0, eq), v = f.substr(eq + 1);
    bool ok = false;
    if (k == "op") ok = op == v || od == v;
    else if (k == "dir") ok = dir == v;
    else if (k == "dtype") ok = gate::dtype_label(p).find(v) != std::string::npos;
    else if (k == "site") ok = std::any_of(e.sites.begin(), e.sites.end(), [&](const std::string& s) { return s.find(v) != std::string::npos; });
    else if (k == "config") ok = e.config == v;
    else if (k == "form") ok = std::string(kgate::name(e.form)) == v;
    else throw InputError("--filter", "unknown key '" + k + "' (op, dir, dtype, site, config, form)");
    if (!ok) return false;
  }
  return true;
}

std::vector<Problem> select_corpus(const Selection& s, bool require_some) {
  auto entries = corpus::load_shapes(s.corpus);
  for (auto& e : gate::plan_entries()) entries.push_back(std::move(e));
  for (const std::string& c : s.configs)
    if (std::none_of(entries.begin(), entries.end(), [&](const corpus::Entry& e) { return e.config == c; }))
      throw InputError("--config", "no configuration '" + c + "' in " + s.corpus);
  std::vector<Problem> work;
  std::set<std::string> seen;
  for (const auto& e : entries) {
    if (std::find(s.configs.begin(), s.configs.end(), e.config) == s.configs.end()) continue;
    if (!filter_matches(e, e.problem, s.filters)) continue;
    // Plan-derived problems keep their extents: they are the boundaries.
    const bool keep = s.full || e.config == gate::kPlanConfig;
    const Problem p = keep ? e.problem : reduce_extents(e.problem, s.flop_budget);
    if (seen.insert(to_descriptor(p)).second) work.push_back(p);
  }
  if (require_some && work.empty()) throw InputError("--filter", "selects no problem");
  return work;
}

std::vector<Problem> select_bitwise(const std::string& path, const std::vector<std::string>& filters) {
  std::vector<Problem> out;
  for (const auto& b : corpus::load_bitwise(path)) {
    corpus::Entry e;
    e.descriptor = b.descriptor;
    e.problem = b.problem;
    if (filter_matches(e, b.problem, filters)) out.push_back(b.problem);
  }
  return out;
}

void ProblemList::add(const Problem& p) {
  if (seen_.insert(to_descriptor(p)).second) problems_.push_back(p);
}

void ProblemList::add_corpora(const Selection& s, const std::string& bitwise) {
  if (!bitwise.empty())
    for (const Problem& p : select_bitwise(bitwise, s.filters)) add(p);
  for (const Problem& p : select_corpus(s, problems_.empty())) add(p);
}

void add_corpora_options(CLI::App& c, Selection& s, std::string& bitwise) {
  c.add_option("--corpus", s.corpus, "shapes corpus file")->capture_default_str();
  c.add_option("--bitwise", bitwise, "bitwise corpus file ('' leaves it out)")->capture_default_str();
  c.add_option("--config", s.configs, "configurations (A B C D)")->capture_default_str();
  c.add_option("--filter", s.filters, "KEY=VALUE (op, dir, dtype, site, config, form); repeatable");
  c.add_flag("--full", s.full, "full extents");
  options::add_flop_budget(c, s.flop_budget);
}

}  // namespace kgate
