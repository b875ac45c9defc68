#include "reference/json.hpp"

#include <climits>
#include <cmath>
#include <set>
#include <vector>

#include "reference/error.hpp"

namespace kgate {

using nlohmann::json;

namespace {

json axis(const Axis3& a) { return json::array({a[0], a[1], a[2]}); }

// nlohmann's message without its "[json.exception.<kind>.<id>] " prefix.
std::string plain(const nlohmann::json::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    const auto close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  return m;
}

// A value as it appears in an error message: its JSON text, cut short.
std::string brief(const json& v) {
  if (v.is_array() || v.is_object()) return v.is_array() ? "an array" : "an object";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Builds the document through nlohmann's DOM builder while tracking where the
// parser is (for messages), refusing duplicate keys (nlohmann would keep the
// last one silently) and nesting deeper than kMaxJsonDepth (the DOM's copy
// and dump are recursive).
class TrackingSax {
 public:
  TrackingSax(json& root, const std::string& name) : dom_(root), name_(name) {}

  bool null() { return value(), dom_.null(); }
  bool boolean(bool v) { return value(), dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return value(), dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(), dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return value(), dom_.number_float(v, s); }
  bool string(json::string_t& v) { return value(), dom_.string(v); }
  bool binary(json::binary_t& v) { return value(), dom_.binary(v); }
  bool start_object(std::size_t n) {
    open(false);
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) fail("key given twice");
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    open(true);
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    fail("malformed JSON: " + plain(e));
  }

 private:
  struct Frame {
    bool array = false;
    std::size_t count = 0;  // array: elements begun
    std::string key;        // object: the last key
    std::set<std::string> keys;
  };
  void value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().count;
  }
  void open(bool array) {
    value();
    frames_.push_back({array, 0, {}, {}});
    if (frames_.size() > kMaxJsonDepth) fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  // "name: a[3].b": the innermost frame names the element or key being read.
  [[noreturn]] void fail(const std::string& why) const {
    std::string where;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      const bool innermost = i + 1 == frames_.size();
      if (f.array) where += "[" + std::to_string(innermost ? f.count : f.count - 1) + "]";
      else if (!f.key.empty() || !f.keys.empty()) where += (where.empty() ? "" : ".") + f.key;
    }
    throw InputError(where.empty() ? name_ : name_ + ": " + where, why);
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const std::string& name_;
  std::vector<Frame> frames_;
};

}  // namespace

std::int64_t as_int64(const json& v, const std::string& field) {
  // An integer literal beyond 64 bits is parsed as a float: it is an integer
  // all the same, and out of range.
  if (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
      std::fabs(v.get<double>()) >= 0x1p63)
    throw InputError(field, "integer out of range: " + v.dump());
  if (!v.is_number_integer()) throw InputError(field, "expected an integer, got " + brief(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw InputError(field, "integer out of range: " + v.dump());
  return v.get<std::int64_t>();
}

namespace {

// Reads one object's fields with type checks; every error names where.field.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) throw InputError(where_, "expected a JSON object");
  }
  bool has(const char* k) const { return j_.contains(k); }
  std::string f(const char* k) const { return where_ + "." + k; }

  const json& get(const char* k) const {
    seen_.insert(k);
    if (!j_.contains(k)) throw InputError(f(k), "missing");
    return j_.at(k);
  }
  std::int64_t integer(const char* k) const { return as_int64(get(k), f(k)); }
  std::int64_t integer(const char* k, std::int64_t dflt) const { return has(k) ? integer(k) : dflt; }
  double real(const char* k, double dflt) const {
    if (!has(k)) return dflt;
    const json& v = get(k);
    if (!v.is_number()) throw InputError(f(k), "expected a number, got " + brief(v));
    return v.get<double>();
  }
  bool boolean(const char* k, bool dflt) const {
    if (!has(k)) return dflt;
    const json& v = get(k);
    if (!v.is_boolean()) throw InputError(f(k), "expected true or false, got " + brief(v));
    return v.get<bool>();
  }
  std::string string(const char* k) const {
    const json& v = get(k);
    if (!v.is_string()) throw InputError(f(k), "expected a string, got " + brief(v));
    return v.get<std::string>();
  }
  Axis3 triple(const char* k, Axis3 dflt, bool required = false) const {
    if (!required && !has(k)) return dflt;
    const json& v = get(k);
    if (!v.is_array() || v.size() != 3) throw InputError(f(k), "expected [D, H, W], got " + brief(v));
    Axis3 r{};
    for (std::size_t a = 0; a < 3; ++a) r[a] = as_int64(v[a], f(k) + "[" + std::to_string(a) + "]");
    return r;
  }
  DType dtype(const char* k, DType dflt, bool required = false) const {
    if (!required && !has(k)) return dflt;
    const std::string s = string(k);
    auto t = parse_dtype(s);
    if (!t) throw InputError(f(k), "unknown dtype '" + s + "' (fp64, fp32, bf16, fp16)");
    return *t;
  }
  template <class E, std::size_t N>
  E choice(const char* k, const std::array<E, N>& options, E dflt, bool required = false) const {
    if (!required && !has(k)) return dflt;
    const std::string s = string(k);
    std::string allowed;
    for (E e : options) {
      if (name(e) == s) return e;
      allowed += (allowed.empty() ? "" : ", ") + std::string(name(e));
    }
    throw InputError(f(k), "unknown value '" + s + "' (" + allowed + ")");
  }
  // Call last: rejects fields nobody read.
  void no_unknown_fields() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) throw InputError(f(it.key().c_str()), "unknown field");
  }

