#include "reference/fill.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/conv3d/combine.hpp"
#include "reference/parallel.hpp"

namespace kgate {

std::string_view name(FillKind k) {
  switch (k) {
    case FillKind::uniform: return "uniform";
    case FillKind::signed_: return "signed";
    case FillKind::positive: return "positive";
    case FillKind::lattice: return "lattice";
    case FillKind::gn_exact: return "gn_exact";
    case FillKind::gn_sweep: return "gn_sweep";
    case FillKind::combine: return "combine";
  }
  return "?";
}

namespace {

constexpr std::array kKinds{FillKind::uniform, FillKind::signed_, FillKind::positive,
                            FillKind::lattice, FillKind::gn_exact, FillKind::gn_sweep, FillKind::combine};

// splitmix64's finaliser: a bijection with full avalanche.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// fp32 in [0, 1) with 24 random bits: exact.
float unit24(std::uint64_t h) { return static_cast<float>(h >> 40) * 0x1p-24f; }

// Integer in [-r, r].
std::int64_t int_in(std::uint64_t h, std::int64_t r) {
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(2 * r + 1)) - r;
}

// The names of the parameters each kind takes, in print order.
std::vector<std::string> params_of(FillKind k) {
  switch (k) {
    case FillKind::uniform: return {"lo", "hi"};
    case FillKind::signed_:
    case FillKind::positive: return {"scale"};
    case FillKind::lattice: return {"density"};
    case FillKind::gn_exact: return {"mean", "constant", "unit"};
    case FillKind::gn_sweep: return {"mean", "sigma"};
    case FillKind::combine: return {"run", "db_run"};
  }
  return {};
}

double& param_ref(Fill& f, const std::string& p) {
  if (p == "lo") return f.lo;
  if (p == "hi") return f.hi;
  if (p == "scale") return f.scale;
  if (p == "density") return f.density;
  if (p == "mean") return f.mean;
  if (p == "run") return f.run;
  if (p == "db_run") return f.db_run;
  return f.sigma;  // "sigma"
}

double param_value(const Fill& f, const std::string& p) {
  if (p == "constant") return f.constant ? 1.0 : 0.0;
  if (p == "unit") return f.unit ? 1.0 : 0.0;
  return param_ref(const_cast<Fill&>(f), p);
}

void set_param(Fill& f, const std::string& p, double v, const std::string& field) {
  if (p == "constant" || p == "unit") {
    if (v != 0.0 && v != 1.0) throw InputError(field, p + " must be 0 or 1");
    (p == "constant" ? f.constant : f.unit) = v != 0.0;
    return;
  }
  if (!std::isfinite(v)) throw InputError(field, "must be finite");
  param_ref(f, p) = v;
}

void check_fill(const Fill& f, const std::string& where) {
  switch (f.kind) {
    case FillKind::uniform:
      if (!(f.lo < f.hi)) throw InputError(where + ".lo", "must be less than hi");
      break;
    case FillKind::signed_:
    case FillKind::positive:
      if (!(f.scale > 0)) throw InputError(where + ".scale", "must be > 0");
      break;
    case FillKind::lattice:
      if (!(f.density > 0 && f.density <= 1)) throw InputError(where + ".density", "must be in (0, 1]");
      break;
    case FillKind::gn_exact:
      if (std::fabs(f.mean) > 0x1p20 || f.mean != std::rint(f.mean))
        throw InputError(where + ".mean", "must be an integer of magnitude <= 2^20");
      if (f.constant && f.unit) throw InputError(where + ".unit", "constant groups have no deltas (unit needs constant=0)");
      break;
    case FillKind::gn_sweep:
      if (!(f.sigma > 0)) throw InputError(where + ".sigma", "must be > 0");
      break;
    case FillKind::combine:
      if (!(f.run >= 1 && f.run <= 0x1p53 && f.run == std::rint(f.run)))
        throw InputError(where + ".run", "must be an integer >= 1");
      if (!(f.db_run >= 0 && f.db_run <= 0x1p53 && f.db_run == std::rint(f.db_run)))
        throw InputError(where + ".db_run", "must be an integer >= 0");
      break;
  }
}

Fill defaults(FillKind k, std::uint64_t seed) {
  Fill f;
  f.kind = k;
  f.seed = seed;
  if (k == FillKind::positive || k == FillKind::uniform) f.lo = k == FillKind::positive ? 0.0 : -1.0;
  return f;
}

}  // namespace

std::uint64_t counter_hash(std::uint64_t seed, Role role, std::int64_t index) {
  std::uint64_t h = mix(seed);
  h = mix(h ^ (static_cast<std::uint64_t>(role) + 1) * 0xd6e8feb86659fd93ull);
  return mix(h ^ static_cast<std::uint64_t>(index));
}

