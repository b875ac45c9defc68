#include "tools/options.hpp"
#include "tools/audit_cmd.hpp"

#include <unistd.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <set>

#include "determinism/audit_env.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/common.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "tools/bitwise_cmd.hpp"
#include "tools/files.hpp"
#include "tools/gate.hpp"
#include "tools/verify.hpp"

namespace kgate {

namespace {

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("audit: cannot find this executable for the fresh processes");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// One fresh process of this executable in --print-digests mode.
std::map<std::string, std::map<std::string, std::string>> fresh_process(const std::vector<std::string>& ds,
                                                                         std::uint64_t seed) {
  std::string cmd = shell_quote(self_exe()) + " audit --print-digests --seed " + std::to_string(seed);
  for (const auto& d : ds) cmd += " " + shell_quote(d);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) throw std::runtime_error("audit: cannot start a fresh process");
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int rc = ::pclose(f);
  if (rc != 0) throw std::runtime_error("audit: fresh process exited with status " + std::to_string(rc) + ":\n" + out);
  return nlohmann::json::parse(out).get<std::map<std::string, std::map<std::string, std::string>>>();
}

// One fresh process of this executable in --print-plans mode under `env`.
std::map<std::string, nlohmann::json> fresh_plans(const std::vector<std::string>& ds, const determinism::ProcessEnv& env) {
  std::string cmd = "env";
  for (const auto& a : env.assignments) cmd += " " + shell_quote(a);
  cmd += " " + shell_quote(self_exe()) + " audit --print-plans";
  for (const auto& d : ds) cmd += " " + shell_quote(d);
  FILE* f = ::popen(cmd.c_str(), "r");  // its error messages go to this process's stderr
  if (!f) throw std::runtime_error("audit: cannot start a fresh process");
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int rc = ::pclose(f);
  if (rc != 0) throw std::runtime_error("the process exited with status " + std::to_string(rc));
  return nlohmann::json::parse(out).get<std::map<std::string, nlohmann::json>>();
}

}  // namespace

CLI::App* add_audit_command(CLI::App& app, AuditCli& cli) {
  auto* c = app.add_subcommand("audit", "Determinism audit of every production kernel (exit 1 on nondeterminism)");
  c->add_option("descriptor", cli.descriptors, "problems to audit (default: the bitwise and reduced corpus problems)");
  add_corpora_options(*c, cli.selection, cli.bitwise);
  c->add_option("--repeats,-R", cli.audit.repeats, "runs per problem in this process after the first")
      ->check(CLI::Range(0, 100000))->capture_default_str();
  c->add_option("--processes,-P", cli.audit.processes, "fresh processes per problem")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  c->add_option("--control-runs", cli.audit.control_runs,
                "runs of the float-atomic negative control (at least 25: a 0.25 race is then missed with p < 1e-3)")
      ->check(CLI::Range(determinism::kMinControlRuns, 100000))->capture_default_str();
  c->add_flag("--no-noise", cli.no_noise, "no concurrent noise");
  c->add_flag("--no-bitwise", cli.no_bitwise, "leave the bitwise corpus's problems out");
  options::add_seed(*c, cli.audit.seed, "seed of the signed fill");
  options::add_report(*c, "--report", cli.report, "JSON report ('' writes none)");
  c->add_flag("--print-digests", cli.print_digests, "fresh-process mode: print each problem's digests as JSON")
      ->group("");
  c->add_flag("--print-plans", cli.print_plans, "fresh-process mode: print each problem's launch plan as JSON")
      ->group("");
  c->add_flag("--control-deterministic", cli.audit.control_deterministic,
              "test of the audit: the control without its atomic (the audit must fail)")->group("");
  c->add_flag("--plant-nondeterministic", cli.audit.plant_nondeterministic,
              "test of the audit: audit the float-atomic control as a kernel (must be reported)")->group("");
  return c;
}

int run_audit_command(AuditCli cli) {
  if (!cli.report.empty()) files::output_file(cli.report, "--report");  // before the run, not after it
  std::vector<Problem> problems;
  std::set<std::string> seen;
  auto add = [&](const Problem& p) {
    if (seen.insert(to_descriptor(p)).second) problems.push_back(p);
  };
  for (const auto& d : cli.descriptors) add(parse_descriptor(d));
  if (cli.print_digests) {
    nlohmann::json j = nlohmann::json::object();
    for (const Problem& p : problems) j[to_descriptor(p)] = determinism::digests_once(p, cli.audit.seed);
    std::cout << j.dump() << "\n";
    return 0;
  }
  if (cli.print_plans) {
    nlohmann::json j = nlohmann::json::object();
    for (const Problem& p : problems) j[to_descriptor(p)] = kernels::to_json(kernels::plan(p));
    std::cout << j.dump() << "\n";
    return 0;
  }
  if (cli.descriptors.empty()) {
    if (!cli.bitwise.empty() && !cli.no_bitwise)
      for (const Problem& p : select_bitwise(cli.bitwise, cli.selection.filters)) add(p);
    for (const Problem& p : select_corpus(cli.selection, problems.empty())) add(p);
  }
  cli.audit.noise = !cli.no_noise;
  const std::uint64_t seed = cli.audit.seed;
  cli.audit.fresh_process = [seed](const std::vector<std::string>& ds) { return fresh_process(ds, seed); };
  if (cli.audit.processes > 0) cli.audit.plan_process = fresh_plans;
  std::cout << "kgate audit: " << problems.size() << " problems, backend " << kernels::backend_name() << ", R "
            << cli.audit.repeats << ", P " << cli.audit.processes << ", noise "
            << (cli.audit.noise ? determinism::Noise::description() : "off") << "\n";
  determinism::AuditResult r;
  try {
    std::size_t done = 0;
    r = determinism::run_audit(problems, cli.audit, [&](const determinism::ProblemAudit& a) {
      ++done;
      if (a.verdict == "unimplemented") return;
      std::cout << "[" << done << "/" << problems.size() << "] " << std::left << std::setw(17) << a.verdict
                << std::right << " " << a.descriptor << " (" << a.runs << " runs)" << std::endl;
    });
  } catch (const InputError&) {
    throw;
  } catch (const rt::Unavailable& e) {
    throw gate::environment_error(e.what());
  } catch (const std::exception& e) {
    // A kernel or fresh-process failure the audit could not attribute to one
    // problem: the audit failed.
    std::cerr << "kgate audit: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "\n" << determinism::summary(r);
  const int failures = r.failures();
  std::cout << "\n" << (failures ? "FAILED" : "OK") << ": " << failures << " failure(s) (" << std::fixed
            << std::setprecision(1) << r.seconds << " s)\n";
  if (!cli.report.empty()) files::write_output_file(cli.report, r.to_json().dump(1) + "\n", "--report");
  return failures ? 1 : 0;
}

}  // namespace kgate
