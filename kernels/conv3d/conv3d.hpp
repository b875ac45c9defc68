// conv3d and conv_transpose3d, every direction (NDHWC): the operator's part
// of kernels/api.hpp. Kernels: conv_kernels.hpp.
#pragma once

#include "kernels/api.hpp"

namespace kgate::kernels {

namespace cv {
struct Geom;  // conv_kernels.hpp
}

Support conv_supported(const ConvProblem& p);
Plan conv_plan(const ConvProblem& p);
// kernels::launch for a convolution (kernels/api.hpp).
void conv_launch(const ConvProblem& p, const Plan& plan, const DeviceArgs& args);
std::map<Role, Tensor> conv_run(const ConvProblem& p, const Plan& plan, const std::map<Role, const Tensor*>& inputs,
                                const RunOptions& opt);

// The kernels' geometry of p (for tests that launch conv_kernels.hpp's
// kernels themselves).
cv::Geom conv_device_geom(const ConvProblem& p);

// Test only (the split-K sweep): the plan of p that splits every reduction
// it can split into `splits` slices where the problem has that many rows
// (backward-weight's dw and db) or taps (conv_mma's split of K; the W-halo
// step has none), whole slices each, and into none at 1 (conv_plan.hpp's
// conv_plan_split). conv_run executes it as it executes its own plans; its
// `splits` parameters say the count it took.
Plan conv_split_plan(const ConvProblem& p, std::int64_t splits);

// The gate's boundary problems and unreachable branches (conv_boundary.cpp;
// kernels::boundary_problems, unreachable_branches).
std::vector<BoundaryProblem> conv_boundary_problems(ConvOp op, ConvDir dir);
std::vector<std::string> conv_unreachable_branches();

}  // namespace kgate::kernels
