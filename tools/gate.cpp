#include "tools/gate.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <new>
#include <set>
#include <system_error>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/conv3d/ref_common.hpp"
#include "reference/descriptor.hpp"
#include "reference/device/devref.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"
#include "tools/gate_problems.hpp"

namespace kgate::gate {

bool is_failure(State s) { return s == State::failed || s == State::untrusted || s == State::invalid; }

State verdict(const oracle::Report& r) {
  if (r.state == State::untrusted && r.trust.proves_nothing) return State::passed;
  return r.state;
}

bool proves(const oracle::Report& r) { return r.state == State::passed; }

std::string identically_zero(const Problem& p, Role output) {
  const auto* g = std::get_if<GroupNormProblem>(&p);
  if (!g || g->group_size() != 1) return {};
  // A group of one element: x - mean = 0, so y = beta, dx = r g dy - r g dy
  // and dgamma = sum r dy (x - mean).
  if (g->dir == GnDir::bwd && output == Role::dx) return "groups of one element: dx = r gamma dy - r gamma dy";
  if (g->dir == GnDir::bwd && output == Role::dgamma) return "groups of one element: dgamma = sum r dy (x - mean)";
  if (g->dir == GnDir::fwd && output == Role::y && !g->affine) return "groups of one element without affine: y = x - mean";
  return {};
}

std::string dtype_label(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return std::string(name(c->src)) + ":" + std::string(name(c->dst));
  const auto& g = std::get<GroupNormProblem>(p);
  return std::string(name(g.src)) + ":" + std::string(name(g.dst));
}

RunError environment_error(const std::string& cause) {
  return RunError(std::string("this machine cannot run the ") + kernels::backend_name() + " kernels: " + cause +
                  " (an error of the environment, not a verdict on the kernel)");
}

std::optional<Fill> combine_probe(const Problem& p, const kernels::Plan& plan, std::uint64_t seed) {
  const auto* c = std::get_if<ConvProblem>(&p);
  if (!c) return std::nullopt;
  const std::string out(name(ref::detail::dir_plan(*c).out));
  const auto main = plan.reduction.find(out);
  const auto db = plan.reduction.find("db");
  const auto published = [&](auto it) { return it != plan.reduction.end() && it->second.splits > 1 && it->second.split_run > 0; };
  if (!published(main) && !published(db)) return std::nullopt;
  Fill f = parse_fill("combine", seed);
  // An unsplit reduction: one run of every term (its sequential length).
  f.run = static_cast<double>(published(main) ? main->second.split_run : main->second.length);
  if (db != plan.reduction.end()) f.db_run = static_cast<double>(published(db) ? db->second.split_run : db->second.length);
  return f;
}

std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed, const kernels::Plan* plan) {
  if (std::holds_alternative<ConvProblem>(p)) {
    std::vector<Fill> fills{lattice_fill(p, seed), parse_fill("signed", seed)};
    if (plan)
      if (const auto probe = combine_probe(p, *plan, seed)) fills.push_back(*probe);
    return fills;
  }
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

std::string describe(RefSite where) {
  return where == RefSite::host ? "host fast" : std::string("device ") + kernels::backend_name();
}

std::optional<RefSite> resolve_reference(const std::string& flag, bool full) {
  if (flag == "host") return RefSite::host;
  if (flag == "device") return RefSite::device;
  if (flag == "auto") return full && std::string(kernels::backend_name()) != "host" ? RefSite::device : RefSite::host;
  return std::nullopt;
}

References references(const Problem& p, const std::map<Role, Tensor>& in, RefSite where) {
  const ref::Inputs rin = ref::refs(in);
  References r;
  if (where == RefSite::device) {
    ref::device::Result d = ref::device::run(p, rin);
    r.want = std::move(d.want);
    r.abs = std::move(d.abs);
    r.companion = std::move(d.companion);
    return r;
  }
  r.want = ref::run_reference(p, rin, ref::Impl::fast);
  if (std::holds_alternative<ConvProblem>(p)) r.abs = ref::abs_companion(p, rin);
  else r.companion = ref::groupnorm_companion(std::get<GroupNormProblem>(p), rin);
  return r;
}

namespace {

const ReductionPlan& reduction_of(const kernels::Plan& plan, Role r) {
  auto it = plan.reduction.find(std::string(name(r)));
  if (it == plan.reduction.end()) throw std::logic_error("plan declares no reduction for " + std::string(name(r)));
  return it->second;
}

oracle::GroupNormInputs groupnorm_inputs(const GroupNormProblem& g, const std::map<Role, Tensor>& in,
                                         const References& refs) {
  oracle::GroupNormInputs gi;
  gi.x = &in.at(Role::x);
  if (g.affine) {
    gi.gamma = &in.at(Role::gamma);
    gi.beta = &in.at(Role::beta);
  }
  if (g.dir == GnDir::fwd) {
    gi.mean = &refs.companion.mean;
    gi.rstd = &refs.companion.rstd;
    gi.var = &refs.companion.var;
  } else {
    gi.dy = &in.at(Role::dy);
    gi.mean = &in.at(Role::mean);
    gi.rstd = &in.at(Role::rstd);
  }
  return gi;
}

}  // namespace

void check_range(const Problem& p, const kernels::Plan& plan, const Fill& fill, const std::map<Role, Tensor>& in,
                 const References& refs) {
  std::string why;
  for (const auto& s : inputs(p))
    if (why.empty() && !s.derived) why = oracle::nonfinite_input(s.role, in.at(s.role));
  if (why.empty()) {
    if (std::holds_alternative<ConvProblem>(p)) {
      for (const auto& s : outputs(p))
        if (why.empty()) why = oracle::conv_range(s.role, refs.abs.at(s.role), reduction_of(plan, s.role));
    } else {
      const auto& g = std::get<GroupNormProblem>(p);
      const Role r = g.dir == GnDir::fwd ? Role::y : Role::dx;
      why = oracle::groupnorm_range(g, groupnorm_inputs(g, in, refs), reduction_of(plan, r));
    }
  }
  if (!why.empty())
    throw InputError("--fill", fill_string(fill) + " seed " + std::to_string(fill.seed) + " on '" + to_descriptor(p) +
                                   "': " + why + "; no kernel was run");
}

std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const References& refs,
                              const std::map<Role, Tensor>& got) {
  std::vector<RoleResult> out;
  if (fill.kind == FillKind::combine) return judge_combine(p, plan, fill, in, got);
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    const Tensor* bias = c->bias && c->dir == ConvDir::fwd ? &in.at(Role::b) : nullptr;
    for (const auto& s : outputs(p))
      out.push_back({std::string(name(s.role)),
                     oracle::compare_conv(*c, s.role, refs.want.at(s.role), refs.abs.at(s.role), got.at(s.role),
                                          reduction_of(plan, s.role), fill, bias)});
    return out;
  }
  const auto& g = std::get<GroupNormProblem>(p);
  const oracle::GroupNormInputs gi = groupnorm_inputs(g, in, refs);
  for (const auto& s : outputs(p))
    out.push_back({std::string(name(s.role)), oracle::compare_groupnorm(g, s.role, refs.want.at(s.role), got.at(s.role),
                                                                        gi, reduction_of(plan, s.role), fill)});
  return out;
}

