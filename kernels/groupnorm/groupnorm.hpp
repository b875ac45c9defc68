// GroupNorm forward and backward (NDHWC, fused ReLU): the operator's part of
// kernels/api.hpp.
#pragma once

#include "kernels/api.hpp"

namespace kgate::kernels {

Support groupnorm_supported(const GroupNormProblem& p);
Plan groupnorm_plan(const GroupNormProblem& p);
// kernels::launch for GroupNorm (kernels/api.hpp).
void groupnorm_launch(const GroupNormProblem& p, const Plan& plan, const DeviceArgs& args);
std::map<Role, Tensor> groupnorm_run(const GroupNormProblem& p, const Plan& plan,
                                     const std::map<Role, const Tensor*>& inputs, const RunOptions& opt);
std::vector<BoundaryProblem> groupnorm_boundary_problems(GnDir dir);
std::vector<std::string> groupnorm_unreachable_branches();

}  // namespace kgate::kernels
