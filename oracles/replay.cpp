// The combine probe's verdict (oracle.hpp: compare_replay).
#include <cmath>
#include <limits>

#include "oracles/oracle.hpp"
#include "reference/descriptor.hpp"

namespace kgate::oracle {

Report compare_replay(const ConvProblem& p, Role output, const ref::Replay& replay, const Tensor& candidate,
                      const ReductionPlan& plan, const Fill& fill, const Options& opt) {
  plan.validate();
  if (candidate.dims() != replay.value.dims()) throw std::invalid_argument("compare_replay: the candidate's dims differ");
  Report r;
  r.what = std::string(op_dir_name(Problem{p})) + " " + std::string(name(output));
  r.descriptor = to_descriptor(p);
  r.fill = fill_string(fill) + " seed=" + std::to_string(fill.seed);
  r.plan = to_string(plan);
  r.numel = candidate.numel();
  r.depth = plan.depth();
  TierResult& t = r.tier1;
  t.reason = "the plan's split combine replayed in fp32 on the combine probe: equal bit for bit where every "
             "partial is one term";
  const std::int64_t n = candidate.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    if (replay.probed.get(i) == 0.0) {
      ++t.excluded;
      continue;
    }
    ++t.checked;
    const double want = replay.value.get(i), got = candidate.get(i);
    // Equal values (a NaN never is); +0 and -0 differ in bits but not here:
    // the probe's sums are never signed zeros the plan distinguishes.
    if (got == want) continue;
    ++t.violations;
    if (static_cast<int>(t.worst.size()) < opt.worst_count)
      t.worst.push_back({i, unravel(i, candidate.dims()), want, got, 0.0, std::numeric_limits<double>::infinity()});
  }
  t.state = t.violations ? State::failed : State::passed;
  t.max_margin = t.violations ? std::numeric_limits<double>::infinity() : 0.0;
  if (t.violations)
    t.reason = std::to_string(t.violations) + " of " + std::to_string(t.checked) +
               " probed elements differ from the replay of the plan's split combine (" + to_string(plan) +
               "): the kernel combined its partials in another order or with another slice map than it publishes";
  r.tier2.reason = r.tier3.reason = "the combine probe is judged by its replay (tier 1)";
  if (t.checked == 0) {
    r.trust.state = State::untrusted;
    r.trust.proves_nothing = true;
    r.trust.reason = "no element of the probe has single-term partials";
  }
  r.state = t.violations ? State::failed : r.trust.state;
  return r;
}

}  // namespace kgate::oracle