std::vector<RoleResult> judge_combine(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                                     const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got) {
  const auto* c = std::get_if<ConvProblem>(&p);
  if (!c) throw InputError("fill", "combine probes a convolution's split; " + op_dir_name(p) + " has none");
  std::vector<RoleResult> out;
  const auto ptrs = kernels::pointers(in);
  for (const auto& s : outputs(p)) {
    const ReductionPlan& red = reduction_of(plan, s.role);
    if (red.splits > 1 && red.split_run < 1)
      throw InputError("fill", "combine needs a plan that publishes its slice map (reduction.split_run); " +
                                   std::string(name(s.role)) + "'s is split " + std::to_string(red.splits) + " ways without one");
    const ref::Replay rp = ref::combine_replay(*c, s.role, red, ptrs);
    out.push_back({std::string(name(s.role)), oracle::compare_replay(*c, s.role, rp, got.at(s.role), red, fill)});
  }
  return out;
}

std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got,
                              const std::function<void(const char*)>& phase) {
  if (fill.kind == FillKind::combine) {
    phase("oracle");
    return judge_combine(p, plan, fill, in, got);
  }
  phase("reference");
  const References refs = references(p, in);
  phase("oracle");
  return judge(p, plan, fill, in, refs, got);
}

namespace {

std::string out_of_memory(const Problem& p, const std::string& descriptor, const std::string& cause = "out of memory") {
  return descriptor + ": " + cause + " (estimated footprint " +
         std::to_string(static_cast<std::int64_t>(footprint_bytes(p)) >> 20) + " MiB; " +
         std::to_string(static_cast<std::int64_t>(available_memory()) >> 20) +
         " MiB of host memory available); an error of the run, not a verdict on the kernel";
}

}  // namespace

Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats, const PhaseFn& phase, Runner* runner,
                RefSite where) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  r.reference = describe(where);
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
  if (runner) r.repro_flags = runner->repro_flags();
  if (where == RefSite::device) r.repro_flags += " --reference device";
  const kernels::Support sup = runner ? runner->is_supported(p) : kernels::is_supported(p);
  if (!sup) {
    const auto ops = kernels::implemented_ops();
    r.state = !runner && std::find(ops.begin(), ops.end(), r.op) == ops.end() ? State::unimplemented : State::skipped;
    r.reason = sup.reason;
    return r;
  }
  const kernels::Plan plan = runner ? runner->plan(p) : kernels::plan(p);
  r.plan = kernels::to_string(plan);
  std::set<std::string> proven;  // outputs some fill verified
  // The determinism reruns run on every fill whose sums depend on their
  // order. An exact fill (lattice, gn_exact) gives the same bits in every
  // order, so its rerun can see only what a rerun of the order-dependent
  // fill sees too: a read of memory the kernel did not write (the NaN
  // prefill), a race on a value; the launches and addresses are the plan's,
  // the same for every fill. Without an order-dependent fill (a `check
  // --fill lattice`) the exact fills rerun.
  const bool order_dependent_fill = std::any_of(fills.begin(), fills.end(), [&](const Fill& f) {
    return !exact_in_any_order(f) && f.kind != FillKind::combine;
  });
  for (const Fill& f : fills) {
    FillResult fr;
    fr.fill = f;
    const std::string which = " (fill " + fill_string(f) + " seed " + std::to_string(f.seed) + ")";
    auto lap = std::chrono::steady_clock::now();
    std::string current;  // the phase running since `lap`
    auto close_phase = [&] {
      const auto now = std::chrono::steady_clock::now();
      if (!current.empty()) fr.phase_seconds[current] += std::chrono::duration<double>(now - lap).count();
      lap = now;
    };
    auto enter = [&](const char* what) {
      close_phase();
      current = what;
      if (phase) phase(what + which);
    };
    try {
      enter("inputs");
      const auto in = ref::make_inputs(p, f);
      // The combine probe's reference is its replay (judge_combine), which
      // needs no fp64 reference and no range check: its values are chosen.
      References refs;
      if (f.kind != FillKind::combine) {
        enter("reference");
        refs = references(p, in, where);
        check_range(p, plan, f, in, refs);
      }
      enter("kernel");
      const auto got = runner ? runner->run(p, plan, in, 0) : kernels::run(p, plan, kernels::pointers(in));
      fr.digest = digests_of(got);
      // The reruns (above); never on the combine probe, whose inputs add
      // nothing to what the other fills' reruns see of the kernel's order.
      const int reruns = f.kind == FillKind::combine || (exact_in_any_order(f) && order_dependent_fill) ? 0 : repeats;
      if (reruns > 0) enter("rerun");
      for (int k = 0; k < reruns; ++k) {
        kernels::RunOptions nan;
        nan.prefill_nan = true;  // what memory held must not matter either
        const std::string again =
            digests_of(runner ? runner->run(p, plan, in, k + 1) : kernels::run(p, plan, kernels::pointers(in), nan));
        if (again != fr.digest) {
          fr.state = State::failed;
          fr.detail = "nondeterministic: rerun " + std::to_string(k + 1) + " gave " + again + "vs " + fr.digest;
          break;
        }
      }
      enter("oracle");
      fr.roles = judge(p, plan, f, in, refs, got);
      add_verdicts(fr, proven);
    } catch (const InputError&) {
      throw;
    } catch (const RunError&) {
      throw;
    } catch (const rt::Unavailable& e) {
      throw environment_error(e.what());
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
    close_phase();  // the last phase, also of a fill the kernel failed
    r.state = worse(r.state, fr.state);
    r.worst_margin = std::max(r.worst_margin, fr.worst_margin);
    r.fills.push_back(std::move(fr));
  }
  conclude(p, r, proven);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void add_verdicts(FillResult& fr, std::set<std::string>& proven) {
  for (const auto& rr : fr.roles) {
    fr.state = worse(fr.state, verdict(rr.report));
    if (proves(rr.report)) proven.insert(rr.role);
    else if (rr.report.trust.proves_nothing && verdict(rr.report) == State::passed)
      fr.detail += (fr.detail.empty() ? "" : "; ") + rr.role + ": not verified by this fill (" +
                   rr.report.trust.reason + ")";
    fr.worst_margin = std::max(fr.worst_margin, rr.report.tier2.max_margin);
  }
}

void conclude(const Problem& p, Result& r, const std::set<std::string>& proven) {
  // A problem is verified only where every output was: an output that every
  // fill left unproven (all zeros, or clamped, whatever the kernel returns)
  // is untrusted, never passed.
  if (r.state == State::passed) {
    std::string unproven;
    for (const auto& s : outputs(p)) {
      if (proven.count(std::string(name(s.role)))) continue;
      if (const std::string why = identically_zero(p, s.role); !why.empty()) {
        r.reason += (r.reason.empty() ? "" : "; ") + std::string(name(s.role)) + " is zero for every input (" + why +
                    "): checked to be zero, which is all there is to verify";
        continue;
      }
      unproven += (unproven.empty() ? "" : ", ") + std::string(name(s.role));
    }
    if (!unproven.empty()) {
      r.state = State::untrusted;
      r.reason = unproven + ": no fill verified " + (unproven.find(',') == std::string::npos ? "it" : "them") +
                 " (under every fill the comparison proves nothing: see the trust lines)";
    }
  }
}

kernels::Plan model_plan(const Problem& p, const oracle::Model& m) {
  kernels::Plan pl;
  pl.op = op_dir_name(p);
  pl.variant = "model:" + m.name();
  pl.reduction = oracle::model_reductions(p, m);
  return pl;
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

std::string command_prefix(const std::string& host_target) {
  std::string env;
  if (!host_target.empty()) env = "KGATE_HOST_TARGET=" + host_target + " ";
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("KGATE_", 0) != 0 || kv.find('=') == std::string::npos) continue;
    const std::string key = kv.substr(0, kv.find('='));
    if (!host_target.empty() && (key == "KGATE_HOST_TARGET" || key == "KGATE_HOST_WAVE" || key == "KGATE_MFMA_MODEL"))
      continue;
    const std::string value = kv.substr(kv.find('=') + 1);
    const bool plain = value.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/+=") == std::string::npos;
    env += kv.substr(0, kv.find('=') + 1) + (plain && !value.empty() ? value : "'" + value + "'") + " ";
  }
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return env + "kgate";
  // kgate_mpi has no `check`: its repro lines name the kgate beside it
  // (installed and built alike).
  if (self.filename() == "kgate_mpi") self.replace_filename("kgate");
  return env + self.string();
}

