#include "tools/verify.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "corpus/bitwise.hpp"
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
#include "tools/data.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/gate_problems.hpp"
#include "tools/options.hpp"
#include "tools/external.hpp"
#include "tools/summary.hpp"
#include "tools/select.hpp"
#include "tools/signals.hpp"

namespace kgate {

std::string verify_default_corpus() { return data::path("corpus/shapes.json"); }

void add_verify_options(CLI::App& cmd, VerifyOptions& opt) {
  cmd.add_option("--corpus", opt.corpus, "shapes corpus file")->capture_default_str();
  options::add_backend(cmd, opt.backend);
  options::add_external_options(cmd, opt.backend_options, opt.model, opt.driver_timeout);
  options::add_reference(cmd, opt.reference);
  cmd.add_option("--filter", opt.filters, "KEY=VALUE (op, dir, dtype, site, config, form); repeatable, all must match");
  cmd.add_option("--config", opt.configs, "configurations to run (A B C D, and plan: the kernels' boundary problems)")->capture_default_str();
  cmd.add_flag("--full", opt.full, "full extents (for GPU backends)");
  cmd.add_flag("--quick", opt.quick,
               "the edit-check loop: the kernels' boundary problems (--config plan) of the selected operators, the "
               "exact fill only, the bitwise entries the --filter flags select");
  options::add_flop_budget(cmd, opt.flop_budget);
  cmd.add_option("--jobs,-j", opt.jobs, "problems run in parallel")->check(options::integer_in(1, 256))->capture_default_str();
  options::add_seed(cmd, opt.seed);
  cmd.add_option("--repeats", opt.repeats, "extra kernel runs per fill that must reproduce the digests")
      ->check(options::integer_in(0, 1000))
      ->capture_default_str();
  cmd.add_option("--bitwise", opt.bitwise, "bitwise corpus file ('' skips it)")->capture_default_str();
  options::add_report(cmd, "--report", opt.report, "JSON report file ('-': standard output, '' writes none)");
  options::add_report(cmd, "--junit", opt.junit, "JUnit XML file ('-': standard output, '' writes none)");
  cmd.add_flag("--require-all", opt.require_all, "fail (exit 1) when any check is unimplemented or skipped");
  options::add_memory_limit(cmd, opt.memory_limit);
  cmd.footer(exit_codes_help);
}

namespace {

using gate::is_failure;
using gate::Result;
using oracle::State;

// One corpus problem: the problem must be a value (descriptor and JSON round
// trip), then the gate judges the kernel on the default fills.
Result verify_one(const Problem& p, const VerifyOptions& opt, gate::Runner* runner) {
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
  // kgate's own plan, for the combine probe of its published splits.
  std::optional<kernels::Plan> plan;
  if (!runner && kernels::is_supported(p)) plan = kernels::plan(p);
  std::vector<Fill> fills = gate::default_fills(p, opt.seed, plan ? &*plan : nullptr);
  // --quick: the exact fill (lattice, gn_exact) and the combine probe: the
  // bit-exact expectations.
  if (opt.quick)
    fills.erase(std::remove_if(fills.begin() + 1, fills.end(), [](const Fill& f) { return f.kind != FillKind::combine; }),
                fills.end());
  return gate::evaluate(p, fills, opt.repeats, {}, runner,
                        *gate::resolve_reference(opt.reference, opt.full));
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

}  // namespace

std::string junit_xml(const std::vector<Result>& results, const std::vector<BitwiseResult>& bitwise, double seconds,
                      bool require_all, const std::string& suite) {
  int failures = 0, skipped = 0;
  auto count = [&](State s) {
    const bool unverified = s == State::unimplemented || s == State::skipped;
    failures += is_failure(s) || (unverified && require_all);
    skipped += unverified && !require_all;
  };
  for (const auto& r : results) count(r.state);
  for (const auto& b : bitwise) count(b.state);
  const std::size_t tests = results.size() + bitwise.size();
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"" << xml_escape(suite) << "\" tests=\"" << tests << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n"
    << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << tests << "\" failures=\"" << failures << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n";
  auto testcase = [&](const std::string& classname, const std::string& name, double time, State state,
                      const std::string& detail, const std::string& repro) {
    x << "    <testcase classname=\"" << xml_escape(classname) << "\" name=\"" << xml_escape(name) << "\" time=\""
      << time << "\">";
    const bool unverified = state == State::unimplemented || state == State::skipped;
    if (is_failure(state) || (unverified && require_all))
      x << "\n      <failure message=\"" << oracle::name(state) << "\">" << xml_escape(detail + "repro: " + repro)
        << "</failure>\n    ";
    else if (state != State::passed)
      x << "\n      <skipped message=\"" << xml_escape(std::string(oracle::name(state)) + (detail.empty() ? "" : ": ") + detail)
        << "\"/>\n    ";
    x << "</testcase>\n";
  };
  for (const auto& r : results) {
    std::string detail = r.reason.empty() ? "" : r.reason + "\n";
    for (const auto& f : r.fills) {
      if (f.state == State::passed) continue;
      detail += fill_string(f.fill) + ": " + std::string(oracle::name(f.state)) + (f.detail.empty() ? "" : " (" + f.detail + ")") + "\n";
      for (const auto& rr : f.roles)
        if (rr.report.state != State::passed) detail += oracle::to_table(rr.report) + "\n";
    }
    testcase(r.target.empty() ? r.op : r.op + "." + r.target, r.descriptor, r.seconds, r.state, detail, r.repro());
  }
  for (const auto& b : bitwise) testcase("bitwise." + b.op, b.descriptor, b.seconds, b.state, b.detail, b.repro());
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

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

void check_memory(const std::vector<Problem>& problems, int jobs, double limit) {
  const bool measured = limit <= 0;
  if (measured) limit = gate::available_memory();
  std::vector<std::pair<double, std::string>> sizes;
  for (const Problem& p : problems) sizes.emplace_back(gate::footprint_bytes(p), to_descriptor(p));
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  double together = 0;
  for (std::size_t i = 0; i < sizes.size() && i < static_cast<std::size_t>(jobs); ++i) together += sizes[i].first;
  if (together <= limit) return;
  auto mib = [](double b) { return std::to_string(static_cast<long long>(b / (1 << 20))) + " MiB"; };
  std::string msg = "the run needs about " + mib(together) + " (largest problem '" + sizes[0].second + "': " +
                    mib(sizes[0].first) + (jobs > 1 ? ", " + std::to_string(jobs) + " jobs at once" : "") + ") but " +
                    mib(limit) + (measured ? " of memory is available (MemAvailable)" : " is allowed (--memory-limit)");
  if (jobs > 1 && sizes[0].first <= limit) msg += "; fewer --jobs would fit";
  throw InputError("memory", msg);
}

int run_verify(const VerifyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool external = gate::is_external_backend(opt.backend);
  if (!external && opt.backend != "auto" && opt.backend != kernels::backend_name())
    throw InputError("--backend", opt.backend + " is not available in this build (it runs the " +
                                      kernels::backend_name() + " backend)");
  if (external) oracle::parse_model(opt.model);  // a bad --model before the driver starts
  files::input_file(opt.corpus, "--corpus");
  // The bitwise corpus is read and validated before any work, so that a bad
  // file never costs a whole run's results.
  std::vector<corpus::BitwiseEntry> bitwise_entries;
  // The bitwise corpus holds kgate's kernels' digests: an external
  // implementation is not expected to reproduce them.
  const std::string bitwise_path = external ? "" : opt.bitwise;
  if (!bitwise_path.empty()) {
    files::input_file(opt.bitwise, "--bitwise");
    try {
      bitwise_entries = corpus::load_bitwise(opt.bitwise);
    } catch (const InputError& e) {
      throw InputError("--bitwise", e.what());
    }
    if (opt.quick)
      std::erase_if(bitwise_entries, [&](const corpus::BitwiseEntry& b) {
        corpus::Entry e;
        e.descriptor = b.descriptor;
        e.problem = b.problem;
        return !filter_matches(e, b.problem, opt.filters);
      });
  }
  // Checked before the run, so that a long run never ends unable to report.
  files::distinct_outputs({{"--report", opt.report}, {"--junit", opt.junit}});
  if (!opt.report.empty()) files::output_file(opt.report, "--report");
  if (!opt.junit.empty()) files::output_file(opt.junit, "--junit");
  // A report on standard output is the only thing there (`kgate verify
  // --report - | jq`): the run's progress and summary go to standard error.
  std::ostream& log = opt.report == "-" || opt.junit == "-" ? std::cerr : std::cout;
  const nlohmann::json settings = gate::backend_settings();
  // Reduced problems, deduplicated across configurations by descriptor.
  const std::vector<Problem> work =
      select_corpus(Selection{opt.corpus, opt.quick ? std::vector<std::string>{"plan"} : opt.configs, opt.filters,
                              opt.full, opt.flop_budget});
  check_memory(work, opt.jobs, opt.memory_limit);
  // The emulator runs one target per process, and the kernels' paths for
  // another target it models (sm90 beside gfx942: mma.sync atoms, 32-wide
  // warps, three stages) are other code. Kernels that must run on both are
  // judged on both: the plan problems of the selection run once more on each
  // of kernels::extra_targets() (one target per job thread), each result
  // tagged with its target.
  struct Stage {
    std::string target;  // "" for the process's own
    std::vector<Problem> work;
  };
  std::vector<Stage> stages{{"", work}};
  const bool plan_selected =
      opt.quick || std::find(opt.configs.begin(), opt.configs.end(), std::string(gate::kPlanConfig)) != opt.configs.end();
  if (!external && plan_selected)
    for (const std::string& t : kernels::extra_targets()) {
      const kernels::TargetScope scope(t);  // the boundary problems as that target's plans choose them
      auto plan_work = select_corpus(
          Selection{opt.corpus, {gate::kPlanConfig}, opt.filters, opt.full, opt.flop_budget}, false);
      if (!plan_work.empty()) stages.push_back({t, std::move(plan_work)});
    }
  struct Task {
    const Problem* p;
    const std::string* target;
  };
  std::vector<Task> tasks;
  for (const Stage& st : stages)
    for (const Problem& p : st.work) tasks.push_back({&p, &st.target});
  auto run_task = [&](const Problem& p, const std::string& target, gate::Runner* r) {
    std::optional<kernels::TargetScope> scope;
    if (!target.empty()) scope.emplace(target);
    Result res = verify_one(p, opt, r);
    res.target = target;
    return res;
  };
  auto label = [](const Result& r) { return r.descriptor + (r.target.empty() ? "" : " [" + r.target + "]"); };
  std::unique_ptr<gate::Runner> runner;
  if (external) runner = gate::start_external({opt.backend, opt.backend_options, opt.model, opt.driver_timeout});
  const std::string backend_label = runner ? gate::external_description(*runner) : kernels::backend_name();

  // Every finished problem is a line, flushed, on a terminal or in a CI log
  // alike: a run that is killed still shows how far it got.
  std::string stages_label;
  for (std::size_t k = 1; k < stages.size(); ++k)
    stages_label += " + " + std::to_string(stages[k].work.size()) + " plan problems on the emulated " +
                    stages[k].target + " target";
  if (opt.reports)
    log << "kgate verify: " << work.size() << " problems" << stages_label << ", backend " << backend_label
              << (opt.full ? ", full extents" : ", reduced extents") << ", references "
              << gate::describe(*gate::resolve_reference(opt.reference, opt.full)) << ", " << opt.jobs << " job(s)"
              << opt.processes_label << std::endl;
  std::vector<Result> results(tasks.size());
  std::vector<char> finished(tasks.size(), 0);
  std::mutex print;
  std::atomic<std::size_t> next{0}, done{0};
  std::exception_ptr input_error;
  const InterruptGuard interrupt;
  auto worker = [&] {
    for (std::size_t i; !interrupted() && (i = next++) < tasks.size();) {
      try {
        results[i] = run_task(*tasks[i].p, *tasks[i].target, runner.get());
      } catch (...) {
        std::lock_guard lock(print);
        if (!input_error) input_error = std::current_exception();
        next = tasks.size();
        return;
      }
      std::lock_guard lock(print);
      ++done;
      finished[i] = 1;
      const Result& r = results[i];
      log << "[" << done << "/" << tasks.size() << "] " << std::setw(13) << std::left << oracle::name(r.state)
                << std::right << std::fixed << std::setprecision(2) << std::setw(8) << r.seconds << " s  "
                << label(r) << "\n";
      if (is_failure(r.state)) log << "    repro: " << r.repro() << "\n";
      log << std::flush;
    }
  };
  if (opt.distribute) {
    results.clear();
    for (const Stage& st : stages) {
      auto got = opt.distribute(st.work, [&](const Problem& p) { return run_task(p, st.target, runner.get()); });
      if (!got) return 0;
      for (Result& r : *got) results.push_back(std::move(r));
    }
  } else {
    std::vector<std::thread> pool;
    for (int j = 0; j < opt.jobs; ++j) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    if (input_error) std::rethrow_exception(input_error);
    if (interrupted()) {
      // Interrupted (SIGINT): the problems that finished, in a report marked
      // incomplete, then exit 130 as the shell expects.
      nlohmann::json partial{{"backend", backend_label}, {"settings", settings}, {"corpus", opt.corpus},
                             {"full", opt.full}, {"reference", gate::describe(*gate::resolve_reference(opt.reference, opt.full))}, {"seed", opt.seed}, {"verdict", "interrupted"},
                             {"incomplete", true}, {"exit_code", exit_interrupted},
                             {"problems_selected", tasks.size()}, {"problems_finished", done.load()},
                             {"problems", nlohmann::json::array()}};
      for (std::size_t i = 0; i < tasks.size(); ++i)
        if (finished[i]) partial["problems"].push_back(results[i].to_json());
      log << "\nINTERRUPTED: " << done.load() << " of " << tasks.size()
          << " problems finished; the report is marked incomplete" << std::endl;
      if (!opt.report.empty()) files::write_output_file(opt.report, partial.dump(1) + "\n", "--report");
      return exit_interrupted;
    }
  }

  // Summary per operator-direction and dtype.
  struct Row {
    int problems = 0;
    std::map<State, int> by_state;
    double worst = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> table;
  Tally tally;
  for (const auto& r : results) {
    auto& row = table[{r.target.empty() ? r.op : r.op + " [" + r.target + "]", r.dtype}];
    row.problems++;
    row.by_state[r.state]++;
    row.worst = std::max(row.worst, r.worst_margin);
    tally.add(r.state);
  }
  log << "\n" << std::left << std::setw(35) << "operator.direction" << std::setw(11) << "dtype" << std::right
            << std::setw(9) << "problems" << std::setw(8) << "passed" << std::setw(8) << "failed" << std::setw(15)
            << "unimplemented" << std::setw(9) << "skipped" << std::setw(14) << "worst margin" << "\n";
  for (const auto& [key, row] : table) {
    auto n = [&](State s) { auto it = row.by_state.find(s); return it == row.by_state.end() ? 0 : it->second; };
    std::ostringstream worst;
    if (n(State::passed) + n(State::failed) + n(State::untrusted) > 0) worst << std::setprecision(3) << row.worst;
    else worst << "-";
    log << std::left << std::setw(35) << key.first << std::setw(11) << key.second << std::right << std::setw(9)
              << row.problems << std::setw(8) << n(State::passed) << std::setw(8)
              << n(State::failed) + n(State::untrusted) + n(State::invalid) << std::setw(15) << n(State::unimplemented)
              << std::setw(9) << n(State::skipped) << std::setw(14) << worst.str() << "\n";
  }
  std::set<std::string> missing;
  for (const auto& r : results)
    if (r.state == State::unimplemented) missing.insert(r.op);
  if (!missing.empty()) {
    log << "\nno production kernel yet for:";
    for (const auto& m : missing) log << " " << m;
    log << "\n";
  }
  log << "worst margin: largest tier-2 error/bound (fails above 1)" << std::endl;
  std::vector<BitwiseResult> bitwise;
  Tally bw;
  if (external && !opt.bitwise.empty())
    log << "\nbitwise: not run (its digests are kgate's kernels'; " << opt.backend << " is judged by the oracle alone)\n";
  if (!bitwise_path.empty()) {
    log << "\n";
    bitwise = bitwise_results(bitwise_entries, log);
    for (const auto& b : bitwise) bw.add(b.state);
    log << "bitwise: " << bitwise.size() << " entries, " << bw.passed << " passed, " << bw.failed << " failed, "
              << bw.unimplemented << " without a kernel\n";
    if (bitwise.empty()) {
      // A bitwise stage that checked nothing leaves the run incomplete.
      log << "bitwise: " << bitwise_path << " has no entries: nothing was checked bit for bit\n";
      ++bw.skipped;
    }
  }
  Tally all = tally;
  all.passed += bw.passed;
  all.failed += bw.failed;
  all.unimplemented += bw.unimplemented;
  all.skipped += bw.skipped;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log << "\n" << all.summary_line(opt.require_all) << " (" << std::fixed << std::setprecision(1) << seconds
            << " s)" << std::endl;

  auto counts = [](const Tally& t) {
    return nlohmann::json{{"passed", t.passed}, {"failed", t.failed}, {"unimplemented", t.unimplemented},
                          {"skipped", t.skipped}};
  };
  nlohmann::json report{{"backend", backend_label}, {"settings", settings}, {"corpus", opt.corpus},
                        {"full", opt.full}, {"reference", gate::describe(*gate::resolve_reference(opt.reference, opt.full))}, {"seed", opt.seed}, {"seconds", seconds},
                        {"require_all", opt.require_all}, {"verdict", all.verdict(opt.require_all)},
                        {"exit_code", all.exit_code(opt.require_all)}, {"failures", all.failed},
                        {"counts", counts(all)}, {"problem_counts", counts(tally)},
                        {"bitwise", {{"corpus", bitwise_path}, {"passed", bw.passed}, {"failed", bw.failed},
                                     {"without_kernel", bw.unimplemented}, {"entries", nlohmann::json::array()}}},
                        {"problems", nlohmann::json::array()}};
  for (const auto& r : results) report["problems"].push_back(r.to_json());
  for (const auto& b : bitwise) report["bitwise"]["entries"].push_back(b.to_json());
  if (!opt.report.empty()) files::write_output_file(opt.report, report.dump(1) + "\n", "--report");
  if (!opt.junit.empty()) files::write_output_file(opt.junit, junit_xml(results, bitwise, seconds, opt.require_all), "--junit");
  return all.exit_code(opt.require_all);
}

}  // namespace kgate
