// The declared reduction structure of a kernel: how one output element's
// terms are summed. Kernels publish it in their launch plan; the oracle
// (oracles/) derives every error bound from it. A value with a printer and a
// JSON form; header-only so kernels/ can use it without linking oracles/.
//
// Model (docs/NUMERICS.md, tier 2). One output element's K terms are cut into
// `splits` slices; each slice is summed by a sequential loop of at most
// `length` steps in `acc` (IEEE round-to-nearest) or by MFMA instructions
// (`model = mfma_cdna3`: chunks of `chunk` products aligned to the chunk's
// largest exponent and truncated, docs/EMULATOR.md; `model = mma_sm90`: sm_90
// mma.sync, each instruction's `chunk` products and the running sum fused,
// cut toward zero at 25 fractional bits and rounded toward zero to fp32
// once: a one-sided error per instruction). Each slice's partial is stored
// in `partial` (one rounding when narrower than `acc`), then the partials are
// combined in `acc` by a tree (depth ceil(log2 S)) or serially (S - 1 adds).
// `epilogue_ops` counts the floating-point operations after the reduction
// (bias add, scale, ...) each rounded in `acc`. `operand_bits` > 0: both
// operands of every product are rounded to nearest with that many
// significand bits before it (tf32: 11), a relative error of 2^-bits each.
//
// depth() = D, the number of roundings one term can pass through:
//   S == 1: L;  tree: L + ceil(log2 S);  serial: L + S - 1.
// A pairwise sum of K terms is {length 1, splits K, tree}; a loop over blocks
// of b terms whose block sums are added in sequence is {length b,
// splits ceil(K/b), serial}.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reference/dtype.hpp"
#include "reference/error.hpp"

namespace kgate {

enum class AccumModel : std::uint8_t { ieee_rn, mfma_cdna3, mma_sm90 };
enum class PartialCombine : std::uint8_t { tree, serial };

constexpr std::string_view name(AccumModel m) {
  return m == AccumModel::ieee_rn ? "ieee_rn" : m == AccumModel::mfma_cdna3 ? "mfma_cdna3" : "mma_sm90";
}
constexpr std::string_view name(PartialCombine c) { return c == PartialCombine::tree ? "tree" : "serial"; }

struct ReductionPlan {
  std::int64_t length = 1;  // L: terms summed in sequence per slice (>= 1)
  std::int64_t splits = 1;  // S: slices (split-K); 1 = no split
  PartialCombine combine = PartialCombine::tree;
  DType acc = DType::fp32;      // accumulator
  DType partial = DType::fp32;  // storage of slice partials (== acc: no extra rounding)
  AccumModel model = AccumModel::ieee_rn;
  int chunk = 8;         // products per MFMA chunk / mma instruction (matrix-core models only)
  int epilogue_ops = 0;  // rounded operations after the reduction
  // The reduction's result is rounded to the output dtype before the
  // epilogue ops (a library that adds the bias to its already rounded
  // output): one more rounding, of a value up to |y| + |b|.
  bool rounded_before_epilogue = false;
  int operand_bits = 0;  // 0: operands used as given
  // The epilogue forms differences before it scales (GroupNorm y = (x -
  // mean) * rstd * gamma + beta), so that a constant group's output is beta
  // exactly. False for an implementation that may fold the mean into a
  // shift (x * s + (beta - mean * s), as ATen does), which rounds there:
  // tier 1 then does not apply to y.
  bool exact_epilogue = true;
  // The slice map of a split (splits > 1): the terms of each output, taken
  // along the reduction's outer axis, are cut into consecutive runs of
  // split_run, run k summed into partial k. The axis is the operator's:
  // for a convolution's backward-weight and db the K rows (n, position) in
  // NDHW order; for a split of the taps, the output's taps in (KD, KH, KW)
  // order (the transposed-direction scatter: its stride phase's taps). 0:
  // the plan does not publish one (an external kernel's model).
  std::int64_t split_run = 0;

