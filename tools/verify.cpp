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
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/fill.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"
#include "kernels/api.hpp"
#include "tools/bitwise_cmd.hpp"
#include "tools/gate.hpp"
#include "tools/select.hpp"

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
  cmd.add_option("--repeats", opt.repeats, "extra kernel runs per fill that must reproduce the digests")->check(CLI::Range(0, 1000))->capture_default_str();
  cmd.add_option("--bitwise", opt.bitwise, "bitwise corpus file ('' skips it)")->capture_default_str();
  cmd.add_option("--report", opt.report, "JSON report file")->capture_default_str();
  cmd.add_option("--junit", opt.junit, "JUnit XML file")->capture_default_str();
}

namespace {

using gate::is_failure;
using gate::Result;
using oracle::State;

// One corpus problem: the problem must be a value (descriptor and JSON round
// trip), then the gate judges the kernel on the default fills.
Result verify_one(const Problem& p, const VerifyOptions& opt) {
  const std::string d = to_descriptor(p);
  const bool round_trip = to_descriptor(parse_descriptor(d)) == d &&
                          to_json(problem_from_json(nlohmann::json::parse(to_json(p).dump()))) == to_json(p);
  if (!round_trip) {
    Result r;
    r.descriptor = d;
    r.op = op_dir_name(p);
    r.dtype = gate::dtype_label(p);
    r.state = State::invalid;
    r.reason = "descriptor/JSON round trip differs";
    return r;
  }
  return gate::evaluate(p, gate::default_fills(p, opt.seed), opt.repeats);
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
    skipped += r.state == State::unimplemented || r.state == State::skipped;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"kgate verify\" tests=\"" << results.size() << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n"
    << "  <testsuite name=\"kgate verify\" tests=\"" << results.size() << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n";
  for (const auto& r : results) {
    x << "    <testcase classname=\"" << xml_escape(r.op) << "\" name=\"" << xml_escape(r.descriptor)
      << "\" time=\"" << r.seconds << "\">";
    std::string detail = r.reason.empty() ? "" : r.reason + "\n";
    for (const auto& f : r.fills) {
      if (f.state == State::passed) continue;
      detail += fill_string(f.fill) + ": " + std::string(oracle::name(f.state)) + (f.detail.empty() ? "" : " (" + f.detail + ")") + "\n";
      for (const auto& rr : f.roles)
        if (rr.report.state != State::passed) detail += oracle::to_table(rr.report) + "\n";
    }
    if (is_failure(r.state))
      x << "\n      <failure message=\"" << oracle::name(r.state) << "\">" << xml_escape(detail + "repro: " + r.repro()) << "</failure>\n    ";
    else if (r.state != State::passed)
      x << "\n      <skipped message=\"" << xml_escape(detail) << "\"/>\n    ";
    x << "</testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace

// Whether every tap of the kernel meets the input somewhere: an extent cut
// below that leaves whole taps without terms (a reference that is mostly
// zeros proves nothing, and the oracle calls it untrusted).
bool every_tap_has_terms(const ConvProblem& p) {
  const ref::detail::ConvGeom g = ref::detail::make_geom(p);
  for (int a = 0; a < 3; ++a)
    for (std::int64_t k = 0; k < g.K[a]; ++k) {
      bool hit = false;
      for (std::int64_t i = 0; i < g.S[a] && !hit; ++i) {
        const std::int64_t j = i * g.stride[a] - g.pad[a] + k * g.dil[a];
        hit = j >= 0 && j < g.L[a];
      }
      if (!hit) return false;
    }
  return true;
}

Problem reduce_extents(const Problem& p, double flop_budget) {
  Problem best = p;
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
      const auto* b = std::get_if<ConvProblem>(&best);
      if (flops(Problem(q)) > flop_budget && side > 1 && (every_tap_has_terms(*b) || !every_tap_has_terms(*c)))
        break;
      best = q;
      if (capped) break;
    }
  } else {
    // GroupNorm is bandwidth-bound: its budget is in elements, flop_budget/256.
    const auto& g = std::get<GroupNormProblem>(p);
    for (std::int64_t side = 1;; ++side) {
      GroupNormProblem q = g;
      bool capped = true;
      for (int a = 0; a < 3; ++a) {
        q.spatial[a] = std::min(g.spatial[a], side);
        capped &= q.spatial[a] == g.spatial[a];
      }
      if (static_cast<double>(q.n * q.c * q.spatial[0] * q.spatial[1] * q.spatial[2]) > flop_budget / 256 && side > 1) break;
      best = q;
      if (capped) break;
    }
  }
  return best;
}

int run_verify(const VerifyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.backend != "auto" && opt.backend != kernels::backend_name())
    throw InputError("--backend", opt.backend + " is not available in this build (it runs the " +
                                      kernels::backend_name() + " backend)");
  // Reduced problems, deduplicated across configurations by descriptor.
  const std::vector<Problem> work =
      select_corpus(Selection{opt.corpus, opt.configs, opt.filters, opt.full, opt.flop_budget});

