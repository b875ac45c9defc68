#include "corpus/bitwise.hpp"

#include <cmath>
#include <stdexcept>

#include "corpus/corpus_file.hpp"
#include "corpus/unet.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"

namespace kgate::corpus {

std::vector<Problem> bitwise_problems() {
  // Shapes (after the op.dir and dtype): plain, adapter form, and a grouped,
  // strided, dilated one with asymmetric padding.
  const char* conv_shapes[] = {
      "n1 c8 k8 d6 kd3 p1",
      "n1 c8 k8 d6 h5 w4 kd3 pd0 ph1 pw1 form=adapter halo=1,0,0",
      "n2 c8 k12 g4 d9 h8 w7 kd3 s2 dil2 pd2:1 ph1 pw0:2",
  };
  const char* convt_shapes[] = {
      "n1 c8 k4 d3 kd2 s2",
      "n1 c6 k6 g3 d4 h3 w5 kd3 s2 p1 op1",
  };
  const char* dtypes[] = {"bf16", "fp16", "fp32"};
  std::vector<Problem> out;
  for (const char* op : {"conv3d", "conv_transpose3d"}) {
    const bool t = std::string(op) == "conv_transpose3d";
    for (const char* dir : {"fwd", "bwd_data", "bwd_weight"})
      for (const char* dt : dtypes) {
        const auto& shapes = t ? std::vector<const char*>(std::begin(convt_shapes), std::end(convt_shapes))
                               : std::vector<const char*>(std::begin(conv_shapes), std::end(conv_shapes));
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          std::string d = std::string(op) + "." + dir + " " + dt + " " + shapes[i];
          // Bias (and db) on one shape per direction where it is defined.
          if (i == 0 && std::string(dir) != "bwd_data") d += " bias";
          out.push_back(parse_descriptor(d));
        }
      }
  }
  // Shape diversity, every direction (bf16: the indexing does not depend on
  // the dtype): the distinct-extent case in every axis order, stride,
  // dilation and padding different per axis, groups whose in- and
  // out-channels per group differ, channel counts that are a tail of every
  // block, and W below one W-halo segment on matrix cores.
  const char* diverse_conv[] = {
      "n1 c8 k8 d5 h6 w7 kd3 p1", "n1 c8 k8 d5 h7 w6 kd3 p1", "n1 c8 k8 d6 h5 w7 kd3 p1",
      "n1 c8 k8 d6 h7 w5 kd3 p1", "n1 c8 k8 d7 h5 w6 kd3 p1", "n1 c8 k8 d7 h6 w5 kd3 p1",
      "n1 c6 k4 d9 h7 w11 kd3 kh2 kw3 sd2 sh1 sw3 dild1 dilh2 dilw1 pd1:0 ph0:1 pw2",
      "n2 c12 k8 g4 d4 h5 w6 kd3 kh1 kw2 pd1 pw1:0",
      "n1 c13 k11 d4 h5 w6 kd3 p1",
      "n1 c32 k32 d6 h5 w2 kd3 p1",
  };
  const char* diverse_convt[] = {
      "n1 c8 k8 d3 h4 w5 kd2 s2", "n1 c8 k8 d3 h5 w4 kd2 s2", "n1 c8 k8 d4 h3 w5 kd2 s2",
      "n1 c8 k8 d4 h5 w3 kd2 s2", "n1 c8 k8 d5 h3 w4 kd2 s2", "n1 c8 k8 d5 h4 w3 kd2 s2",
      "n1 c6 k4 d4 h5 w3 kd3 kh2 kw3 sd2 sh1 sw3 dild1 dilh2 dilw1 pd1 ph0 pw2 opd1 opw2",
      "n2 c12 k8 g4 d3 h4 w5 kd3 kh1 kw2 s2 pd1 op1",
      "n1 c13 k11 d3 h4 w5 kd3 s2 p1",
      "n1 c32 k32 d5 h4 w2 kd3 p1",
  };
  for (const char* op : {"conv3d", "conv_transpose3d"})
    for (const char* dir : {"fwd", "bwd_data", "bwd_weight"}) {
      const bool t = std::string(op) == "conv_transpose3d";
      for (const char* sh : t ? std::vector<const char*>(std::begin(diverse_convt), std::end(diverse_convt))
                              : std::vector<const char*>(std::begin(diverse_conv), std::end(diverse_conv)))
        out.push_back(parse_descriptor(std::string(op) + "." + dir + " bf16 " + sh));
    }
  // Every production path of the matrix-core kernels and of the split
  // trees, per operator-direction, in both matrix-core input types: the
  // matrix-core tile (ragged M and N), its split of K by taps (conv_tree),
  // backward-weight's matrix-core tile and W-halo tile (sm_90's) with and
  // without db, the portable
  // one-tap scatter, and the split tree by split (conv_tree_split, 64 and
  // more slices of few elements) with and without db. tools' BitwisePaths
  // test holds the list to the boundary problems' paths.
  struct Path {
    const char* op_dir;
    const char* shape;
    bool mma;  // in bf16 and fp16 (else bf16 only)
  };
  for (const Path& p : {Path{"conv3d.fwd", "n1 c32 k24 d5 h6 w7 kd3 p1 bias", true},
                        Path{"conv3d.fwd", "n1 c160 k16 d4 h4 w8 kd3 p1 bias", true},
                        Path{"conv3d.bwd_data", "n1 c24 k32 d5 h6 w7 kd3 p1", true},
                        Path{"conv3d.bwd_data", "n1 c16 k160 d4 h4 w8 kd3 p1", true},
                        Path{"conv3d.bwd_data", "n1 c3 k5 d4 h6 w5 kd2 s2", false},
                        Path{"conv3d.bwd_weight", "n1 c8 k32 d5 h6 w7 kd3 p1", true},
                        Path{"conv3d.bwd_weight", "n2 c8 k24 d3 h5 w7 kd3 p1 bias", true},
                        Path{"conv3d.bwd_weight", "n1 c128 k32 d3 h3 w16 kd3 p1", true},
                        Path{"conv3d.bwd_weight", "n1 c128 k32 d3 h3 w16 kd3 p1 bias", true},
                        Path{"conv3d.bwd_weight", "n1 c2 k3 d16 h64 w64 kd1", false},
                        Path{"conv3d.bwd_weight", "n1 c2 k3 d16 h64 w64 kd1 bias", false},
                        Path{"conv_transpose3d.fwd", "n1 c24 k32 d5 h6 w7 kd3 p1 bias", true},
                        Path{"conv_transpose3d.fwd", "n1 c160 k16 d4 h4 w8 kd3 p1 bias", true},
                        Path{"conv_transpose3d.bwd_data", "n1 c32 k24 d5 h6 w7 kd3 p1", true},
                        Path{"conv_transpose3d.bwd_data", "n1 c16 k160 d4 h4 w8 kd3 p1", true},
                        Path{"conv_transpose3d.bwd_weight", "n1 c32 k8 d5 h6 w7 kd3 p1", true},
                        Path{"conv_transpose3d.bwd_weight", "n2 c24 k8 d3 h5 w7 kd3 p1 bias", true},
                        Path{"conv_transpose3d.bwd_weight", "n1 c32 k128 d3 h3 w16 kd3 p1", true},
                        Path{"conv_transpose3d.bwd_weight", "n1 c32 k128 d3 h3 w16 kd3 p1 bias", true},
                        Path{"conv_transpose3d.bwd_weight", "n1 c3 k2 d16 h64 w64 kd1", false},
                        Path{"conv_transpose3d.bwd_weight", "n1 c3 k2 d16 h64 w64 kd1 bias", false}})
    for (const char* dt : {"bf16", "fp16"})
      if (p.mma || std::string(dt) == "bf16") out.push_back(parse_descriptor(std::string(p.op_dir) + " " + dt + " " + p.shape));
  // GroupNorm forward: constant groups; eps = 2^-16 (a power of 4) makes
  // rstd = 2^8 exact as well. Backward: unit deltas with eps = 3 (variance
  // 1, rstd 1/2) and groups of a power-of-two size: every output exact.
  for (const char* d : {"groupnorm.fwd bf16 n1 c64 g8 d4 relu", "groupnorm.fwd fp16:fp16 n2 c24 g3 d3 h4 w5",
                        "groupnorm.fwd fp32 n1 c16 g4 d5 relu noaffine",
                        "groupnorm.fwd bf16 n2 c64 g8 d3 h4 w5 relu eps1.52587890625e-05",
                        "groupnorm.fwd fp16:fp16 n1 c24 g3 d4 eps1.52587890625e-05",
                        "groupnorm.bwd bf16 n1 c64 g8 d4 relu eps3", "groupnorm.bwd fp16:fp16 n2 c24 g3 d2 h4 w4 eps3",
                        "groupnorm.bwd fp32 n1 c16 g4 d4 relu noaffine eps3", "groupnorm.bwd bf16:bf16 n3 c6 g6 d2 eps3"})
    out.push_back(parse_descriptor(d));
  return out;
}