std::string Result::repro() const {
  if (!repro_line.empty()) return repro_line;
  const FillResult* worst = nullptr;
  for (const auto& f : fills)
    if (!worst || (is_failure(f.state) && !is_failure(worst->state)) ||
        (is_failure(f.state) == is_failure(worst->state) && f.worst_margin > worst->worst_margin))
      worst = &f;
  std::string s = command_prefix(target) + " check '" + descriptor + "'";
  if (worst) s += " --fill " + fill_string(worst->fill) + " --seed " + std::to_string(worst->fill.seed);
  s += repro_flags;
  return s;
}

nlohmann::json Result::to_json() const {
  nlohmann::json fj = nlohmann::json::array();
  for (const auto& f : fills) {
    nlohmann::json roles = nlohmann::json::object();
    for (const auto& rr : f.roles) roles[rr.role] = oracle::to_json(rr.report);
    fj.push_back({{"fill", kgate::to_json(f.fill)}, {"state", oracle::name(f.state)}, {"detail", f.detail},
                  {"digest", f.digest}, {"worst_margin", f.worst_margin}, {"outputs", roles},
                  {"phase_seconds", f.phase_seconds}});
  }
  return {{"descriptor", descriptor}, {"op", op},         {"dtype", dtype},   {"state", oracle::name(state)},
          {"reason", reason},         {"plan", plan},     {"fills", fj},      {"worst_margin", worst_margin},
          {"seconds", seconds},       {"reference", reference}, {"target", target},
          {"repro", repro()}};
}

}  // namespace kgate::gate