Fill parse_fill(std::string_view text, std::uint64_t seed) {
  const std::string s(text);
  const auto colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  Fill f;
  bool found = false;
  for (FillKind k : kKinds)
    if (name(k) == kind) { f = defaults(k, seed); found = true; }
  if (!found)
    throw InputError("fill", "unknown generator '" + kind + "' (uniform, signed, positive, lattice, gn_exact, gn_sweep, combine)");
  std::vector<std::string> given;
  if (colon != std::string::npos) {
    std::stringstream ss(s.substr(colon + 1));
    for (std::string kv; std::getline(ss, kv, ',');) {
      const auto eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      if (std::find(given.begin(), given.end(), key) != given.end())
        throw InputError("fill." + key, "given twice in '" + s + "'");
      given.push_back(key);
      const auto allowed = params_of(f.kind);
      if (eq == std::string::npos || std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        throw InputError("fill", "'" + kv + "' is not a parameter of " + kind);
      const auto v = parse_double(std::string_view(kv).substr(eq + 1));
      if (!v) throw InputError("fill." + key, "expected a decimal number, got '" + kv.substr(eq + 1) + "'");
      set_param(f, key, *v, "fill." + key);
    }
  }
  // A range is given whole or not at all: one end alone would silently pair
  // with the other's default.
  if (f.kind == FillKind::uniform) {
    const bool lo = std::find(given.begin(), given.end(), "lo") != given.end();
    const bool hi = std::find(given.begin(), given.end(), "hi") != given.end();
    if (lo != hi) throw InputError(std::string("fill.") + (lo ? "hi" : "lo"), "missing: uniform takes lo and hi together");
  }
  check_fill(f, "fill");
  return f;
}

std::string fill_string(const Fill& f) {
  std::string s(name(f.kind));
  const Fill d = defaults(f.kind, f.seed);
  std::string params;
  // uniform's range prints whole when either end differs (parse_fill
  // refuses one end alone).
  const bool range = f.kind == FillKind::uniform &&
                     (param_value(f, "lo") != param_value(d, "lo") || param_value(f, "hi") != param_value(d, "hi"));
  for (const auto& p : params_of(f.kind))
    if (param_value(f, p) != param_value(d, p) || (range && (p == "lo" || p == "hi")))
      params += (params.empty() ? "" : ",") + p + "=" + format_double(param_value(f, p));
  return params.empty() ? s : s + ":" + params;
}

nlohmann::json to_json(const Fill& f) {
  nlohmann::json j{{"kind", name(f.kind)}, {"seed", f.seed}};
  for (const auto& p : params_of(f.kind)) j[p] = param_value(f, p);
  return j;
}

Fill fill_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(where, "expected a JSON object");
  if (!j.contains("kind") || !j["kind"].is_string()) throw InputError(where + ".kind", "missing or not a string");
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) throw InputError(where + ".seed", "missing or not an unsigned integer");
  Fill f;
  try {
    f = parse_fill(j["kind"].get<std::string>(), j["seed"].get<std::uint64_t>());
  } catch (const InputError& e) {
    throw InputError(where + ".kind", e.message());
  }
  const auto allowed = params_of(f.kind);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "kind" || it.key() == "seed") continue;
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
      throw InputError(where + "." + it.key(), "unknown field");
    if (!it->is_number()) throw InputError(where + "." + it.key(), "expected a number");
    set_param(f, it.key(), it->get<double>(), where + "." + it.key());
  }
  check_fill(f, where);
  return f;
}

std::int64_t lattice_max(Role r) {
  switch (r) {
    case Role::x:
    case Role::dy:
    case Role::b: return 4;
    default: return 2;
  }
}

Role sparse_role(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return c->dir == ConvDir::bwd_weight ? Role::dy : Role::w;
  return Role::x;
}

bool exact_in_any_order(const Fill& f) { return f.kind == FillKind::lattice || f.kind == FillKind::gn_exact; }

Fill lattice_fill(const Problem& p, std::uint64_t seed) {
  Fill f = defaults(FillKind::lattice, seed);
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    const auto in = c->inputs();
    const double max_ab = static_cast<double>(lattice_max(in[0].role) * lattice_max(in[1].role));
    const int digits = std::min(significand_bits(c->dst), significand_bits(c->acc));
    const double safe = std::ldexp(1.0, digits) / max_ab;
    f.density = std::min(1.0, safe / static_cast<double>(c->reduction_length()));
  }
  return f;
}

