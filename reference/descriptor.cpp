#include "reference/descriptor.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>
#include <vector>

#include "reference/error.hpp"

namespace kgate {

std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

namespace {

[[noreturn]] void bad(const std::string& token, const std::string& why) {
  throw InputError("descriptor", "token '" + token + "': " + why);
}

std::int64_t parse_int(const std::string& token, std::string_view s) {
  std::int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (!s.empty() && r.ec == std::errc::result_out_of_range && r.ptr == s.data() + s.size())
    bad(token, "integer out of range (beyond 64 bits)");
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) bad(token, "expected an integer");
  return v;
}

double parse_real(const std::string& token, std::string_view s) {
  const auto v = parse_double(s);
  if (!v) bad(token, "expected a number");
  return *v;
}

std::pair<std::int64_t, std::int64_t> parse_pad(const std::string& token, std::string_view s) {
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) {
    const std::int64_t v = parse_int(token, s);
    return {v, v};
  }
  return {parse_int(token, s.substr(0, colon)), parse_int(token, s.substr(colon + 1))};
}

struct Token {
  std::string text, key, value;
  bool has_equals = false;
};

Token split(const std::string& t) {
  Token tok{t, "", "", false};
  const auto eq = t.find('=');
  if (eq != std::string::npos) {
    tok.key = t.substr(0, eq);
    tok.value = t.substr(eq + 1);
    tok.has_equals = true;
    return tok;
  }
  std::size_t i = 0;
  while (i < t.size() && std::islower(static_cast<unsigned char>(t[i]))) ++i;
  tok.key = t.substr(0, i);
  tok.value = t.substr(i);
  return tok;
}

// A spatial triple whose per-axis keys may be absent. For the extents (d h w,
// kd kh kw) the d-axis key is also the default of h and w. Every other triple
// (stride, dilation, padding, output padding) has an all-axes key of its own
// (s, dil, op) that fills the three slots, so its d-axis key sets D only.
struct Triple {
  std::array<std::optional<std::int64_t>, 3> v;
  bool d_defaults_hw = false;
  Axis3 resolve(Axis3 dflt) const {
    Axis3 r = dflt;
    if (d_defaults_hw && v[0]) r = {*v[0], *v[0], *v[0]};
    for (int a = 0; a < 3; ++a)
      if (v[a]) r[a] = *v[a];
    return r;
  }
};

int axis_of(char c) { return c == 'd' ? 0 : c == 'h' ? 1 : c == 'w' ? 2 : -1; }

// Slot of a checked axis (axis_of(c) >= 0).
template <class T>
T& slot(std::array<T, 3>& a, char c) { return a.at(static_cast<std::size_t>(axis_of(c))); }

void set_once(std::optional<std::int64_t>& slot, std::int64_t v, const std::string& token) {
  if (slot) bad(token, "given twice");
  slot = v;
}

void parse_dtypes(const std::string& token, DType& src, DType& dst, DType* acc, bool dst_follows_src) {
  std::vector<std::string> parts;
  std::stringstream ss(token);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  if (parts.empty() || parts.size() > (acc ? 3u : 2u)) bad(token, "expected dtypes as src[:dst" + std::string(acc ? "[:acc]]" : "]"));
  auto get = [&](const std::string& s) {
    auto t = parse_dtype(s);
    if (!t) bad(token, "unknown dtype '" + s + "' (fp64, fp32, bf16, fp16)");
    return *t;
  };
  src = get(parts[0]);
  if (parts.size() >= 2) dst = get(parts[1]);
  else if (dst_follows_src) dst = src;
  if (acc && parts.size() == 3) *acc = get(parts[2]);
}