  // Combine levels: ceil(log2 S) for a tree, S - 1 serially, 0 when S == 1.
  std::int64_t combine_depth() const {
    if (splits <= 1) return 0;
    if (combine == PartialCombine::serial) return splits - 1;
    std::int64_t d = 0;
    while ((std::int64_t{1} << d) < splits) ++d;
    return d;
  }
  std::int64_t depth() const { return length + combine_depth(); }
  // True when the slice partials are rounded to a narrower format.
  bool narrow_partials() const {
    return splits > 1 && significand_bits(partial) < significand_bits(acc);
  }

  // Throws InputError naming the field.
  void validate() const {
    if (length < 1) throw InputError("reduction.length", "must be >= 1, got " + std::to_string(length));
    if (splits < 1) throw InputError("reduction.splits", "must be >= 1, got " + std::to_string(splits));
    if (chunk < 1) throw InputError("reduction.chunk", "must be >= 1, got " + std::to_string(chunk));
    if (epilogue_ops < 0) throw InputError("reduction.epilogue_ops", "must be >= 0");
    if (split_run < 0) throw InputError("reduction.split_run", "must be >= 0, got " + std::to_string(split_run));
    if (operand_bits < 0 || operand_bits > 53) throw InputError("reduction.operand_bits", "must be in [0, 53]");
    if (significand_bits(partial) > significand_bits(acc))
      throw InputError("reduction.partial", "wider than the accumulator");
  }

  // The plans of the common loop shapes over K terms.
  static ReductionPlan sequential(std::int64_t k, DType acc = DType::fp32) {
    ReductionPlan p; p.length = k < 1 ? 1 : k; p.acc = acc; p.partial = acc; return p;
  }
  static ReductionPlan split_k(std::int64_t k, std::int64_t s, PartialCombine c, DType acc = DType::fp32) {
    ReductionPlan p; p.splits = s < 1 ? 1 : s; p.length = (k + p.splits - 1) / p.splits;
    if (p.length < 1) p.length = 1;
    p.combine = c; p.acc = acc; p.partial = acc; return p;
  }
  static ReductionPlan pairwise(std::int64_t k, DType acc = DType::fp32) {
    return split_k(k, k, PartialCombine::tree, acc);
  }
  static ReductionPlan mfma(std::int64_t k, int chunk = 8) {
    ReductionPlan p = sequential(k); p.model = AccumModel::mfma_cdna3; p.chunk = chunk; return p;
  }

