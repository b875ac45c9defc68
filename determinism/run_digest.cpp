#include "determinism/run_digest.hpp"

#include "reference/digest.hpp"

namespace kgate::determinism {

std::map<Role, Tensor> make_inputs(const Problem& p, const Fill& fill) {
  std::map<Role, Tensor> in;
  for (const auto& s : inputs(p)) {
    Tensor t(s.dtype, s.dims);
    if (!s.derived) fill_tensor(fill, p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  if (const auto* g = std::get_if<GroupNormProblem>(&p); g && g->dir == GnDir::bwd) {
    GroupNormProblem f = *g;
    f.dir = GnDir::fwd;
    std::map<Role, const Tensor*> fin{{Role::x, &in.at(Role::x)}};
    if (f.affine) {
      fin[Role::gamma] = &in.at(Role::gamma);
      fin[Role::beta] = &in.at(Role::beta);
    }
    auto out = kernels::run(f, kernels::plan(f), fin);
    in.at(Role::mean) = std::move(out.at(Role::mean));
    in.at(Role::rstd) = std::move(out.at(Role::rstd));
  }
  return in;
}

std::map<std::string, std::string> run_digests(const Problem& p, const Fill& fill, const kernels::RunOptions& opt) {
  const auto in = make_inputs(p, fill);
  std::map<Role, const Tensor*> ptr;
  for (const auto& [r, t] : in) ptr[r] = &t;
  std::map<std::string, std::string> d;
  for (const auto& [r, t] : kernels::run(p, kernels::plan(p), ptr, opt)) d[std::string(name(r))] = digest(t);
  return d;
}

}  // namespace kgate::determinism
