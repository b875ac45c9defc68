// The audit's plan-purity check: a pure plan passes; a plan that reads the
// environment (here the emulator's thread count) or that is not a function
// of the problem's value is reported.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kgate::determinism
