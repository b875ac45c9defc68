// The production kernels' entry points, one set per operator-direction:
// is_supported (with the reason when not), plan (the launch plan as a value),
// run (host tensors in, host tensors out, on the backend this library was
// built for). This header knows no backend: the gate, the tests and the tools
// include it; the implementation links one backend's runtime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/problem.hpp"
#include "reference/reduction.hpp"
#include "reference/tensor.hpp"

namespace kgate::kernels {

struct Support {
  bool ok = true;
  std::string reason;  // why not, when !ok
  explicit operator bool() const { return ok; }
};

// One kernel launch of a plan.
struct LaunchStep {
  std::string kernel;
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::array<std::uint32_t, 3> block{1, 1, 1};
  std::uint64_t lds_bytes = 0;  // dynamic LDS
  bool operator==(const LaunchStep&) const = default;
};

// A launch plan: a pure function of the problem (and the kernel version).
struct Plan {
  std::string op;        // "groupnorm.fwd", ...
  std::string variant;   // kernel family and its parameters in one word
  std::vector<LaunchStep> steps;
  std::map<std::string, std::int64_t> params;  // tile, split and vector sizes
  // Per output role: the reduction structure the oracle bounds the error with
  // (reference/reduction.hpp). Sequential stages of a multi-stage reduction
  // add up in `length`; the final tree is `splits`.
  std::map<std::string, ReductionPlan> reduction;
  std::uint64_t workspace_bytes = 0;
  bool operator==(const Plan&) const = default;
};
nlohmann::json to_json(const Plan& p);
Plan plan_from_json(const nlohmann::json& j);
std::string to_string(const Plan& p);  // a few human-readable lines

struct RunOptions {
  // Fill outputs and workspaces with NaN before the run (determinism tests:
  // the result must not depend on what memory held).
  bool prefill_nan = false;
  // The byte prefill_nan writes: 0xff is a NaN in every floating dtype; the
  // determinism audit also uses a finite garbage pattern.
  unsigned char prefill_byte = 0xff;
  // When set: the plan's launch sequence runs `timing_iters` more times
  // between two events after the checked run, and the mean time of one
  // sequence (kernels only, no copies) is stored here.
  double* kernel_ms = nullptr;
  int timing_iters = 10;
  // When set (with kernel_ms): the mean time of each plan step over
  // `timing_iters` further runs, events recorded between the steps.
  std::vector<double>* step_ms = nullptr;
  // When set (with kernel_ms): called before each timed sequence, outside
  // the timed region (the benchmark's L2 flush); each sequence is then timed
  // between its own pair of events. kernels/driver.hpp implements all of
  // the timing options for every kernel.
  std::function<void()> before_each;
  // When set (with kernel_ms): the launch sequence is captured once as a
  // graph (rt::Graph) and each timed sequence replays it, so that no host
  // launch gap lies between its kernels; plain launches where the backend
  // has no graphs (rt::has_graphs). step_ms is always timed with plain
  // launches (events between the steps).
  bool graph = false;
};

// Operator-directions with a production kernel in this build.
std::vector<std::string> implemented_ops();
// The backend this library runs on ("host", "hip", "cuda").
std::string backend_name();
// The backend's settings a run uses, (name, value) (the host emulator's
// configuration; none for a device backend). Throws std::exception for a bad
// environment value.
std::vector<std::pair<std::string, std::string>> backend_settings();

// Targets this backend runs beside the process's own, chosen per thread
// (TargetScope): the host emulator on its default gfx942 target also runs
// "sm90" (the CUDA kernels' paths: mma.sync atoms, 32-wide warps); none on a
// GPU backend, or when the emulator runs sm90 already (KGATE_HOST_TARGET).
std::vector<std::string> extra_targets();
// This thread's kernels (is_supported, plan, run, boundary problems) use
// `target`, one of extra_targets(), until the scope ends; other threads are
// unaffected. std::invalid_argument for any other target.
class TargetScope {
 public:
  explicit TargetScope(const std::string& target);
  ~TargetScope();
  TargetScope(const TargetScope&) = delete;
  TargetScope& operator=(const TargetScope&) = delete;