Fill bitwise_fill(const Problem& p) {
  if (std::holds_alternative<ConvProblem>(p)) return lattice_fill(p, kBitwiseSeed);
  if (std::get<GroupNormProblem>(p).dir == GnDir::bwd) return parse_fill("gn_exact:unit=1", kBitwiseSeed);
  return parse_fill("gn_exact:constant=1", kBitwiseSeed);
}

namespace {

bool power_of_two(double v) {
  int e = 0;
  return v > 0 && std::frexp(v, &e) == 0.5;
}

// 1/sqrt(eps) is exact (in fp32 and fp64) when eps is a power of 4.
bool rstd_exact(const GroupNormProblem& g) {
  int e = 0;
  return power_of_two(g.eps) && (std::frexp(g.eps, &e), ((e - 1) % 2 + 2) % 2 == 0);
}

// The outputs a bitwise entry digests: every conv output; GroupNorm
// forward's y and mean, and rstd when eps is a power of 4; every GroupNorm
// backward output (make_bitwise_entry checks that the entry is exact).
bool exact_role(const Problem& p, Role r) {
  const auto* g = std::get_if<GroupNormProblem>(&p);
  if (!g || g->dir == GnDir::bwd) return true;
  return r == Role::y || r == Role::mean || (r == Role::rstd && rstd_exact(*g));
}

// A GroupNorm backward is exact in any order when the fed rstd values and
// the group size M are powers of two (then c2 = -A r^3/M, c3 = -B r/M and
// every sum of the small-integer terms are exact).
void check_backward_exact(const BitwiseEntry& e, const std::map<Role, Tensor>& in) {
  const auto* g = std::get_if<GroupNormProblem>(&e.problem);
  if (!g || g->dir != GnDir::bwd) return;
  bool ok = power_of_two(static_cast<double>(g->group_size()));
  const Tensor& r = in.at(Role::rstd);
  for (std::int64_t i = 0; i < r.numel(); ++i) ok = ok && power_of_two(r.get(i));
  if (!ok)
    throw std::logic_error("bitwise entry '" + e.descriptor +
                           "': a GroupNorm backward entry needs a power-of-two group size and rstd (unit deltas, eps = 3)");
}

}  // namespace