ConvProblem parse_conv(ConvOp op, ConvDir dir, const std::vector<std::string>& tokens) {
  ConvProblem p;
  p.op = op;
  p.dir = dir;
  parse_dtypes(tokens[1], p.src, p.dst, &p.acc, true);
  std::optional<std::int64_t> n, c, k, g;
  Triple in{{}, true}, kern{{}, true}, stride, dil, opad;
  std::array<std::optional<std::int64_t>, 3> pf, pb;
  std::optional<std::string> form, halo;
  bool bias = false;
  for (std::size_t i = 2; i < tokens.size(); ++i) {
    const Token t = split(tokens[i]);
    const std::string& key = t.key;
    if (t.has_equals) {
      if (key == "form") { if (form) bad(t.text, "given twice"); form = t.value; }
      else if (key == "halo") { if (halo) bad(t.text, "given twice"); halo = t.value; }
      else bad(t.text, "unknown field '" + key + "'");
      continue;
    }
    if (t.value.empty()) {
      if (key == "bias") { if (bias) bad(t.text, "given twice"); bias = true; }
      else bad(t.text, "unknown flag (or a key without a value)");
      continue;
    }
    if (key == "n") set_once(n, parse_int(t.text, t.value), t.text);
    else if (key == "c") set_once(c, parse_int(t.text, t.value), t.text);
    else if (key == "k") set_once(k, parse_int(t.text, t.value), t.text);
    else if (key == "g") set_once(g, parse_int(t.text, t.value), t.text);
    else if (key.size() == 1 && axis_of(key[0]) >= 0) set_once(slot(in.v, key[0]), parse_int(t.text, t.value), t.text);
    else if (key.size() == 2 && key[0] == 'k' && axis_of(key[1]) >= 0) set_once(slot(kern.v, key[1]), parse_int(t.text, t.value), t.text);
    else if (key == "s") { const auto v = parse_int(t.text, t.value); for (auto& s : stride.v) set_once(s, v, t.text); }
    else if (key.size() == 2 && key[0] == 's' && axis_of(key[1]) >= 0) set_once(slot(stride.v, key[1]), parse_int(t.text, t.value), t.text);
    else if (key == "dil") { const auto v = parse_int(t.text, t.value); for (auto& s : dil.v) set_once(s, v, t.text); }
    else if (key.size() == 4 && key.rfind("dil", 0) == 0 && axis_of(key[3]) >= 0) set_once(slot(dil.v, key[3]), parse_int(t.text, t.value), t.text);
    else if (key == "op") { const auto v = parse_int(t.text, t.value); for (auto& s : opad.v) set_once(s, v, t.text); }
    else if (key.size() == 3 && key.rfind("op", 0) == 0 && axis_of(key[2]) >= 0) set_once(slot(opad.v, key[2]), parse_int(t.text, t.value), t.text);
    else if (key == "p") {
      const auto [f, b] = parse_pad(t.text, t.value);
      for (int a = 0; a < 3; ++a) { set_once(pf[a], f, t.text); set_once(pb[a], b, t.text); }
    } else if (key.size() == 2 && key[0] == 'p' && axis_of(key[1]) >= 0) {
      const auto [f, b] = parse_pad(t.text, t.value);
      set_once(slot(pf, key[1]), f, t.text);
      set_once(slot(pb, key[1]), b, t.text);
    } else bad(t.text, "unknown field '" + key + "'");
  }
  if (!n) bad(tokens[0], "missing n (batch)");
  if (!c) bad(tokens[0], "missing c (input channels)");
  if (!k) bad(tokens[0], "missing k (output channels)");
  if (!in.v[0]) bad(tokens[0], "missing d (spatial extent of x)");
  if (!kern.v[0]) bad(tokens[0], "missing kd (kernel extent)");
  p.n = *n;
  p.cin = *c;
  p.cout = *k;
  p.groups = g.value_or(1);
  p.in = in.resolve({1, 1, 1});
  p.kernel = kern.resolve({1, 1, 1});
  p.stride = stride.resolve({1, 1, 1});
  p.dilation = dil.resolve({1, 1, 1});
  p.output_padding = opad.resolve({0, 0, 0});
  for (int a = 0; a < 3; ++a) {
    p.pad_front[a] = pf[a].value_or(0);
    p.pad_back[a] = pb[a].value_or(0);
  }
  p.bias = bias;
  if (form) {
    if (*form == "logical") p.form = ShapeForm::logical;
    else if (*form == "halo") p.form = ShapeForm::halo;
    else if (*form == "adapter") p.form = ShapeForm::adapter;
    else bad("form=" + *form, "expected logical, halo or adapter");
  }
  if (halo) {
    std::stringstream ss(*halo);
    std::string part;
    int a = 0;
    while (std::getline(ss, part, ',')) {
      if (a >= 3) bad("halo=" + *halo, "expected three values D,H,W");
      p.halo[a++] = parse_int("halo=" + *halo, part);
    }
    if (a != 3) bad("halo=" + *halo, "expected three values D,H,W");
  }
  return p;
}

