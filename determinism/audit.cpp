#include "determinism/audit.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>

#include "determinism/audit_env.hpp"
#include "determinism/run_digest.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/common.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/json.hpp"

namespace kgate::determinism {

namespace {

// The two prefill patterns: NaN in every floating dtype, and a finite value
// (0x3c3c3c3c is about 0.0115 as fp32, 0x3c3c about 0.0115 as bf16) that a
// kernel reading its output before writing it would fold in silently.
constexpr unsigned char kPrefill[2] = {0xff, 0x3c};

std::string raw_digest(const std::vector<float>& v) {
  Tensor t(DType::fp32, {static_cast<std::int64_t>(v.size())});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return digest(t);
}

// Top-level fields of two plans' JSON that differ.
std::string plan_diff(const kernels::Plan& a, const kernels::Plan& b) {
  const auto ja = kernels::to_json(a), jb = kernels::to_json(b);
  std::string d;
  for (auto it = ja.begin(); it != ja.end(); ++it)
    if (!jb.contains(it.key()) || jb.at(it.key()) != it.value()) d += (d.empty() ? "" : ", ") + it.key();
  return d.empty() ? "(equal JSON, unequal values)" : d;
}

}  // namespace

Fill audit_fill(std::uint64_t seed) { return parse_fill("signed", seed); }

std::vector<std::string> plan_findings(const Problem& p, const Planner& planner) {
  const Planner plan = planner ? planner : Planner([](const Problem& q) { return kernels::plan(q); });
  std::vector<std::string> f;
  const kernels::Plan base = plan(p);
  // Equal problems built three ways: the selected value (built by the corpus
  // or the caller), parsed from its descriptor, parsed from its JSON.
  const std::vector<std::pair<std::string, Problem>> built{
      {"descriptor", parse_descriptor(to_descriptor(p))},
      {"JSON", problem_from_json(nlohmann::json::parse(to_json(p).dump()))},
  };
  for (const auto& [how, q] : built) {
    const kernels::Plan other = plan(q);
    if (!(other == base)) f.push_back("plan of the problem built from its " + how + " differs: " + plan_diff(base, other));
  }
  // The plan as a value: its JSON round trip is the same plan.
  if (!(kernels::plan_from_json(nlohmann::json::parse(kernels::to_json(base).dump())) == base))
    f.push_back("plan JSON round trip differs: " + plan_diff(base, kernels::plan_from_json(kernels::to_json(base))));
  // Environments: anything the plan reads besides the problem shows up here.
  const auto envs = plan_environments();
  for (std::size_t i = 0; i < envs.size(); ++i) {
    EnvScope s(true, i, 7);
    const kernels::Plan other = plan(p);
    if (!(other == base)) f.push_back("plan depends on the environment (" + envs[i] + "): " + plan_diff(base, other));
  }
  return f;
}

namespace {

std::map<std::string, std::string> run_once(const Problem& p, const std::map<Role, Tensor>& in,
                                            const kernels::Plan& plan, const kernels::RunOptions& opt) {
  std::map<Role, const Tensor*> ptr;
  for (const auto& [r, t] : in) ptr[r] = &t;
  std::map<std::string, std::string> d;
  for (const auto& [r, t] : kernels::run(p, plan, ptr, opt)) d[std::string(name(r))] = digest(t);
  return d;
}

// Records a run's digests; a difference from the first run is a finding.
void record(ProblemAudit& a, const std::map<std::string, std::string>& first, const std::map<std::string, std::string>& got,
            const std::string& where) {
  ++a.runs;
  for (const auto& [role, d] : got) {
    a.digests[role].insert(d);
    auto it = first.find(role);
    if (it == first.end() || it->second != d)
      a.findings.push_back(role + " differs from the first run (" + where + "): " + d + " vs " +
                           (it == first.end() ? std::string("missing") : it->second));
  }
}

std::string env_label(std::size_t env, int pattern, bool noisy) {
  return run_environments()[env] + ", prefill 0x" + (pattern ? std::string("3c") : std::string("ff")) +
         (noisy ? ", noise" : "");
}

ProblemAudit audit_problem(const Problem& p, const AuditOptions& opt, Noise* noise) {
  ProblemAudit a;
  a.descriptor = to_descriptor(p);
  a.op = op_dir_name(p);
  const auto ops = kernels::implemented_ops();
  if (std::find(ops.begin(), ops.end(), a.op) == ops.end()) {
    a.verdict = "unimplemented";
    a.reason = "no production kernel for " + a.op;
    return a;
  }
  if (const auto s = kernels::is_supported(p); !s) {
    a.verdict = "skipped";
    a.reason = s.reason;
    return a;
  }
  try {
    a.findings = plan_findings(p);
    if (!a.findings.empty()) {
      a.verdict = "plan-impure";
      a.reason = a.findings.front();
      return a;
    }
    const auto in = make_inputs(p, audit_fill(opt.seed));
    const kernels::Plan plan = kernels::plan(p);
    std::map<std::string, std::string> first;
    {
      EnvScope s(false, 0);
      first = run_once(p, in, plan, {});
    }
    record(a, first, first, "first run");
    const std::size_t envs = run_environments().size();
    for (int i = 0; i < opt.repeats; ++i) {
      // Every environment with each prefill pattern in turn; noise on every
      // second run.
      const std::size_t env = static_cast<std::size_t>(i) % envs;
      const int pattern = static_cast<int>((static_cast<std::size_t>(i) / envs) % 2);
      const bool noisy = opt.noise && i % 2 == 1;
      if (noise) noise->set_active(noisy);
      kernels::RunOptions ro;
      ro.prefill_nan = true;
      ro.prefill_byte = kPrefill[pattern];
      EnvScope s(false, env, opt.seed * 1000 + static_cast<std::uint64_t>(i));
      record(a, first, run_once(p, in, plan, ro), "run " + std::to_string(i + 1) + ": " + env_label(env, pattern, noisy));
    }
    if (noise) noise->set_active(false);
  } catch (const rt::Unavailable&) {
    // The machine cannot run kernels at all: the whole audit's error.
    if (noise) noise->set_active(false);
    throw;
  } catch (const std::exception& e) {
    if (noise) noise->set_active(false);
    a.verdict = "error";
    a.reason = e.what();
    return a;
  }
  a.verdict = a.findings.empty() ? "deterministic" : "nondeterministic";
  if (!a.findings.empty()) a.reason = a.findings.front();
  return a;
}

// The negative control as an audited kernel (a test of the audit).
ProblemAudit audit_planted(const AuditOptions& opt) {
  ProblemAudit a;
  a.descriptor = "planted float-atomic reduction";
  a.op = "planted";
  const std::string first = raw_digest(control_run(0, 0, false));
  record(a, {{"out", first}}, {{"out", first}}, "first run");
  const std::size_t envs = run_environments().size();
  for (int i = 0; i < std::max(opt.repeats, kMinControlRuns - 1); ++i)
    record(a, {{"out", first}}, {{"out", raw_digest(control_run(static_cast<std::size_t>(i) % envs, 100 + i, false))}},
           "run " + std::to_string(i + 1));
  a.verdict = a.findings.empty() ? "deterministic" : "nondeterministic";
  if (!a.findings.empty()) a.reason = a.findings.front();
  return a;
}

}  // namespace

std::map<std::string, std::string> digests_once(const Problem& p, std::uint64_t seed) {
  EnvScope s(false, 0);
  const auto in = make_inputs(p, audit_fill(seed));
  return run_once(p, in, kernels::plan(p), {});
}

AuditResult run_audit(const std::vector<Problem>& problems, const AuditOptions& opt,
                      const std::function<void(const ProblemAudit&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  AuditResult r;
  r.backend = kernels::backend_name();
  r.options = opt;
  std::unique_ptr<Noise> noise;
  if (opt.noise) noise = std::make_unique<Noise>();
  for (const Problem& p : problems) {
    r.problems.push_back(audit_problem(p, opt, noise.get()));
    if (progress) progress(r.problems.back());
  }
  if (opt.plant_nondeterministic) r.problems.push_back(audit_planted(opt));

  // Plan purity under the environments only a fresh process can apply: each
  // process plans every problem that was planned here.
  if (opt.plan_process) {
    std::vector<std::string> ds;
    for (const auto& a : r.problems)
      if (a.op != "planted" && (a.verdict == "deterministic" || a.verdict == "nondeterministic"))
        ds.push_back(a.descriptor);
    for (const ProcessEnv& env : plan_process_environments()) {
      if (ds.empty()) break;
      r.plan_process_envs.push_back(env.label);
      std::map<std::string, nlohmann::json> got;
      std::string error;
      try {
        got = opt.plan_process(ds, env);
      } catch (const std::exception& e) {
        error = e.what();
        error = error.substr(0, error.find('\n'));
      }
      for (auto& a : r.problems) {
        if (std::find(ds.begin(), ds.end(), a.descriptor) == ds.end()) continue;
        std::string f;
        const auto it = got.find(a.descriptor);
        if (!error.empty()) {
          f = "plan depends on the environment (" + env.label + ", fresh process): planning failed: " + error;
        } else if (it == got.end()) {
          f = "plan depends on the environment (" + env.label + ", fresh process): no plan returned";
        } else {
          const kernels::Plan base = kernels::plan(parse_descriptor(a.descriptor));
          const kernels::Plan other = kernels::plan_from_json(it->second);
          if (!(other == base))
            f = "plan depends on the environment (" + env.label + ", fresh process): " + plan_diff(base, other);
        }
        if (f.empty()) continue;
        a.findings.push_back(f);
        if (a.verdict != "plan-impure") {
          a.verdict = "plan-impure";
          a.reason = f;
        }
      }
    }
  }

  // Fresh processes: each computes every audited problem's first run.
  if (opt.processes > 0 && opt.fresh_process) {
    std::vector<std::string> ds;
    for (const auto& a : r.problems)
      if (a.op != "planted" && (a.verdict == "deterministic" || a.verdict == "nondeterministic"))
        ds.push_back(a.descriptor);
    for (int k = 0; k < opt.processes && !ds.empty(); ++k) {
      const auto got = opt.fresh_process(ds);
      for (auto& a : r.problems) {
        auto it = got.find(a.descriptor);
        if (it == got.end()) continue;
        std::map<std::string, std::string> first;
        for (const auto& [role, set] : a.digests) first[role] = *set.begin();
        // The first in-process run's digests are the reference.
        record(a, first, it->second, "fresh process " + std::to_string(k + 1));
        if (a.verdict == "deterministic" && !a.findings.empty()) {
          a.verdict = "nondeterministic";
          a.reason = a.findings.front();
        }
      }
    }
  }

  // The negative control, with noise on every second run like the kernels.
  const std::size_t envs = run_environments().size();
  const std::string first = raw_digest(control_run(0, 0, opt.control_deterministic));
  r.control.digests.insert(first);
  r.control.runs = 1;
  for (int i = 1; i < opt.control_runs; ++i) {
    if (noise) noise->set_active(i % 2 == 1);
    r.control.digests.insert(
        raw_digest(control_run(static_cast<std::size_t>(i) % envs, 100 + static_cast<std::uint64_t>(i), opt.control_deterministic)));
    ++r.control.runs;
  }
  if (noise) noise->set_active(false);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::set<std::string> AuditResult::plan_inputs() const {
  std::set<std::string> s;
  const std::string env = "plan depends on the environment (";
  for (const auto& p : problems)
    for (const auto& f : p.findings) {
      if (f.rfind(env, 0) == 0) s.insert(f.substr(env.size(), f.find("):") - env.size()));
      else if (f.rfind("plan of the problem built from its ", 0) == 0) s.insert("how the problem was built");
    }
  return s;
}

int AuditResult::failures() const {
  int n = control.caught() ? 0 : 1;
  for (const auto& p : problems) n += p.failed();
  return n;
}

nlohmann::json AuditResult::to_json() const {
  nlohmann::json j{{"backend", backend},
                   {"repeats", options.repeats},
                   {"processes", options.processes},
                   {"noise", options.noise ? Noise::description() : "off"},
                   {"run_environments", run_environments()},
                   {"plan_environments", plan_environments()},
                   {"plan_process_environments", plan_process_envs},
                   {"plan_depends_on", plan_inputs()},
                   {"fill", fill_string(audit_fill(options.seed))},
                   {"seed", options.seed},
                   {"seconds", seconds},
                   {"failures", failures()}};
  j["control"] = {{"kernel", options.control_deterministic ? "per-block partials (no atomic; audit self-test)"
                                                           : "float atomic add of block partials"},
                  {"runs", control.runs},
                  {"distinct_digests", control.digests.size()},
                  {"caught", control.caught()},
                  {"verdict", control.caught() ? "caught" : "not caught: the audit proved nothing"}};
  j["problems"] = nlohmann::json::array();
  for (const auto& p : problems) {
    nlohmann::json d = nlohmann::json::object();
    for (const auto& [role, set] : p.digests) d[role] = std::vector<std::string>(set.begin(), set.end());
    j["problems"].push_back({{"problem", p.descriptor},
                             {"op", p.op},
                             {"backend", backend},
                             {"runs", p.runs},
                             {"repeats", options.repeats},
                             {"processes", options.processes},
                             {"digests", d},
                             {"verdict", p.verdict},
                             {"reason", p.reason},
                             {"findings", p.findings}});
  }
  return j;
}

std::string summary(const AuditResult& r) {
  struct Row {
    int problems = 0, det = 0, nondet = 0, impure = 0, error = 0, unimpl = 0, skipped = 0, runs = 0;
  };
  std::map<std::string, Row> rows;
  for (const auto& p : r.problems) {
    Row& row = rows[p.op];
    ++row.problems;
    row.runs = std::max(row.runs, p.runs);
    if (p.verdict == "deterministic") ++row.det;
    else if (p.verdict == "nondeterministic") ++row.nondet;
    else if (p.verdict == "plan-impure") ++row.impure;
    else if (p.verdict == "error") ++row.error;
    else if (p.verdict == "unimplemented") ++row.unimpl;
    else ++row.skipped;
  }
  std::ostringstream o;
  o << std::left << std::setw(28) << "operator.direction" << std::right << std::setw(9) << "problems" << std::setw(15)
    << "deterministic" << std::setw(18) << "nondeterministic" << std::setw(13) << "plan-impure" << std::setw(7)
    << "error" << std::setw(15) << "unimplemented" << std::setw(9) << "skipped" << std::setw(14) << "runs/problem"
    << "\n";
  for (const auto& [op, row] : rows)
    o << std::left << std::setw(28) << op << std::right << std::setw(9) << row.problems << std::setw(15) << row.det
      << std::setw(18) << row.nondet << std::setw(13) << row.impure << std::setw(7) << row.error << std::setw(15)
      << row.unimpl << std::setw(9) << row.skipped << std::setw(14) << row.runs << "\n";
  for (const auto& p : r.problems)
    if (p.failed()) o << p.verdict << ": " << p.descriptor << "\n    " << p.reason << "\n";
  // Plan purity: the inputs checked, and any the plans were found to read.
  o << "\nplan inputs checked: how the problem was built (value, descriptor, JSON); in process:";
  for (const auto& e : plan_environments()) o << " [" << e << "]";
  o << "; fresh processes:";
  if (r.plan_process_envs.empty()) o << " none";
  for (const auto& e : r.plan_process_envs) o << " [" << e << "]";
  const auto inputs = r.plan_inputs();
  o << "\nplans depend on (besides the problem): ";
  if (inputs.empty()) o << "nothing";
  for (auto it = inputs.begin(); it != inputs.end(); ++it) o << (it == inputs.begin() ? "" : "; ") << *it;
  o << "\n";
  o << "\nnegative control (" << (r.options.control_deterministic ? "no atomic, audit self-test" : "float atomic")
    << "): " << r.control.runs << " runs, " << r.control.digests.size() << " distinct digest(s): "
    << (r.control.caught() ? "caught" : "NOT caught, so this audit proved nothing") << "\n";
  return o.str();
}

}  // namespace kgate::determinism
