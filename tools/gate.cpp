#include "tools/gate.hpp"

#include <chrono>
#include <cmath>

#include "kernels/api.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"

namespace kgate::gate {

bool is_failure(State s) { return s == State::failed || s == State::untrusted || s == State::invalid; }

std::string dtype_label(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return std::string(name(c->src)) + ":" + std::string(name(c->dst));
  const auto& g = std::get<GroupNormProblem>(p);
  return std::string(name(g.src)) + ":" + std::string(name(g.dst));
}

std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed) {
  if (std::holds_alternative<ConvProblem>(p)) return {lattice_fill(p, seed), parse_fill("signed", seed)};
  return {parse_fill("gn_exact", seed), parse_fill("signed", seed)};
}

namespace {

// The worse of two states: failed > untrusted > invalid > passed.
State worse(State a, State b) {
  auto rank = [](State s) { return s == State::failed ? 3 : s == State::untrusted ? 2 : s == State::invalid ? 1 : 0; };
  return rank(b) > rank(a) ? b : a;
}

std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got) {
  std::vector<RoleResult> out;
  const ref::Inputs rin = ref::refs(in);
  auto plan_of = [&](Role r) {
    auto it = plan.reduction.find(std::string(name(r)));
    if (it == plan.reduction.end()) throw std::logic_error("plan declares no reduction for " + std::string(name(r)));
    return it->second;
  };
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    const ref::Outputs want = ref::run_reference(p, rin, ref::Impl::fast);
    const ref::Outputs abs = ref::abs_companion(p, rin);
    const Tensor* bias = c->bias && c->dir == ConvDir::fwd ? &in.at(Role::b) : nullptr;
    for (const auto& s : outputs(p))
      out.push_back({std::string(name(s.role)), oracle::compare_conv(*c, s.role, want.at(s.role), abs.at(s.role),
                                                                     got.at(s.role), plan_of(s.role), fill, bias)});
    return out;
  }
  const auto& g = std::get<GroupNormProblem>(p);
  const ref::Outputs want = ref::run_reference(p, rin, ref::Impl::fast);
  const ref::GroupNormCompanion comp = ref::groupnorm_companion(g, rin);
  oracle::GroupNormInputs gi;
  gi.x = &in.at(Role::x);
  if (g.affine) {
    gi.gamma = &in.at(Role::gamma);
    gi.beta = &in.at(Role::beta);
  }
  if (g.dir == GnDir::fwd) {
    gi.mean = &comp.mean;
    gi.rstd = &comp.rstd;
    gi.var = &comp.var;
  } else {
    gi.dy = &in.at(Role::dy);
    gi.mean = &in.at(Role::mean);
    gi.rstd = &in.at(Role::rstd);
  }
  for (const auto& s : outputs(p))
    out.push_back({std::string(name(s.role)),
                   oracle::compare_groupnorm(g, s.role, want.at(s.role), got.at(s.role), gi, plan_of(s.role), fill)});
  return out;
}

std::string digests_of(const std::map<Role, Tensor>& m) {
  std::string s;
  for (const auto& [r, t] : m) s += std::string(name(r)) + "=" + digest(t) + " ";
  return s;
}

}  // namespace

Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  r.descriptor = to_descriptor(p);
  r.op = op_dir_name(p);
  r.dtype = dtype_label(p);
  try {
    validate(p);
  } catch (const InputError& e) {
    r.state = State::invalid;
    r.reason = e.what();
    return r;
  }
  const kernels::Support sup = kernels::is_supported(p);
  if (!sup) {
    const auto ops = kernels::implemented_ops();
    r.state = std::find(ops.begin(), ops.end(), r.op) == ops.end() ? State::unimplemented : State::skipped;
    r.reason = sup.reason;
    return r;
  }
  const kernels::Plan plan = kernels::plan(p);
  r.plan = kernels::to_string(plan);
  for (const Fill& f : fills) {
    FillResult fr;
    fr.fill = f;
    try {
      const auto in = ref::make_inputs(p, f);
      const auto got = kernels::run(p, plan, kernels::pointers(in));
      fr.digest = digests_of(got);
      for (int k = 0; k < repeats; ++k) {
        kernels::RunOptions nan;
        nan.prefill_nan = true;  // what memory held must not matter either
        const std::string again = digests_of(kernels::run(p, plan, kernels::pointers(in), nan));
        if (again != fr.digest) {
          fr.state = State::failed;
          fr.detail = "nondeterministic: rerun " + std::to_string(k + 1) + " gave " + again + "vs " + fr.digest;
          break;
        }
      }
      fr.roles = judge(p, plan, f, in, got);
      for (const auto& rr : fr.roles) {
        fr.state = worse(fr.state, rr.report.state);
        fr.worst_margin = std::max(fr.worst_margin, rr.report.tier2.max_margin);
      }
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      fr.state = State::failed;
      fr.detail = std::string("kernel run failed: ") + e.what();
    }
    r.state = worse(r.state, fr.state);
    r.worst_margin = std::max(r.worst_margin, fr.worst_margin);
    r.fills.push_back(std::move(fr));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string Result::repro() const {
  const FillResult* worst = nullptr;
  for (const auto& f : fills)
    if (!worst || (is_failure(f.state) && !is_failure(worst->state)) ||
        (is_failure(f.state) == is_failure(worst->state) && f.worst_margin > worst->worst_margin))
      worst = &f;
  std::string s = "kgate check '" + descriptor + "'";
  if (worst) s += " --fill " + fill_string(worst->fill) + " --seed " + std::to_string(worst->fill.seed);
  return s;
}

nlohmann::json Result::to_json() const {
  nlohmann::json fj = nlohmann::json::array();
  for (const auto& f : fills) {
    nlohmann::json roles = nlohmann::json::object();
    for (const auto& rr : f.roles) roles[rr.role] = oracle::to_json(rr.report);
    fj.push_back({{"fill", kgate::to_json(f.fill)}, {"state", oracle::name(f.state)}, {"detail", f.detail},
                  {"digest", f.digest}, {"worst_margin", f.worst_margin}, {"outputs", roles}});
  }
  return {{"descriptor", descriptor}, {"op", op},         {"dtype", dtype},   {"state", oracle::name(state)},
          {"reason", reason},         {"plan", plan},     {"fills", fj},      {"worst_margin", worst_margin},
          {"seconds", seconds},       {"repro", repro()}};
}

}  // namespace kgate::gate