 private:
  void* scope_ = nullptr;  // the backend's (the host emulator's rt::host::ThreadConfig)
};

Support is_supported(const Problem& p);
// Requires is_supported(p).
Plan plan(const Problem& p);
// Inputs by role (every non-derived and derived input of p, in their dtypes);
// returns every output of p in its dtype. Throws std::runtime_error on a
// runtime failure (the emulator's defect reports included).
std::map<Role, Tensor> run(const Problem& p, const Plan& plan, const std::map<Role, const Tensor*>& inputs,
                           const RunOptions& opt = {});
// Caller-owned device memory for one launch of a plan: every input and
// output of p by role (dense NDHWC in its dtype: kernels/README's layouts),
// and plan.workspace_bytes of workspace (may be null when that is 0).
struct DeviceArgs {
  std::map<Role, const void*> in;
  std::map<Role, void*> out;
  void* workspace = nullptr;
};
// Launches plan's steps (is_supported(p) and plan == plan(p) required) on
// `a`, on this thread's current stream (rt::StreamScope), without
// allocating and without synchronising, and checks the launches against the
// plan (check_launches). The entry point of kgate's C ABI (kernels/abi);
// run() is the same launch on device copies of host tensors.
void launch(const Problem& p, const Plan& plan, const DeviceArgs& a);

// GroupNorm over a volume split along D into parts, each on its own rank or
// device (the sharded operators' global statistics): the production kernels
// in two phases around the caller's combine of every part's partials. p is
// this part's problem (is_supported(p) required).
//   groupnorm_partials: fwd: per (n, group) moments of this part's x,
//     [N][G][3] fp32 (count, mean, M2), by the forward's statistics pass and
//     chunk tree; bwd: per (n, channel) [N][C][2] fp32 (sum dy', sum
//     dy' * (x - mean)), dy' masked by the fused ReLU, with the given mean
//     and rstd (the whole volume's).
//   groupnorm_finish: the rest of the plan with `combined` (the partials of
//     every part, combined by the caller, same shape) in place of this
//     part's: fwd: y, mean and rstd (mean and rstd by the kernels' own
//     finalize formula); bwd: dx, dgamma and dbeta, with whole_group_elems
//     (the whole volume's elements per group) as the group size.
// With one part, partials then finish equals run() bit for bit.
Tensor groupnorm_partials(const GroupNormProblem& p, const std::map<Role, const Tensor*>& inputs);
std::map<Role, Tensor> groupnorm_finish(const GroupNormProblem& p, const std::map<Role, const Tensor*>& inputs,
                                        const Tensor& combined, std::int64_t whole_group_elems);

// The by-role pointer map run() takes, over a map of owned tensors.
std::map<Role, const Tensor*> pointers(const std::map<Role, Tensor>& tensors);

// A problem chosen by a plan's own rules so that one branch or boundary of
// the kernel happens (a ragged last chunk, a column-pass count, a vector
// width, a split count, the smallest or largest group, ...).
struct BoundaryProblem {
  Problem problem;
  std::string why;  // the branch or boundary, in a few words
};
// For one operator-direction ("groupnorm.fwd", "conv3d.bwd_data", ...): the
// problems that make every branch the plan can select and every boundary of
// it happen, each as small as the plan's rules allow, every one supported.
// Derived from the same constants and rules as plan(), so they follow the
// kernels as they change; the gate (`kgate verify`) runs them beside the
// corpus. A branch no affordable problem reaches is named in
// unreachable_branches instead. Empty for an operator-direction without a
// kernel.
std::vector<BoundaryProblem> boundary_problems(const std::string& op_dir);
// Branches of op_dir's plan that no boundary problem reaches on the host
// backend, each with the reason and the test that covers it otherwise.
std::vector<std::string> unreachable_branches(const std::string& op_dir);

}  // namespace kgate::kernels