 private:
  const json& j_;
  std::string where_;
  mutable std::set<std::string> seen_;
};

ConvProblem conv_from(const Reader& r) {
  ConvProblem p;
  p.op = r.choice("op", std::array{ConvOp::conv3d, ConvOp::conv_transpose3d}, ConvOp::conv3d, true);
  p.dir = r.choice("dir", std::array{ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}, ConvDir::fwd, true);
  p.n = r.integer("n");
  p.cin = r.integer("cin");
  p.cout = r.integer("cout");
  p.groups = r.integer("groups", 1);
  p.in = r.triple("in", {}, true);
  p.kernel = r.triple("kernel", {}, true);
  p.stride = r.triple("stride", {1, 1, 1});
  p.pad_front = r.triple("pad_front", {0, 0, 0});
  p.pad_back = r.triple("pad_back", {0, 0, 0});
  p.dilation = r.triple("dilation", {1, 1, 1});
  p.output_padding = r.triple("output_padding", {0, 0, 0});
  p.bias = r.boolean("bias", false);
  p.src = r.dtype("src", DType::bf16, true);
  p.dst = r.dtype("dst", p.src);
  p.acc = r.dtype("acc", DType::fp32);
  p.form = r.choice("form", std::array{ShapeForm::logical, ShapeForm::halo, ShapeForm::adapter}, ShapeForm::logical);
  p.halo = r.triple("halo", {0, 0, 0});
  r.no_unknown_fields();
  return p;
}

GroupNormProblem gn_from(const Reader& r) {
  GroupNormProblem p;
  r.string("op");  // "groupnorm", checked by the caller
  p.dir = r.choice("dir", std::array{GnDir::fwd, GnDir::bwd}, GnDir::fwd, true);
  p.n = r.integer("n");
  p.c = r.integer("c");
  p.groups = r.integer("groups");
  p.spatial = r.triple("spatial", {}, true);
  p.eps = r.real("eps", 1e-5);
  p.affine = r.boolean("affine", true);
  p.relu = r.boolean("relu", false);
  p.src = r.dtype("src", DType::bf16, true);
  p.dst = r.dtype("dst", DType::fp32);
  r.no_unknown_fields();
  return p;
}

}  // namespace

json parse_json(std::string_view text, const std::string& name) {
  json root;
  TrackingSax sax(root, name);
  try {
    json::sax_parse(text, &sax);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(name, "malformed JSON: " + plain(e));
  }
  return root;
}

json to_json(const ConvProblem& p) {
  return json{{"op", name(p.op)},           {"dir", name(p.dir)},
              {"n", p.n},                   {"cin", p.cin},
              {"cout", p.cout},             {"groups", p.groups},
              {"in", axis(p.in)},           {"kernel", axis(p.kernel)},
              {"stride", axis(p.stride)},   {"pad_front", axis(p.pad_front)},
              {"pad_back", axis(p.pad_back)}, {"dilation", axis(p.dilation)},
              {"output_padding", axis(p.output_padding)}, {"bias", p.bias},
              {"src", name(p.src)},         {"dst", name(p.dst)},
              {"acc", name(p.acc)},         {"form", name(p.form)},
              {"halo", axis(p.halo)}};
}

json to_json(const GroupNormProblem& p) {
  return json{{"op", "groupnorm"}, {"dir", name(p.dir)},   {"n", p.n},
              {"c", p.c},          {"groups", p.groups},   {"spatial", axis(p.spatial)},
              {"eps", p.eps},      {"affine", p.affine},   {"relu", p.relu},
              {"src", name(p.src)}, {"dst", name(p.dst)}};
}

json to_json(const Problem& p) {
  return std::visit([](const auto& q) { return to_json(q); }, p);
}

Problem problem_from_json(const json& j, const std::string& where) {
  const Reader r(j, where);
  Problem p;
  try {
    if (r.has("op") && j.at("op").is_string() && j.at("op").get<std::string>() == "groupnorm") p = gn_from(r);
    else p = conv_from(r);
  } catch (const nlohmann::json::exception& e) {
    // Every access above is type-checked; this names the object should one not be.
    throw InputError(where, plain(e));
  }
  try {
    validate(p);
  } catch (const InputError& e) {
    throw InputError(where + "." + e.field(), e.message());
  }
  return p;
}

}  // namespace kgate
