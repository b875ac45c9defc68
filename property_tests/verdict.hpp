// The gate's verdict on one generated problem and fill, as the property tests
// assert it: the kernel ran (not unimplemented, not declined), every rerun
// reproduced its digests, and every output's report is acceptable.
#pragma once

#include <string>

#include "oracles/oracle.hpp"
#include "reference/fill.hpp"
#include "tools/gate.hpp"

namespace kgate::prop {

// A verdict the kernel deserves: passed, or "untrusted" only because the
// reference itself is (nearly) all zeros (a GroupNorm group of one element,
// ReLU of an all-negative output, a convolution whose terms all lie in
// padding), where the comparison proves nothing about any kernel. Every
// tier and the NaN/Inf check still had to pass for that.
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
