// The gate's verdict on one generated problem and fill, as the property tests
// assert it: the kernel ran (not unimplemented, not declined), every rerun
// reproduced its digests, and every output's report is acceptable.
#pragma once

#include <string>

#include "oracles/oracle.hpp"
#include "reference/fill.hpp"
#include "tools/gate.hpp"

namespace kgate::prop {

// A verdict the kernel deserves on one generated case: passed, or
// "untrusted" only because the comparison proves nothing (gate::verdict:
// the reference is zero or within its bound of zero nearly everywhere, e.g.
// a GroupNorm group of one element, a ReLU that clamps every output, a
// convolution whose terms all lie in padding). Every tier and the NaN/Inf
// check still had to pass for that. The gate itself (gate::evaluate) does
// not pass a problem that no fill proves; a property case is one fill of
// many random problems, and is judged on what that fill can show.
inline bool acceptable(const oracle::Report& r) { return gate::verdict(r) == oracle::State::passed; }

struct Verdict {
  bool ok = false;
  std::string evidence;  // failure details and the reports that did not pass
};

inline Verdict gate_verdict(const Problem& p, const Fill& f) {
  const gate::Result r = gate::evaluate(p, {f}, 0);
  Verdict v{r.state != oracle::State::unimplemented && r.state != oracle::State::skipped, r.reason};
  for (const auto& fr : r.fills) {
    v.evidence += fr.detail;
    v.ok = v.ok && fr.state == oracle::State::passed;
    for (const auto& rr : fr.roles) {
      if (!rr.report.passed()) v.evidence += oracle::to_table(rr.report);
      v.ok = v.ok && acceptable(rr.report);
    }
  }
  return v;
}

}  // namespace kgate::prop
