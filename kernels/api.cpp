#include "kernels/api.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "kernels/conv3d/conv3d.hpp"
#include "kernels/groupnorm/groupnorm.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels {

nlohmann::json to_json(const Plan& p) {
  nlohmann::json steps = nlohmann::json::array(), red = nlohmann::json::object();
  for (const auto& s : p.steps)
    steps.push_back({{"kernel", s.kernel}, {"grid", s.grid}, {"block", s.block}, {"lds_bytes", s.lds_bytes}});
  for (const auto& [role, r] : p.reduction) red[role] = kgate::to_json(r);
  return {{"op", p.op},       {"variant", p.variant},   {"steps", steps},
          {"params", p.params}, {"reduction", red}, {"workspace_bytes", p.workspace_bytes}};
}

Plan plan_from_json(const nlohmann::json& j) {
  Plan p;
  p.op = j.at("op").get<std::string>();
  p.variant = j.at("variant").get<std::string>();
  for (const auto& s : j.at("steps"))
    p.steps.push_back({s.at("kernel").get<std::string>(), s.at("grid").get<std::array<std::uint32_t, 3>>(),
                       s.at("block").get<std::array<std::uint32_t, 3>>(), s.at("lds_bytes").get<std::uint64_t>()});
  p.params = j.at("params").get<std::map<std::string, std::int64_t>>();
  for (auto it = j.at("reduction").begin(); it != j.at("reduction").end(); ++it)
    p.reduction[it.key()] = reduction_from_json(it.value(), "plan.reduction." + it.key());
  p.workspace_bytes = j.at("workspace_bytes").get<std::uint64_t>();
  return p;
}

std::string to_string(const Plan& p) {
  std::ostringstream o;
  o << p.op << " " << p.variant << " (workspace " << p.workspace_bytes << " bytes)\n";
  o << "  params:";
  for (const auto& [k, v] : p.params) o << " " << k << "=" << v;
  o << "\n";
  for (const auto& s : p.steps)
    o << "  launch " << s.kernel << " grid " << s.grid[0] << "x" << s.grid[1] << "x" << s.grid[2] << " block "
      << s.block[0] << "x" << s.block[1] << "x" << s.block[2] << (s.lds_bytes ? " lds " + std::to_string(s.lds_bytes) : "")
      << "\n";
  for (const auto& [role, r] : p.reduction) o << "  reduction " << role << ": " << kgate::to_string(r) << "\n";
  return o.str();
}

std::vector<std::string> implemented_ops() {
  return {"conv3d.fwd",           "conv3d.bwd_data",           "conv3d.bwd_weight",
          "conv_transpose3d.fwd", "conv_transpose3d.bwd_data", "conv_transpose3d.bwd_weight",
          "groupnorm.fwd",        "groupnorm.bwd"};
}

std::string backend_name() { return rt::backend_name(rt::backend); }

#if !defined(__HIP__) && !defined(__CUDACC__)
std::vector<std::string> extra_targets() {
  if (rt::host::config().target == rt::Target::gfx942) return {"sm90"};
  return {};
}
TargetScope::TargetScope(const std::string& target) {
  const auto extra = extra_targets();
  if (std::find(extra.begin(), extra.end(), target) == extra.end())
    throw std::invalid_argument("TargetScope: '" + target + "' is not a target this backend runs beside its own");
  scope_ = new rt::host::ThreadConfig(rt::host::config_for(rt::Target::sm90, rt::host::config()));
}
TargetScope::~TargetScope() { delete static_cast<rt::host::ThreadConfig*>(scope_); }
#else
std::vector<std::string> extra_targets() { return {}; }
TargetScope::TargetScope(const std::string& target) {
  throw std::invalid_argument("TargetScope: the " + backend_name() + " backend runs its device's target only, not '" +
                              target + "'");
}
TargetScope::~TargetScope() = default;
#endif
std::vector<std::pair<std::string, std::string>> backend_settings() { return rt::settings(); }

Support is_supported(const Problem& p) {
  if (const auto* g = std::get_if<GroupNormProblem>(&p)) return groupnorm_supported(*g);
  return conv_supported(std::get<ConvProblem>(p));
}

Plan plan(const Problem& p) {
  if (const Support s = is_supported(p); !s) throw std::invalid_argument("plan: " + s.reason);
  if (const auto* g = std::get_if<GroupNormProblem>(&p)) return groupnorm_plan(*g);
  return conv_plan(std::get<ConvProblem>(p));
}

std::map<Role, Tensor> run(const Problem& p, const Plan& pl, const std::map<Role, const Tensor*>& inputs,
                           const RunOptions& opt) {
  if (const Support s = is_supported(p); !s) throw std::invalid_argument("run: " + s.reason);
  if (const auto* g = std::get_if<GroupNormProblem>(&p)) return groupnorm_run(*g, pl, inputs, opt);
  return conv_run(std::get<ConvProblem>(p), pl, inputs, opt);
}

void launch(const Problem& p, const Plan& pl, const DeviceArgs& a) {
  if (const Support s = is_supported(p); !s) throw std::invalid_argument("launch: " + s.reason);
  if (const auto* g = std::get_if<GroupNormProblem>(&p)) return groupnorm_launch(*g, pl, a);
  return conv_launch(std::get<ConvProblem>(p), pl, a);
}

std::vector<BoundaryProblem> boundary_problems(const std::string& op_dir) {
  if (op_dir == "groupnorm.fwd") return groupnorm_boundary_problems(GnDir::fwd);
  if (op_dir == "groupnorm.bwd") return groupnorm_boundary_problems(GnDir::bwd);
  for (ConvOp op : {ConvOp::conv3d, ConvOp::conv_transpose3d})
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight})
      if (op_dir == std::string(name(op)) + "." + std::string(name(dir))) return conv_boundary_problems(op, dir);
  return {};
}

std::vector<std::string> unreachable_branches(const std::string& op_dir) {
  if (op_dir.rfind("groupnorm.", 0) == 0) return groupnorm_unreachable_branches();
  if (op_dir.rfind("conv3d.", 0) == 0 || op_dir.rfind("conv_transpose3d.", 0) == 0) return conv_unreachable_branches();
  return {};
}

std::map<Role, const Tensor*> pointers(const std::map<Role, Tensor>& tensors) {
  std::map<Role, const Tensor*> r;
  for (const auto& [k, v] : tensors) r[k] = &v;
  return r;
}

}  // namespace kgate::kernels
