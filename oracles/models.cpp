#include "oracles/models.hpp"

#include <algorithm>
#include <charconv>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"

namespace kgate::oracle {

namespace {

constexpr int kTf32Bits = 11;           // tf32: 10 stored significand bits + the implicit one
constexpr std::int64_t kMaxSplits = std::int64_t{1} << 30;

std::int64_t parse_splits(const std::string& text, const std::string& digits) {
  std::int64_t s = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), s);
  if (digits.empty() || r.ec != std::errc{} || r.ptr != digits.data() + digits.size() || s < 1 || s > kMaxSplits)
    throw InputError("--model", "'" + text + "': S must be an integer in [1, 2^30]");
  return s;
}

// A sum of k terms under m (terms: products, or for db and GroupNorm the
// values themselves).
ReductionPlan reduction(const Model& m, std::int64_t k) {
  k = std::max<std::int64_t>(k, 1);
  ReductionPlan r = ReductionPlan::sequential(k);
  switch (m.kind) {
    case Model::Kind::any_order: break;
    case Model::Kind::tf32: r.operand_bits = kTf32Bits; break;
    case Model::Kind::split:
    case Model::Kind::bf16_partials:
      // Any order inside a slice and between the S partials: a serial
      // combine is the deepest.
      r = ReductionPlan::split_k(k, std::min(m.splits, k), PartialCombine::serial);
      if (m.kind == Model::Kind::bf16_partials) r.partial = DType::bf16;
      break;
    case Model::Kind::mma_sm90:
      r.model = AccumModel::mma_sm90;
      r.chunk = 16;
      break;
    case Model::Kind::mfma_cdna3:
      r.model = AccumModel::mfma_cdna3;
      r.chunk = 8;
      break;
  }
  return r;
}

}  // namespace

std::string Model::name() const {
  switch (kind) {
    case Kind::any_order: return "fp32-any-order";
    case Kind::split: return "fp32-split:" + std::to_string(splits);
    case Kind::tf32: return "tf32";
    case Kind::bf16_partials: return "bf16-partials:" + std::to_string(splits);
    case Kind::mma_sm90: return "mma-sm90";
    case Kind::mfma_cdna3: return "mfma-cdna3";
  }
  return "?";
}

std::string model_help() {
  return "fp32-any-order | fp32-split:S | tf32 | bf16-partials:S | mma-sm90 | mfma-cdna3";
}

Model parse_model(const std::string& text) {
  Model m;
  const auto colon = text.find(':');
  const std::string head = text.substr(0, colon);
  if (colon == std::string::npos) {
    if (text == "fp32-any-order") m.kind = Model::Kind::any_order;
    else if (text == "tf32") m.kind = Model::Kind::tf32;
    else if (text == "mma-sm90") m.kind = Model::Kind::mma_sm90;
    else if (text == "mfma-cdna3") m.kind = Model::Kind::mfma_cdna3;
    else if (text == "fp32-split" || text == "bf16-partials")
      throw InputError("--model", "'" + text + "' needs its slice count, e.g. " + text + ":8");
    else throw InputError("--model", "unknown model '" + text + "' (" + model_help() + ")");
    return m;
  }
  if (head == "fp32-split") m.kind = Model::Kind::split;
  else if (head == "bf16-partials") m.kind = Model::Kind::bf16_partials;
  else throw InputError("--model", "unknown model '" + text + "' (" + model_help() + ")");
  m.splits = parse_splits(text, text.substr(colon + 1));
  return m;
}

std::map<std::string, ReductionPlan> model_reductions(const Problem& p, const Model& m) {
  std::map<std::string, ReductionPlan> out;
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    if ((m.kind == Model::Kind::mma_sm90 || m.kind == Model::Kind::mfma_cdna3) && c->src == DType::fp32)
      throw InputError("--model", m.name() + " models bf16 / fp16 matrix-core inputs; '" + to_descriptor(p) +
                                      "' has fp32 inputs (tensor cores on fp32 inputs: tf32)");
    for (const auto& s : c->outputs()) {
      if (s.role == Role::db) {
        // db sums dy over the batch and every position of dy.
        const Dims d = c->y_dims();
        std::int64_t k = 1;
        for (std::size_t i = 0; i + 1 < d.size(); ++i) k *= d[i];
        ReductionPlan r = reduction(m, k);
        r.operand_bits = 0;  // no products
        out[std::string(name(s.role))] = r;
        continue;
      }
      ReductionPlan r = reduction(m, c->reduction_length());
      if (c->dir == ConvDir::fwd && c->bias) {
        r.epilogue_ops = 1;
        r.rounded_before_epilogue = true;
      }
      out[std::string(name(s.role))] = r;
    }
    return out;
  }
  const auto& g = std::get<GroupNormProblem>(p);
  if (m.kind != Model::Kind::any_order && m.kind != Model::Kind::split)
    throw InputError("--model", m.name() + " does not apply to GroupNorm (its bounds are derived for fp32 "
                                            "statistics: fp32-any-order or fp32-split:S)");
  const std::int64_t positions = g.spatial[0] * g.spatial[1] * g.spatial[2];
  const std::int64_t group = g.c / g.groups * positions;
  if (g.dir == GnDir::fwd) {
    const ReductionPlan stats = reduction(m, group);
    ReductionPlan y = stats;
    y.epilogue_ops = 4;  // (x - mean) * rstd * gamma + beta, in some association
    y.exact_epilogue = false;  // e.g. ATen's x * s + (beta - mean * s)
    out = {{"y", y}, {"mean", stats}, {"rstd", stats}};
  } else {
    ReductionPlan dx = reduction(m, group), params = reduction(m, g.n * positions);
    dx.epilogue_ops = 5;
    params.epilogue_ops = 1;
    out = {{"dx", dx}, {"dgamma", params}, {"dbeta", params}};
  }
  return out;
}

}  // namespace kgate::oracle