  const bool tty = ::isatty(STDOUT_FILENO);
  std::cout << "kgate verify: " << work.size() << " problems, backend " << kernels::backend_name()
            << (opt.full ? ", full extents" : ", reduced extents") << ", " << opt.jobs << " job(s)\n";
  std::vector<Result> results(work.size());
  std::mutex print;
  std::atomic<std::size_t> next{0}, done{0};
  std::exception_ptr input_error;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < work.size();) {
      try {
        results[i] = verify_one(work[i], opt);
      } catch (...) {
        std::lock_guard lock(print);
        if (!input_error) input_error = std::current_exception();
        next = work.size();
        return;
      }
      std::lock_guard lock(print);
      ++done;
      const Result& r = results[i];
      if (tty || is_failure(r.state))
        std::cout << "[" << done << "/" << work.size() << "] " << std::setw(13) << std::left << oracle::name(r.state)
                  << " " << r.descriptor << "\n";
      if (is_failure(r.state)) std::cout << "    repro: " << r.repro() << "\n";
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < opt.jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (input_error) std::rethrow_exception(input_error);

  // Summary per operator-direction and dtype.
  struct Row {
    int problems = 0;
    std::map<State, int> by_state;
    double worst = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> table;
  int failures = 0;
  for (const auto& r : results) {
    auto& row = table[{r.op, r.dtype}];
    row.problems++;
    row.by_state[r.state]++;
    row.worst = std::max(row.worst, r.worst_margin);
    failures += is_failure(r.state);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n" << std::left << std::setw(28) << "operator.direction" << std::setw(11) << "dtype" << std::right
            << std::setw(9) << "problems" << std::setw(8) << "passed" << std::setw(8) << "failed" << std::setw(15)
            << "unimplemented" << std::setw(9) << "skipped" << std::setw(14) << "worst margin" << "\n";
  for (const auto& [key, row] : table) {
    auto n = [&](State s) { auto it = row.by_state.find(s); return it == row.by_state.end() ? 0 : it->second; };
    std::ostringstream worst;
    if (n(State::passed) + n(State::failed) + n(State::untrusted) > 0) worst << std::setprecision(3) << row.worst;
    else worst << "-";
    std::cout << std::left << std::setw(28) << key.first << std::setw(11) << key.second << std::right << std::setw(9)
              << row.problems << std::setw(8) << n(State::passed) << std::setw(8)
              << n(State::failed) + n(State::untrusted) + n(State::invalid) << std::setw(15) << n(State::unimplemented)
              << std::setw(9) << n(State::skipped) << std::setw(14) << worst.str() << "\n";
  }
  std::set<std::string> missing;
  for (const auto& r : results)
    if (r.state == State::unimplemented) missing.insert(r.op);
  if (!missing.empty()) {
    std::cout << "\nno production kernel yet for:";
    for (const auto& m : missing) std::cout << " " << m;
    std::cout << "\n";
  }
  std::cout << "worst margin: largest tier-2 error/bound (fails above 1)\n";
  int bw_passed = 0, bw_failed = 0, bw_unimpl = 0;
  if (!opt.bitwise.empty()) {
    std::cout << "\n";
    bitwise_run(opt.bitwise, false, &bw_passed, &bw_failed, &bw_unimpl);
    failures += bw_failed;
  }
  std::cout << "\n" << (failures ? "FAILED" : "OK") << ": " << failures << " of "
            << results.size() + static_cast<std::size_t>(bw_passed + bw_failed) << " checks failed (" << std::fixed << std::setprecision(1) << seconds << " s)\n";

  nlohmann::json report{{"backend", kernels::backend_name()}, {"corpus", opt.corpus}, {"full", opt.full},
                        {"seed", opt.seed}, {"seconds", seconds}, {"failures", failures},
                        {"bitwise", {{"corpus", opt.bitwise}, {"passed", bw_passed}, {"failed", bw_failed},
                                     {"without_kernel", bw_unimpl}}},
                        {"problems", nlohmann::json::array()}};
  for (const auto& r : results) report["problems"].push_back(r.to_json());
  if (!opt.report.empty()) write_file_atomic(opt.report, report.dump(1) + "\n");
  if (!opt.junit.empty()) write_file_atomic(opt.junit, junit_xml(results, seconds));
  return failures ? 1 : 0;
}

}  // namespace kgate
