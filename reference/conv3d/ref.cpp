#include "reference/conv3d/ref.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace kgate::ref {

Outputs run_reference(const Problem& p, const Inputs& in, Impl impl) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return conv(*c, in, impl);
  return groupnorm(std::get<GroupNormProblem>(p), in, impl);
}

Outputs run_reference_mpfr_rounded(const Problem& p, const Inputs& in, DType t) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return conv_mpfr_rounded(*c, in, t);
  return groupnorm_mpfr_rounded(std::get<GroupNormProblem>(p), in, t);
}

Outputs abs_companion(const Problem& p, const Inputs& in) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return conv_abs(*c, in, Impl::fast);
  return groupnorm_companion(std::get<GroupNormProblem>(p), in).abs;
}

Outputs derived_inputs(const Problem& p, const Inputs& in, Impl impl) {
  const auto* g = std::get_if<GroupNormProblem>(&p);
  if (!g || g->dir != GnDir::bwd) return {};
  return groupnorm_derived_inputs(*g, in, impl);
}

Outputs make_inputs(const Problem& p, const Fill& fill) {
  Outputs in;
  for (const auto& s : inputs(p))
    if (!s.derived) {
      Tensor t(s.dtype, s.dims);
      fill_tensor(fill, p, s.role, t);
      in.emplace(s.role, std::move(t));
    }
  for (auto& [r, t] : derived_inputs(p, refs(in))) in.emplace(r, std::move(t));
  return in;
}

void run_reference_files(const Problem& p, const std::string& inputs_dir, Impl impl, const std::string& out_dir) {
  namespace fs = std::filesystem;
  validate(p);
  Outputs loaded;
  bool missing_derived = false;
  for (const auto& s : inputs(p)) {
    const fs::path path = fs::path(inputs_dir) / (std::string(kgate::name(s.role)) + ".npy");
    if (s.derived && !fs::exists(path)) {
      missing_derived = true;
      continue;
    }
    if (!fs::exists(path)) throw InputError(path.string(), "missing input file for role '" + std::string(kgate::name(s.role)) + "'");
    Tensor t = read_npy(path.string(), s.dtype);
    if (t.dims() != s.dims)
      throw InputError(path.string(), "shape " + dims_string(t.dims()) + ", expected " + dims_string(s.dims));
    loaded.emplace(s.role, std::move(t));
  }
  if (missing_derived) {
    Outputs d = derived_inputs(p, refs(loaded), impl == Impl::mpfr ? Impl::mpfr : Impl::fast);
    for (auto& [role, t] : d) loaded.emplace(role, std::move(t));
  }
  const Outputs out = run_reference(p, refs(loaded), impl);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw InputError(out_dir, "cannot create output folder: " + ec.message());
  nlohmann::json digests = nlohmann::json::object();
  for (const auto& [role, t] : out) {
    const std::string r(kgate::name(role));
    write_npy((fs::path(out_dir) / (r + ".npy")).string(), t.view());
    digests[r] = digest(t);
  }
  const nlohmann::json doc{{"problem", to_descriptor(p)}, {"impl", std::string(name(impl))}, {"dtype", "fp64"},
                           {"outputs", digests}};
  write_file_atomic((fs::path(out_dir) / "digests.json").string(), doc.dump(2) + "\n");
}

}  // namespace kgate::ref
