#include "tools/gate_problems.hpp"

#include <cmath>

#include "kernels/api.hpp"
#include "reference/descriptor.hpp"

namespace kgate::gate {

std::vector<corpus::Entry> plan_entries() {
  std::vector<corpus::Entry> out;
  for (const std::string& op : kernels::implemented_ops())
    for (const kernels::BoundaryProblem& b : kernels::boundary_problems(op)) {
      corpus::Entry e;
      e.config = kPlanConfig;
      e.descriptor = to_descriptor(b.problem);
      e.problem = b.problem;
      e.sites = {std::string(kPlanConfig) + ": " + b.why};
      e.calls_per_step = 0;
      out.push_back(std::move(e));
    }
  return out;
}

std::vector<Fill> pinning_fills(const Problem& p, std::uint64_t seed) {
  const auto* g = std::get_if<GroupNormProblem>(&p);
  if (!g) return {};
  Fill constant = parse_fill("gn_exact:constant=1", seed);
  // x = sigma * u with u uniform in [-1, 1): variance sigma^2 / 3 = eps.
  Fill near_eps = parse_fill("gn_sweep", seed);
  near_eps.mean = 0.0;
  near_eps.sigma = std::sqrt(3.0 * g->eps);
  return {constant, near_eps};
}

}  // namespace kgate::gate
