// Properties of the GroupNorm kernels on generated problems: the gate's
// verdict (kernel vs fp64 reference under the oracle) is "passed". A failure
// shrinks to a minimal problem and prints its descriptor and fill, which
// `kgate check` reproduces.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "property_tests/gen_problems.hpp"
#include "property_tests/verdict.hpp"
#include "tools/gate.hpp"

namespace kgate {
namespace {

RC_GTEST_PROP(GroupNormProps, KernelPassesTheOracle, ()) {
  const GroupNormProblem p = *prop::gen_groupnorm();
  const Fill f = *prop::gen_groupnorm_fill(p.src);
  const prop::Verdict v = prop::gate_verdict(Problem(p), f);
  RC_LOG() << "repro: kgate check '" << to_descriptor(p) << "' --fill " << fill_string(f) << " --seed " << f.seed
           << "\n" << v.evidence;
  RC_ASSERT(v.ok);
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