void fill_tensor(const Fill& f, const Problem& p, Role role, Tensor& t) {
  const auto specs = inputs(p);
  const TensorSpec* spec = nullptr;
  for (const auto& s : specs)
    if (s.role == role) spec = &s;
  if (!spec) throw std::logic_error("fill_tensor: " + std::string(name(role)) + " is not an input of " + op_dir_name(p));
  if (spec->derived) throw std::logic_error("fill_tensor: " + std::string(name(role)) + " is derived, not generated");
  if (t.dtype() != spec->dtype || t.dims() != spec->dims) throw std::logic_error("fill_tensor: tensor does not match its spec");

  const std::int64_t numel = t.numel();
  const std::uint64_t seed = f.seed;
  // Every element is a function of (seed, role, index) alone: the loops run
  // on the element threads (reference/parallel.hpp) with the same values.
  auto uniform = [&](float lo, float hi) {
    for_each_element(numel, [&](std::int64_t i) { t.set(i, lo + (hi - lo) * unit24(counter_hash(seed, role, i))); });
  };
  switch (f.kind) {
    case FillKind::uniform: return uniform(static_cast<float>(f.lo), static_cast<float>(f.hi));
    case FillKind::signed_: return uniform(static_cast<float>(-f.scale), static_cast<float>(f.scale));
    case FillKind::positive: return uniform(0.0f, static_cast<float>(f.scale));
    case FillKind::lattice: {
      const std::int64_t r = lattice_max(role);
      const bool sparse = role == sparse_role(p) && std::holds_alternative<ConvProblem>(p);
      for_each_element(numel, [&](std::int64_t i) {
        const std::uint64_t h = counter_hash(seed, role, i);
        if (sparse) {
          const bool on = static_cast<double>(h & 0xffffff) * 0x1p-24 < f.density;
          const std::int64_t mag = 1 + static_cast<std::int64_t>((h >> 24) % static_cast<std::uint64_t>(r));
          t.set(i, on ? static_cast<double>((h >> 40) & 1 ? -mag : mag) : 0.0);
        } else {
          t.set(i, static_cast<double>(int_in(h, r)));
        }
      });
      return;
    }
    case FillKind::combine: {
      const auto* c = std::get_if<ConvProblem>(&p);
      if (!c) throw InputError("fill", "combine probes a convolution's split; " + op_dir_name(p) + " has none");
      return ref::fill_combine_probe(*c, role, f, t);
    }
    case FillKind::gn_exact:
    case FillKind::gn_sweep: {
      const auto* gn = std::get_if<GroupNormProblem>(&p);
      if (!gn || role != Role::x) {
        // Secondary roles: small integers (gamma nonzero so every channel matters).
        for_each_element(numel, [&](std::int64_t i) {
          const std::uint64_t h = counter_hash(seed, role, i);
          double v = static_cast<double>(int_in(h, 2));
          if (role == Role::gamma && v == 0) v = 1;
          t.set(i, v);
        });
        return;
      }
      if (f.kind == FillKind::gn_sweep) {
        const float mean = static_cast<float>(f.mean), sigma = static_cast<float>(f.sigma);
        for_each_element(numel, [&](std::int64_t i) { t.set(i, mean + sigma * (2.0f * unit24(counter_hash(seed, role, i)) - 1.0f)); });
        return;
      }
      // gn_exact: q is a power of two at least the dtype's spacing anywhere
      // in [0, |mean| + 12q], so every m +- delta is representable.
      const int p_bits = significand_bits(t.dtype());
      const int e = std::ilogb(std::fabs(f.mean) + 12.0);
      const double q = std::max(1.0, std::ldexp(1.0, e + 2 - p_bits));
      const std::int64_t C = gn->c, G = gn->groups, Cg = C / G;
      const std::int64_t S = gn->spatial[0] * gn->spatial[1] * gn->spatial[2];
      const std::int64_t M = gn->group_size();
      for_each_element(numel, [&](std::int64_t i) {
        const std::int64_t c = i % C;
        const std::int64_t s = (i / C) % S;
        const std::int64_t n = i / (C * S);
        const std::int64_t g = c / Cg;
        const std::int64_t ng = n * G + g;
        const std::int64_t tpos = s * Cg + (c - g * Cg);  // position in the group's NDHWC order
        const double m = std::rint(f.mean / q) * q + static_cast<double>(int_in(counter_hash(seed, Role::mean, ng), 8)) * q;
        double delta = 0;
        if (!f.constant && !(M % 2 == 1 && tpos == M - 1)) {
          const std::uint64_t h = counter_hash(seed, Role::x, ng * (M / 2 + 1) + tpos / 2);
          delta = f.unit ? ((h >> 8) & 1 ? q : -q) : static_cast<double>(1 + h % 4) * q;
        }
        t.set(i, tpos % 2 == 0 ? m + delta : m - delta);
      });
      return;
    }
  }
}

}  // namespace kgate
