// `kgate audit`: the determinism audit of every production kernel found
// through kernels/api.hpp, on the backend this library is built for.
//
// Per problem: plan purity (the plan is computed from equal problems built
// differently and under different environments, and must be identical),
// then R runs in this process, each in a run environment (host: workgroup
// order and thread count), with outputs and workspaces pre-filled with NaN
// or with a finite garbage pattern, half of them under concurrent noise;
// then P fresh processes. Every run's raw-byte digests must equal the first
// run's. A float-atomic negative control runs in every audit and must be
// caught; otherwise the audit proved nothing and fails.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "determinism/audit_env.hpp"
#include "kernels/api.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::determinism {

// The fewest control runs that miss a race of per-run probability 0.25 with
// probability under 1e-3: 0.75^25 < 1e-3 <= 0.75^24.
inline constexpr int kMinControlRuns = 25;

struct AuditOptions {
  int repeats = 12;        // runs in this process after the first
  int processes = 2;       // fresh processes (0: none)
  int control_runs = kMinControlRuns;
  bool noise = true;       // concurrent noise during every second run
  std::uint64_t seed = 1;  // the signed fill's seed
  // Fresh-process runner: given the descriptors, returns per descriptor the
  // role -> digest map one fresh process computed (throws on failure).
  std::function<std::map<std::string, std::map<std::string, std::string>>(const std::vector<std::string>&)>
      fresh_process;
  // Fresh-process planner: given the descriptors and one of
  // plan_process_environments(), returns per descriptor the plan (JSON) a
  // fresh process computed under it (throws on failure). Unset: only the
  // in-process plan environments are checked.
  std::function<std::map<std::string, nlohmann::json>(const std::vector<std::string>&, const ProcessEnv&)>
      plan_process;
  // Tests of the audit itself: a control without the atomic (must make the
  // audit fail), and the float-atomic control planted as an audited kernel
  // (must be reported nondeterministic).
  bool control_deterministic = false;
  bool plant_nondeterministic = false;
};

struct ProblemAudit {
  std::string descriptor, op;
  std::string verdict;  // deterministic, nondeterministic, plan-impure, error, unimplemented, skipped
  std::string reason;   // for every verdict but deterministic
  int runs = 0;
  std::map<std::string, std::set<std::string>> digests;  // role -> distinct digests seen
  std::vector<std::string> findings;                     // what differed, and where
  bool failed() const { return verdict == "nondeterministic" || verdict == "plan-impure" || verdict == "error"; }
};

struct ControlAudit {
  int runs = 0;
  std::set<std::string> digests;
  bool caught() const { return digests.size() > 1; }
};

struct AuditResult {
  std::string backend;
  AuditOptions options;
  std::vector<std::string> plan_process_envs;  // labels of the fresh-process plan environments checked
  // What a plan was found to depend on besides the problem (environment
  // labels, or "how the problem was built"); empty when every plan is pure.
  std::set<std::string> plan_inputs() const;
  std::vector<ProblemAudit> problems;
  ControlAudit control;
  double seconds = 0;
  int failures() const;  // problems failed, plus one when the control was not caught
  nlohmann::json to_json() const;
};

// The fill the audit runs: signed random values, under which a reordered
// floating-point reduction almost always changes some bit (an exact fill
// would hide it).
Fill audit_fill(std::uint64_t seed);

// Plan purity of one problem (findings; empty when pure) under `planner`
// (the production kernels' kernels::plan unless a test gives another).
using Planner = std::function<kernels::Plan(const Problem&)>;
std::vector<std::string> plan_findings(const Problem& p, const Planner& planner = nullptr);

// One run of the kernel on p: role -> digest.
std::map<std::string, std::string> digests_once(const Problem& p, std::uint64_t seed);

// `progress` (when set) sees each problem's in-process verdict as it is
// reached (before the fresh processes).
AuditResult run_audit(const std::vector<Problem>& problems, const AuditOptions& opt,
                      const std::function<void(const ProblemAudit&)>& progress = nullptr);

// The summary table (per operator-direction) and the control's line.
std::string summary(const AuditResult& r);

}  // namespace kgate::determinism
