// conv3d and conv_transpose3d, every direction (NDHWC): the operator's part
// of kernels/api.hpp. Kernels: conv_kernels.hpp.
#pragma once

#include "kernels/api.hpp"

namespace kgate::kernels {

Support conv_supported(const ConvProblem& p);
Plan conv_plan(const ConvProblem& p);
std::map<Role, Tensor> conv_run(const ConvProblem& p, const Plan& plan, const std::map<Role, const Tensor*>& inputs,
                                const RunOptions& opt);

}  // namespace kgate::kernels