  bool operator==(const ReductionPlan&) const = default;
};

// "L=4096 S=8 tree acc=fp32 partial=fp32 ieee_rn epi=1 (D=4099)"
inline std::string to_string(const ReductionPlan& p) {
  std::ostringstream o;
  o << "L=" << p.length << " S=" << p.splits;
  if (p.splits > 1) o << ' ' << name(p.combine);
  o << " acc=" << name(p.acc);
  if (p.partial != p.acc) o << " partial=" << name(p.partial);
  o << ' ' << name(p.model);
  if (p.model != AccumModel::ieee_rn) o << " chunk=" << p.chunk;
  if (p.epilogue_ops) o << " epi=" << p.epilogue_ops;
  if (p.rounded_before_epilogue) o << " rounded-before-epi";
  if (p.operand_bits) o << " operands=" << p.operand_bits << "b";
  if (!p.exact_epilogue) o << " inexact-epi";
  if (p.split_run) o << " run=" << p.split_run;
  o << " (D=" << p.depth() << ")";
  return o.str();
}
inline std::ostream& operator<<(std::ostream& o, const ReductionPlan& p) { return o << to_string(p); }

inline nlohmann::json to_json(const ReductionPlan& p) {
  return nlohmann::json{{"length", p.length},
                        {"splits", p.splits},
                        {"combine", std::string(name(p.combine))},
                        {"acc", std::string(name(p.acc))},
                        {"partial", std::string(name(p.partial))},
                        {"model", std::string(name(p.model))},
                        {"chunk", p.chunk},
                        {"epilogue_ops", p.epilogue_ops},
                        {"rounded_before_epilogue", p.rounded_before_epilogue},
                        {"operand_bits", p.operand_bits},
                        {"exact_epilogue", p.exact_epilogue},
                        {"split_run", p.split_run}};
}

// Rejects unknown fields; missing fields take the defaults above (partial
// defaults to acc). Validates.
inline ReductionPlan reduction_from_json(const nlohmann::json& j, const std::string& where = "reduction") {
  if (!j.is_object()) throw InputError(where, "expected a JSON object");
  static const char* const kKnown[] = {"length", "splits", "combine", "acc", "partial", "model", "chunk", "epilogue_ops",
                                       "rounded_before_epilogue", "operand_bits", "exact_epilogue", "split_run"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : kKnown) ok = ok || it.key() == k;
    if (!ok) throw InputError(where + "." + it.key(), "unknown field");
  }
  // An integer in [lo, hi]; a JSON integer beyond int64 would wrap in get<>.
  auto integer = [&](const char* k, std::int64_t d, std::int64_t lo = INT64_MIN,
                     std::int64_t hi = INT64_MAX) -> std::int64_t {
    if (!j.contains(k)) return d;
    const nlohmann::json& v = j.at(k);
    if (!v.is_number_integer()) throw InputError(where + "." + k, "expected an integer, got " + v.dump());
    const bool over = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
    if (over || (!v.is_number_unsigned() && (v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)))
      throw InputError(where + "." + k, "integer out of range: " + v.dump());
    return v.get<std::int64_t>();
  };
  auto str = [&](const char* k, const char* d) -> std::string {
    if (!j.contains(k)) return d;
    if (!j.at(k).is_string()) throw InputError(where + "." + k, "expected a string, got " + j.at(k).dump());
    return j.at(k).get<std::string>();
  };
  auto dtype = [&](const char* k, const std::string& d) {
    const std::string s = str(k, d.c_str());
    const auto t = parse_dtype(s);
    if (!t) throw InputError(where + "." + k, "unknown dtype '" + s + "'");
    return *t;
  };
  ReductionPlan p;
  p.length = integer("length", 1);
  p.splits = integer("splits", 1);
  const std::string c = str("combine", "tree");
  if (c == "tree") p.combine = PartialCombine::tree;
  else if (c == "serial") p.combine = PartialCombine::serial;
  else throw InputError(where + ".combine", "expected tree or serial, got '" + c + "'");
  p.acc = dtype("acc", "fp32");
  p.partial = dtype("partial", std::string(name(p.acc)));
  const std::string m = str("model", "ieee_rn");
  if (m == "ieee_rn") p.model = AccumModel::ieee_rn;
  else if (m == "mfma_cdna3") p.model = AccumModel::mfma_cdna3;
  else if (m == "mma_sm90") p.model = AccumModel::mma_sm90;
  else throw InputError(where + ".model", "expected ieee_rn, mfma_cdna3 or mma_sm90, got '" + m + "'");
  p.chunk = static_cast<int>(integer("chunk", 8, INT_MIN, INT_MAX));
  p.epilogue_ops = static_cast<int>(integer("epilogue_ops", 0, INT_MIN, INT_MAX));
  p.operand_bits = static_cast<int>(integer("operand_bits", 0, INT_MIN, INT_MAX));
  p.split_run = integer("split_run", 0);
  if (j.contains("exact_epilogue")) {
    const nlohmann::json& v = j.at("exact_epilogue");
    if (!v.is_boolean()) throw InputError(where + ".exact_epilogue", "expected true or false, got " + v.dump());
    p.exact_epilogue = v.get<bool>();
  }
  if (j.contains("rounded_before_epilogue")) {
    const nlohmann::json& v = j.at("rounded_before_epilogue");
    if (!v.is_boolean()) throw InputError(where + ".rounded_before_epilogue", "expected true or false, got " + v.dump());
    p.rounded_before_epilogue = v.get<bool>();
  }
  try {
    p.validate();
  } catch (const InputError& e) {
    const std::string field = where + e.field().substr(std::string("reduction").size());
    throw InputError(field, e.message());
  }
  return p;
}

}  // namespace kgate
