#include "tools/verify.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "corpus/corpus_file.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/fill.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"

namespace kgate {

std::string verify_default_corpus() { return std::string(KGATE_SOURCE_DIR) + "/corpus/shapes.json"; }

void add_verify_options(CLI::App& cmd, VerifyOptions& opt) {
  cmd.add_option("--corpus", opt.corpus, "shapes corpus file")->capture_default_str();
  cmd.add_option("--backend", opt.backend, "auto | host | hip | cuda")
      ->check(CLI::IsMember({"auto", "host", "hip", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--filter", opt.filters, "KEY=VALUE (op, dir, dtype, site, config, form); repeatable, all must match");
  cmd.add_option("--config", opt.configs, "configurations to run (A B C D)")->capture_default_str();
  cmd.add_flag("--full", opt.full, "full extents (for GPU backends)");
  cmd.add_option("--flop-budget", opt.flop_budget, "reduced extents: cost cap per problem")->capture_default_str();
  cmd.add_option("--jobs,-j", opt.jobs, "problems run in parallel")->check(CLI::Range(1, 256))->capture_default_str();
  cmd.add_option("--seed", opt.seed, "generator seed")->capture_default_str();
  cmd.add_option("--report", opt.report, "JSON report file")->capture_default_str();
  cmd.add_option("--junit", opt.junit, "JUnit XML file")->capture_default_str();
}

namespace {

// benchdnn's result states, each with its reason: never folded into "failed".
enum class State { passed, failed, untrusted, unsupported, unimplemented, invalid };
const char* name(State s) {
  switch (s) {
    case State::passed: return "passed";
    case State::failed: return "failed";
    case State::untrusted: return "untrusted";
    case State::unsupported: return "unsupported";
    case State::unimplemented: return "unimplemented";
    case State::invalid: return "invalid";
  }
  return "?";
}
bool is_failure(State s) { return s == State::failed || s == State::untrusted || s == State::invalid; }

struct Check {
  std::string name;
  State state;
  std::string detail;
};

struct Result {
  std::string config, descriptor, op, dtype, repro;
  std::vector<std::string> sites;
  std::vector<Check> checks;
  State state = State::passed;
  double seconds = 0;
};

std::string dtype_label(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return std::string(kgate::name(c->src)) + ":" + std::string(kgate::name(c->dst));
  const auto& g = std::get<GroupNormProblem>(p);
  return std::string(kgate::name(g.src)) + ":" + std::string(kgate::name(g.dst));
}

bool matches(const corpus::Entry& e, const Problem& p, const std::vector<std::string>& filters) {
  const std::string od = op_dir_name(p);
  const std::string op = od.substr(0, od.find('.')), dir = od.substr(od.find('.') + 1);
  for (const std::string& f : filters) {
    const auto eq = f.find('=');
    if (eq == std::string::npos) throw InputError("--filter", "expected KEY=VALUE, got '" + f + "'");
    const std::string k = f.substr(0, eq), v = f.substr(eq + 1);
    bool ok = false;
    if (k == "op") ok = op == v || od == v;
    else if (k == "dir") ok = dir == v;
    else if (k == "dtype") ok = dtype_label(p).find(v) != std::string::npos;
    else if (k == "site") ok = std::any_of(e.sites.begin(), e.sites.end(), [&](const std::string& s) { return s.find(v) != std::string::npos; });
    else if (k == "config") ok = e.config == v;
    else if (k == "form") ok = std::string(kgate::name(e.form)) == v;
    else throw InputError("--filter", "unknown key '" + k + "' (op, dir, dtype, site, config, form)");
    if (!ok) return false;
  }
  return true;
}

// The checks a problem gets today: the problem as a value, and the inputs as
// a pure function of (seed, role, index). Kernel checks join as kernels land.
Result verify_one(const corpus::Entry& e, const Problem& p, const VerifyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  r.config = e.config;
  r.descriptor = to_descriptor(p);
  r.op = op_dir_name(p);
  r.dtype = dtype_label(p);
  r.sites = e.sites;
  const Fill fill = lattice_fill(p, opt.seed);
  r.repro = "kgate check '" + r.descriptor + "' --fill " + fill_string(fill) + " --seed " + std::to_string(opt.seed);

  // The problem is a value: descriptor and JSON both round-trip.
  try {
    validate(p);
    const Problem q = parse_descriptor(r.descriptor);
    const Problem j = problem_from_json(nlohmann::json::parse(to_json(p).dump()));
    const bool same = to_descriptor(q) == r.descriptor && to_json(j) == to_json(p);
    r.checks.push_back({"problem", same ? State::passed : State::failed, same ? "" : "descriptor/JSON round trip differs"});
  } catch (const InputError& ex) {
    r.checks.push_back({"problem", State::invalid, ex.what()});
  }

  // Inputs: generated twice, concurrently, must be bit-identical.
  if (r.checks.back().state == State::passed) {
    bool same = true;
    std::string detail;
    for (const auto& s : inputs(p)) {
      if (s.derived) continue;
      auto make = [&] {
        Tensor t(s.dtype, s.dims);
        fill_tensor(fill, p, s.role, t);
        return digest(t);
      };
      auto other = std::async(std::launch::async, make);
      const std::string a = make(), b = other.get();
      if (a != b) {
        same = false;
        detail += std::string(kgate::name(s.role)) + " " + a + " != " + b + "; ";
      }
    }
    r.checks.push_back({"inputs", same ? State::passed : State::failed, detail});
  }

  r.checks.push_back({"kernel", State::unimplemented, "no production kernel for " + r.op + " yet"});

  r.state = State::passed;
  for (const Check& c : r.checks)
    if (is_failure(c.state)) r.state = c.state;
  if (!is_failure(r.state))
    for (const Check& c : r.checks)
      if (c.state == State::unimplemented || c.state == State::unsupported) r.state = c.state;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string junit_xml(const std::vector<Result>& results, double seconds) {
  int failures = 0, skipped = 0;
  for (const auto& r : results) {
    failures += is_failure(r.state);
    skipped += r.state == State::unimplemented || r.state == State::unsupported;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"kgate verify\" tests=\"" << results.size() << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n"
    << "  <testsuite name=\"kgate verify\" tests=\"" << results.size() << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n";
  for (const auto& r : results) {
    x << "    <testcase classname=\"" << xml_escape(r.config + "." + r.op) << "\" name=\"" << xml_escape(r.descriptor)
      << "\" time=\"" << r.seconds << "\">";
    std::string detail;
    for (const auto& c : r.checks)
      if (c.state != State::passed) detail += c.name + ": " + name(c.state) + (c.detail.empty() ? "" : " (" + c.detail + ")") + "\n";
    if (is_failure(r.state))
      x << "\n      <failure message=\"" << name(r.state) << "\">" << xml_escape(detail + "repro: " + r.repro) << "</failure>\n    ";
    else if (r.state != State::passed)
      x << "\n      <skipped message=\"" << xml_escape(detail) << "\"/>\n    ";
    x << "</testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace

Problem reduce_extents(const Problem& p, double flop_budget) {
  Problem best = p;
  if (flops(p) <= flop_budget) return p;
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    for (std::int64_t side = 1;; ++side) {
      ConvProblem q = *c;
      bool capped = true;
      for (int a = 0; a < 3; ++a) {
        const std::int64_t interior = c->in[a] - 2 * c->halo[a];
        const std::int64_t want = std::min(interior, side);
        capped &= want == interior;
        q.in[a] = want + 2 * c->halo[a];
      }
      try {
        q.validate();
      } catch (const InputError&) {
        if (capped) break;
        continue;
      }
      if (flops(Problem(q)) > flop_budget && side > 1) break;
      best = q;
      if (capped) break;
    }
  } else {
    const auto& g = std::get<GroupNormProblem>(p);
    for (std::int64_t side = 1;; ++side) {
      GroupNormProblem q = g;
      bool capped = true;
      for (int a = 0; a < 3; ++a) {
        q.spatial[a] = std::min(g.spatial[a], side);
        capped &= q.spatial[a] == g.spatial[a];
      }
      if (flops(Problem(q)) > flop_budget && side > 1) break;
      best = q;
      if (capped) break;
    }
  }
  return best;
}

int run_verify(const VerifyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.backend == "hip" || opt.backend == "cuda")
    throw InputError("--backend", opt.backend + " is not available in this build (no " + opt.backend + " device runtime)");
  const std::string backend = "host";
  const auto entries = corpus::load_shapes(opt.corpus);
  for (const std::string& c : opt.configs)
    if (std::none_of(entries.begin(), entries.end(), [&](const corpus::Entry& e) { return e.config == c; }))
      throw InputError("--config", "no configuration '" + c + "' in " + opt.corpus);

  // Reduced problems, deduplicated across configurations by descriptor.
  std::vector<std::pair<corpus::Entry, Problem>> work;
  std::set<std::string> seen;
  for (const auto& e : entries) {
    if (std::find(opt.configs.begin(), opt.configs.end(), e.config) == opt.configs.end()) continue;
    if (!matches(e, e.problem, opt.filters)) continue;
    const Problem p = opt.full ? e.problem : reduce_extents(e.problem, opt.flop_budget);
    if (seen.insert(to_descriptor(p)).second) work.emplace_back(e, p);
  }
  if (work.empty()) throw InputError("--filter", "selects no problem");

  const bool tty = ::isatty(STDOUT_FILENO);
  std::cout << "kgate verify: " << work.size() << " problems, backend " << backend
            << (opt.full ? ", full extents" : ", reduced extents") << ", " << opt.jobs << " job(s)\n";
  std::vector<Result> results(work.size());
  std::mutex print;
  std::atomic<std::size_t> next{0}, done{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < work.size();) {
      results[i] = verify_one(work[i].first, work[i].second, opt);
      std::lock_guard lock(print);
      ++done;
      if (tty || is_failure(results[i].state))
        std::cout << "[" << done << "/" << work.size() << "] " << std::setw(13) << std::left << name(results[i].state)
                  << " " << results[i].descriptor << "\n";
      if (is_failure(results[i].state)) std::cout << "    repro: " << results[i].repro << "\n";
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < opt.jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  // Summary per operator-direction and dtype.
  struct Row { int problems = 0; std::map<State, int> by_state; };
  std::map<std::pair<std::string, std::string>, Row> table;
  int failures = 0;
  for (const auto& r : results) {
    auto& row = table[{r.op, r.dtype}];
    row.problems++;
    row.by_state[r.state]++;
    failures += is_failure(r.state);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n" << std::left << std::setw(28) << "operator.direction" << std::setw(11) << "dtype" << std::right
            << std::setw(9) << "problems" << std::setw(8) << "passed" << std::setw(8) << "failed" << std::setw(15)
            << "unimplemented" << "\n";
  for (const auto& [key, row] : table) {
    auto n = [&](State s) { auto it = row.by_state.find(s); return it == row.by_state.end() ? 0 : it->second; };
    std::cout << std::left << std::setw(28) << key.first << std::setw(11) << key.second << std::right << std::setw(9)
              << row.problems << std::setw(8) << n(State::passed) << std::setw(8)
              << n(State::failed) + n(State::untrusted) + n(State::invalid) << std::setw(15)
              << n(State::unimplemented) + n(State::unsupported) << "\n";
  }
  std::set<std::string> missing;
  for (const auto& r : results)
    if (r.state == State::unimplemented) missing.insert(r.op);
  if (!missing.empty()) {
    std::cout << "\nno production kernel yet for:";
    for (const auto& m : missing) std::cout << " " << m;
    std::cout << "\n";
  }
  std::cout << "\n" << (failures ? "FAILED" : "OK") << ": " << failures << " of " << results.size()
            << " problems failed (" << std::fixed << std::setprecision(1) << seconds << " s)\n";

  nlohmann::json report{{"backend", backend},       {"corpus", opt.corpus},   {"full", opt.full},
                        {"seed", opt.seed},         {"seconds", seconds},     {"failures", failures},
                        {"problems", nlohmann::json::array()}};
  for (const auto& r : results) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : r.checks) checks.push_back({{"check", c.name}, {"state", name(c.state)}, {"detail", c.detail}});
    report["problems"].push_back({{"config", r.config}, {"descriptor", r.descriptor}, {"op", r.op}, {"dtype", r.dtype},
                                  {"sites", r.sites}, {"state", name(r.state)}, {"checks", checks},
                                  {"repro", r.repro}, {"seconds", r.seconds}});
  }
  if (!opt.report.empty()) write_file_atomic(opt.report, report.dump(2) + "\n");
  if (!opt.junit.empty()) write_file_atomic(opt.junit, junit_xml(results, seconds));
  return failures ? 1 : 0;
}

}  // namespace kgate