GroupNormProblem parse_gn(GnDir dir, const std::vector<std::string>& tokens) {
  GroupNormProblem p;
  p.dir = dir;
  parse_dtypes(tokens[1], p.src, p.dst, nullptr, false);
  std::optional<std::int64_t> n, c, g;
  Triple sp{{}, true};
  std::optional<double> eps;
  bool relu = false, noaffine = false;
  for (std::size_t i = 2; i < tokens.size(); ++i) {
    const Token t = split(tokens[i]);
    if (t.has_equals) bad(t.text, "unknown field '" + t.key + "'");
    if (t.value.empty()) {
      if (t.key == "relu") { if (relu) bad(t.text, "given twice"); relu = true; }
      else if (t.key == "noaffine") { if (noaffine) bad(t.text, "given twice"); noaffine = true; }
      else bad(t.text, "unknown flag (or a key without a value)");
      continue;
    }
    if (t.key == "n") set_once(n, parse_int(t.text, t.value), t.text);
    else if (t.key == "c") set_once(c, parse_int(t.text, t.value), t.text);
    else if (t.key == "g") set_once(g, parse_int(t.text, t.value), t.text);
    else if (t.key.size() == 1 && axis_of(t.key[0]) >= 0) set_once(slot(sp.v, t.key[0]), parse_int(t.text, t.value), t.text);
    else if (t.key == "eps") {
      if (eps) bad(t.text, "given twice");
      eps = parse_real(t.text, t.value);
    } else bad(t.text, "unknown field '" + t.key + "'");
  }
  if (!n) bad(tokens[0], "missing n (batch)");
  if (!c) bad(tokens[0], "missing c (channels)");
  if (!g) bad(tokens[0], "missing g (groups)");
  if (!sp.v[0]) bad(tokens[0], "missing d (spatial extent)");
  p.n = *n;
  p.c = *c;
  p.groups = *g;
  p.spatial = sp.resolve({1, 1, 1});
  p.eps = eps.value_or(1e-5);
  p.affine = !noaffine;
  p.relu = relu;
  return p;
}

// The canonical dtypes. A bare bf16 or fp16 means bf16:bf16 for a conv and
// bf16:fp32 for GroupNorm, so a low-precision source always prints its
// output dtype too: a canonical descriptor reads the same for either operator.
std::string dtypes_string(DType src, DType dst, std::optional<DType> acc, DType default_dst) {
  std::string s(name(src));
  const bool print_acc = acc && *acc != DType::fp32;
  const bool low_precision = src == DType::bf16 || src == DType::fp16;
  if (dst != default_dst || print_acc || low_precision) s += ":" + std::string(name(dst));
  if (print_acc) s += ":" + std::string(name(*acc));
  return s;
}

// "d128" when the three axes agree, else "d.. h.. w.."; nothing when all equal dflt.
void put_triple(std::string& s, const std::string& all, const std::string& prefix, const Axis3& v,
                std::int64_t dflt, bool always) {
  if (!always && v[0] == dflt && v[1] == dflt && v[2] == dflt) return;
  if (v[0] == v[1] && v[1] == v[2]) {
    s += " " + all + std::to_string(v[0]);
    return;
  }
  for (int a = 0; a < 3; ++a) s += " " + prefix + "dhw"[a] + std::to_string(v[a]);
}

// The descriptor token of a field that validate() names: "cin" -> "c",
// "in[h]" -> "h", "kernel[d]" -> "kd", "pad_back[w]" -> "pw", "out[d]" -> "d",
// "halo[w]" -> "halo". Fields without a token of their own (acc, dst, eps,
// the tensors) stay as they are.
std::string token_of(const std::string& field) {
  if (field == "cin") return "c";
  if (field == "cout") return "k";
  if (field == "groups") return "g";
  static const std::pair<std::string_view, std::string_view> kAxial[] = {
      {"in", ""},        {"spatial", ""},     {"out", ""},        {"kernel", "k"},
      {"stride", "s"},   {"dilation", "dil"}, {"pad_front", "p"}, {"pad_back", "p"},
      {"output_padding", "op"}};
  const auto open = field.find('[');
  if (open == std::string::npos || field.size() != open + 3 || field.back() != ']') return field;
  const std::string_view base = std::string_view(field).substr(0, open);
  if (base == "halo") return "halo";
  for (const auto& [f, t] : kAxial)
    if (base == f) return std::string(t) + field[open + 1];
  return field;
}

}  // namespace

