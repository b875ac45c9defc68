#include "tools/gate.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <new>
#include <system_error>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/conv3d/ref_common.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"
#include "tools/gate_problems.hpp"

namespace kgate::gate {

bool is_failure(State s) { return s == State::failed || s == State::untrusted || s == State::invalid; }

State verdict(const oracle::Report& r) {
  if (r.state == State::untrusted && r.trust.ref_zero_fraction > oracle::Options{}.max_ref_zero_fraction)
    return State::passed;
  return r.state;
}

std::string dtype_label(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return std::string(name(c->src)) + ":" + std::string(name(c->dst));
  const auto& g = std::get<GroupNormProblem>(p);
  return std::string(name(g.src)) + ":" + std::string(name(g.dst));
}

std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed) {
  if (std::holds_alternative<ConvProblem>(p)) return {lattice_fill(p, seed), parse_fill("signed", seed)};
  std::vector<Fill> fills{parse_fill("gn_exact", seed), parse_fill("signed", seed)};
  for (Fill& f : pinning_fills(p, seed)) fills.push_back(f);
  return fills;
}

namespace {

// The worse of two states: failed > untrusted > invalid > passed.
State worse(State a, State b) {
  auto rank = [](State s) { return s == State::failed ? 3 : s == State::untrusted ? 2 : s == State::invalid ? 1 : 0; };
  return rank(b) > rank(a) ? b : a;
}

std::string digests_of(const std::map<Role, Tensor>& m) {
  std::string s;
  for (const auto& [r, t] : m) s += std::string(name(r)) + "=" + digest(t) + " ";
  return s;
}

}  // namespace

std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got,
                              const std::function<void(const char*)>& phase) {
  std::vector<RoleResult> out;
  const ref::Inputs rin = ref::refs(in);
  phase("reference");
  auto plan_of = [&](Role r) {
    auto it = plan.reduction.find(std::string(name(r)));
    if (it == plan.reduction.end()) throw std::logic_error("plan declares no reduction for " + std::string(name(r)));
    return it->second;
  };
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    const ref::Outputs want = ref::run_reference(p, rin, ref::Impl::fast);
    const ref::Outputs abs = ref::abs_companion(p, rin);
    phase("oracle");
    const Tensor* bias = c->bias && c->dir == ConvDir::fwd ? &in.at(Role::b) : nullptr;
    for (const auto& s : outputs(p))
      out.push_back({std::string(name(s.role)), oracle::compare_conv(*c, s.role, want.at(s.role), abs.at(s.role),
                                                                     got.at(s.role), plan_of(s.role), fill, bias)});
    return out;
  }
  const auto& g = std::get<GroupNormProblem>(p);
  const ref::Outputs want = ref::run_reference(p, rin, ref::Impl::fast);
  const ref::GroupNormCompanion comp = ref::groupnorm_companion(g, rin);
  phase("oracle");
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

namespace {

std::string out_of_memory(const Problem& p, const std::string& descriptor, const std::string& cause = "out of memory") {
  return descriptor + ": " + cause + " (estimated footprint " +
         std::to_string(static_cast<std::int64_t>(footprint_bytes(p)) >> 20) + " MiB; " +
         std::to_string(static_cast<std::int64_t>(available_memory()) >> 20) +
         " MiB of host memory available); an error of the run, not a verdict on the kernel";
}

}  // namespace

Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats, const PhaseFn& phase) {
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
    const std::string which = " (fill " + fill_string(f) + " seed " + std::to_string(f.seed) + ")";
    auto enter = [&](const char* what) {
      if (phase) phase(what + which);
    };
    try {
      enter("inputs");
      const auto in = ref::make_inputs(p, f);
      enter("kernel");
      const auto got = kernels::run(p, plan, kernels::pointers(in));
      fr.digest = digests_of(got);
      if (repeats > 0) enter("rerun");
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
      fr.roles = judge(p, plan, f, in, got, enter);
      for (const auto& rr : fr.roles) {
        fr.state = worse(fr.state, verdict(rr.report));
        if (rr.report.state != verdict(rr.report))
          fr.detail += (fr.detail.empty() ? "" : "; ") + rr.role + ": reference all zeros (proves nothing)";
        fr.worst_margin = std::max(fr.worst_margin, rr.report.tier2.max_margin);
      }
    } catch (const InputError&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw RunError(out_of_memory(p, r.descriptor));
    } catch (const rt::OutOfMemory& e) {
      throw RunError(out_of_memory(p, r.descriptor, e.what()));
    } catch (const std::exception& e) {
      // No thread, or no memory for one: the machine's limits, not the kernel.
      if (const auto* sys = dynamic_cast<const std::system_error*>(&e);
          sys && (sys->code() == std::errc::resource_unavailable_try_again || sys->code() == std::errc::not_enough_memory))
        throw RunError(out_of_memory(p, r.descriptor, e.what()));
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

double footprint_bytes(const Problem& p) {
  if (!kernels::is_supported(p)) return 0;
  auto bytes = [](const TensorSpec& s, std::size_t element) {
    double n = 1;
    for (std::int64_t d : s.dims) n *= static_cast<double>(d);
    return n * static_cast<double>(element);
  };
  double total = 0;
  for (const auto& s : inputs(p)) total += 2 * bytes(s, size_of(s.dtype));
  for (const auto& s : outputs(p)) total += 3 * bytes(s, size_of(s.dtype)) + 2 * bytes(s, sizeof(double));
  return total + static_cast<double>(kernels::plan(p).workspace_bytes);
}

double available_memory() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    double kib = 0;
    std::string unit;
    if (key == "MemAvailable:" && in >> kib >> unit && unit == "kB") return kib * 1024;
    std::getline(in, key);
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return static_cast<double>(pages) * static_cast<double>(page);
}

nlohmann::json backend_settings() {
  nlohmann::json j{{"backend", kernels::backend_name()}};
  try {
    for (const auto& [k, v] : kernels::backend_settings()) j[kernels::backend_name()][k] = v;
    j["ref_threads"] = ref::ref_threads();  // the fp64 references' workers (KGATE_REF_THREADS)
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError("environment", e.what());
  }
  return j;
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