std::map<Role, Tensor> bitwise_inputs(const BitwiseEntry& e) { return ref::make_inputs(e.problem, e.fill); }

std::map<Role, Tensor> bitwise_expected(const Problem& p, const std::map<Role, Tensor>& in) {
  std::map<Role, Tensor> out;
  const ref::Outputs want = ref::run_reference(p, ref::refs(in), ref::Impl::fast);
  for (const auto& s : outputs(p))
    if (exact_role(p, s.role)) out.emplace(s.role, want.at(s.role).to(s.dtype));
  return out;
}

BitwiseEntry make_bitwise_entry(const Problem& p) {
  BitwiseEntry e{to_descriptor(p), p, bitwise_fill(p), {}};
  const auto in = bitwise_inputs(e);
  check_backward_exact(e, in);
  for (const auto& [r, t] : bitwise_expected(p, in)) e.digests[r] = digest(t);
  return e;
}

nlohmann::json bitwise_document(const std::vector<BitwiseEntry>& entries) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json d = nlohmann::json::object();
    for (const auto& [r, h] : e.digests) d[std::string(name(r))] = h;
    arr.push_back({{"descriptor", e.descriptor}, {"problem", to_json(e.problem)}, {"fill", to_json(e.fill)}, {"digests", d}});
  }
  return {{"provenance",
           {{"generator", "kgate bitwise make"},
            {"generator_version", kGeneratorVersion},
            {"expected", "fp64 reference (exact on lattice inputs) rounded once to each output dtype"}}},
          {"entries", arr}};
}

std::vector<BitwiseEntry> load_bitwise(const std::string& path) { return bitwise_from_json(read_json(path), path); }

namespace {

BitwiseEntry bitwise_entry_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(where, "expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "descriptor" && it.key() != "problem" && it.key() != "fill" && it.key() != "digests")
      throw InputError(where + "." + it.key(), "unknown field");
  for (const char* k : {"descriptor", "problem", "fill", "digests"})
    if (!j.contains(k)) throw InputError(where + "." + k, "missing");
  BitwiseEntry e;
  if (!j["descriptor"].is_string()) throw InputError(where + ".descriptor", "expected a string");
  e.descriptor = j["descriptor"].get<std::string>();
  e.problem = problem_from_json(j["problem"], where + ".problem");
  const std::string canonical = to_descriptor(e.problem);
  if (canonical_descriptor(e.descriptor) != canonical)
    throw InputError(where + ".descriptor", "'" + e.descriptor + "' disagrees with the problem ('" + canonical + "')");
  e.descriptor = canonical;
  e.fill = fill_from_json(j["fill"], where + ".fill");
  if (!j["digests"].is_object() || j["digests"].empty()) throw InputError(where + ".digests", "expected a non-empty object");
  for (auto it = j["digests"].begin(); it != j["digests"].end(); ++it) {
    Role role{};
    bool found = false;
    for (const auto& s : outputs(e.problem))
      if (name(s.role) == it.key()) {
        role = s.role;
        found = true;
      }
    if (!found) throw InputError(where + ".digests." + it.key(), "not an output of " + op_dir_name(e.problem));
    const std::string h = it->is_string() ? it->get<std::string>() : "";
    if (h.size() != 32 || h.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw InputError(where + ".digests." + it.key(), "expected 32 lowercase hex digits");
    e.digests[role] = h;
  }
  return e;
}

}  // namespace

std::vector<BitwiseEntry> bitwise_from_json(const nlohmann::json& doc, const std::string& path) {
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array())
    throw InputError(path + ": entries", "missing or not an array");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "provenance" && it.key() != "entries") throw InputError(path + ": " + it.key(), "unknown field");
  std::vector<BitwiseEntry> out;
  const auto& arr = doc["entries"];
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string where = path + ": entries[" + std::to_string(i) + "]";
    try {
      out.push_back(bitwise_entry_from_json(arr[i], where));
    } catch (const nlohmann::json::exception& e) {
      // Every access is type-checked; this names the entry should one not be.
      throw InputError(where, e.what());
    }
  }
  return out;
}

}  // namespace kgate::corpus
