// Properties of the GroupNorm kernels on generated problems: the gate's
// verdict (kernel vs fp64 reference under the oracle) is "passed". A failure
// shrinks to a minimal problem and prints its descriptor and fill, which
// `kgate check` reproduces.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "property_tests/gen_problems.hpp"
#include "tools/gate.hpp"

namespace kgate {
namespace {

// A verdict the kernel deserves (gate::verdict: "untrusted" only because the
// reference is all zeros proves nothing and passes).
bool acceptable(const oracle::Report& r) { return gate::verdict(r) == oracle::State::passed; }

RC_GTEST_PROP(GroupNormProps, KernelPassesTheOracle, ()) {
  const GroupNormProblem p = *prop::gen_groupnorm();
  const Fill f = *prop::gen_groupnorm_fill();
  const gate::Result r = gate::evaluate(Problem(p), {f}, 0);
  std::string evidence;
  bool ok = r.state != oracle::State::unimplemented && r.state != oracle::State::skipped;
  for (const auto& fr : r.fills) {
    evidence += fr.detail;
    ok = ok && fr.state == oracle::State::passed;
    for (const auto& rr : fr.roles) {
      if (!rr.report.passed()) evidence += oracle::to_table(rr.report);
      ok = ok && acceptable(rr.report);
    }
  }
  RC_LOG() << "repro: kgate check '" << to_descriptor(p) << "' --fill " << fill_string(f) << " --seed " << f.seed
           << "\n" << evidence;
  RC_ASSERT(ok);
}

// The generators only produce valid, supported problems (a property that a
// generator change could break, and that the first property relies on).
RC_GTEST_PROP(GroupNormProps, GeneratedProblemsAreValidAndSupported, ()) {
  const GroupNormProblem p = *prop::gen_groupnorm();
  RC_ASSERT(std::get<GroupNormProblem>(parse_descriptor(to_descriptor(p))) == p);
  RC_ASSERT(kernels::is_supported(Problem(p)).ok);
}

}  // namespace
}  // namespace kgate