Problem parse_descriptor(std::string_view text) {
  std::vector<std::string> tokens;
  {
    std::stringstream ss{std::string(text)};
    for (std::string t; ss >> t;) tokens.push_back(t);
  }
  if (tokens.size() < 2) throw InputError("descriptor", "expected '<op>.<direction> <dtypes> fields...', got '" + std::string(text) + "'");
  const std::string& od = tokens[0];
  Problem p;
  if (od == "conv3d.fwd") p = parse_conv(ConvOp::conv3d, ConvDir::fwd, tokens);
  else if (od == "conv3d.bwd_data") p = parse_conv(ConvOp::conv3d, ConvDir::bwd_data, tokens);
  else if (od == "conv3d.bwd_weight") p = parse_conv(ConvOp::conv3d, ConvDir::bwd_weight, tokens);
  else if (od == "conv_transpose3d.fwd") p = parse_conv(ConvOp::conv_transpose3d, ConvDir::fwd, tokens);
  else if (od == "conv_transpose3d.bwd_data") p = parse_conv(ConvOp::conv_transpose3d, ConvDir::bwd_data, tokens);
  else if (od == "conv_transpose3d.bwd_weight") p = parse_conv(ConvOp::conv_transpose3d, ConvDir::bwd_weight, tokens);
  else if (od == "groupnorm.fwd") p = parse_gn(GnDir::fwd, tokens);
  else if (od == "groupnorm.bwd") p = parse_gn(GnDir::bwd, tokens);
  else bad(od, "unknown operator.direction (conv3d.*, conv_transpose3d.*, groupnorm.* with fwd, bwd_data, bwd_weight / fwd, bwd)");
  try {
    validate(p);
  } catch (const InputError& e) {
    throw InputError(token_of(e.field()), e.message());
  }
  return p;
}

std::optional<std::string> canonical_descriptor(std::string_view text) {
  try {
    return to_descriptor(parse_descriptor(text));
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::string to_descriptor(const ConvProblem& p) {
  std::string s = std::string(name(p.op)) + "." + std::string(name(p.dir)) + " " +
                  dtypes_string(p.src, p.dst, p.acc, p.src);
  s += " n" + std::to_string(p.n) + " c" + std::to_string(p.cin) + " k" + std::to_string(p.cout);
  if (p.groups != 1) s += " g" + std::to_string(p.groups);
  put_triple(s, "d", "", p.in, 0, true);
  put_triple(s, "kd", "k", p.kernel, 0, true);
  put_triple(s, "s", "s", p.stride, 1, false);
  const bool pad_uniform = p.pad_front[0] == p.pad_front[1] && p.pad_front[1] == p.pad_front[2] &&
                           p.pad_back[0] == p.pad_back[1] && p.pad_back[1] == p.pad_back[2];
  auto pad_value = [&](int a) {
    return p.pad_front[a] == p.pad_back[a] ? std::to_string(p.pad_front[a])
                                           : std::to_string(p.pad_front[a]) + ":" + std::to_string(p.pad_back[a]);
  };
  if (pad_uniform) {
    if (p.pad_front[0] != 0 || p.pad_back[0] != 0) s += " p" + pad_value(0);
  } else {
    for (int a = 0; a < 3; ++a) s += std::string(" p") + "dhw"[a] + pad_value(a);
  }
  put_triple(s, "dil", "dil", p.dilation, 1, false);
  put_triple(s, "op", "op", p.output_padding, 0, false);
  if (p.bias) s += " bias";
  if (p.form != ShapeForm::logical) s += " form=" + std::string(name(p.form));
  if (p.halo != Axis3{0, 0, 0})
    s += " halo=" + std::to_string(p.halo[0]) + "," + std::to_string(p.halo[1]) + "," + std::to_string(p.halo[2]);
  return s;
}

std::string to_descriptor(const GroupNormProblem& p) {
  std::string s = "groupnorm." + std::string(name(p.dir)) + " " + dtypes_string(p.src, p.dst, std::nullopt, DType::fp32);
  s += " n" + std::to_string(p.n) + " c" + std::to_string(p.c) + " g" + std::to_string(p.groups);
  put_triple(s, "d", "", p.spatial, 0, true);
  if (p.eps != 1e-5) s += " eps" + format_double(p.eps);
  if (!p.affine) s += " noaffine";
  if (p.relu) s += " relu";
  return s;
}

std::string to_descriptor(const Problem& p) {
  return std::visit([](const auto& q) { return to_descriptor(q); }, p);
}

}  // namespace kgate
