// The audit's plan-purity check: a pure plan passes; a plan that reads the
// environment (here the emulator's thread count, or what a fresh process
// sees at start-up) or that is not a function of the problem's value is
// reported, and the summary names what it depends on.
#include <gtest/gtest.h>

#include <stdexcept>

#include "determinism/audit.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/descriptor.hpp"

namespace kgate::determinism {
namespace {

const char* kProblem = "groupnorm.fwd bf16 n1 c64 g8 d8 relu";

TEST(AuditPlan, ProductionPlanIsPure) {
  EXPECT_TRUE(plan_findings(parse_descriptor(kProblem)).empty());
}

TEST(AuditPlan, EnvironmentDependenceIsReported) {
  const auto f = plan_findings(parse_descriptor(kProblem), [](const Problem& p) {
    kernels::Plan pl = kernels::plan(p);
    pl.params["threads_seen"] = rt::host::config().threads;  // depends on the emulator's thread count
    return pl;
  });
  ASSERT_FALSE(f.empty());
  EXPECT_NE(f.front().find("plan depends on the environment"), std::string::npos) << f.front();
  EXPECT_NE(f.front().find("params"), std::string::npos) << f.front();
}

TEST(AuditPlan, DependenceOnHowTheProblemWasBuiltIsReported) {
  // A planner with hidden state: each call sees a different plan.
  int calls = 0;
  const auto f = plan_findings(parse_descriptor(kProblem), [&calls](const Problem& p) {
    kernels::Plan pl = kernels::plan(p);
    pl.variant += "/" + std::to_string(calls++);
    return pl;
  });
  ASSERT_FALSE(f.empty());
  EXPECT_NE(f.front().find("built from its descriptor differs: variant"), std::string::npos) << f.front();
}

// The fresh-process plan check with a stand-in for the processes (the real
// ones run in the kgate_audit CTest): `change` plants a dependence on the
// last environment, `fail` makes planning fail there.
AuditResult audit_with_plan_processes(bool change, bool fail) {
  AuditOptions opt;
  opt.repeats = 0;
  opt.processes = 0;
  opt.noise = false;
  const auto envs = plan_process_environments();
  opt.plan_process = [=](const std::vector<std::string>& ds, const ProcessEnv& env) {
    const bool planted = env.label == envs.back().label;
    if (fail && planted) throw std::runtime_error("no device");
    std::map<std::string, nlohmann::json> m;
    for (const auto& d : ds) {
      kernels::Plan pl = kernels::plan(parse_descriptor(d));
      if (change && planted) pl.params["compute_units"] = 132;
      m[d] = kernels::to_json(pl);
    }
    return m;
  };
  return run_audit({parse_descriptor(kProblem)}, opt);
}

TEST(AuditPlan, PureInFreshProcesses) {
  const AuditResult r = audit_with_plan_processes(false, false);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].verdict, "deterministic") << r.problems[0].reason;
  EXPECT_EQ(r.plan_process_envs.size(), plan_process_environments().size());
  EXPECT_TRUE(r.plan_inputs().empty());
  EXPECT_NE(summary(r).find("plans depend on (besides the problem): nothing"), std::string::npos) << summary(r);
}

TEST(AuditPlan, FreshProcessEnvironmentDependenceIsReported) {
  const std::string env = plan_process_environments().back().label;
  const AuditResult r = audit_with_plan_processes(true, false);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].verdict, "plan-impure");
  EXPECT_NE(r.problems[0].reason.find(env), std::string::npos) << r.problems[0].reason;
  EXPECT_NE(r.problems[0].reason.find("params"), std::string::npos) << r.problems[0].reason;
  EXPECT_EQ(r.plan_inputs(), std::set<std::string>{env + ", fresh process"});
  EXPECT_NE(summary(r).find("plans depend on (besides the problem): " + env), std::string::npos) << summary(r);
  EXPECT_GE(r.failures(), 1);
}

TEST(AuditPlan, FreshProcessPlanningFailureIsReported) {
  const AuditResult r = audit_with_plan_processes(false, true);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].verdict, "plan-impure");
  EXPECT_NE(r.problems[0].reason.find("planning failed: no device"), std::string::npos) << r.problems[0].reason;
}

}  // namespace
}  // namespace kgate::determinism
