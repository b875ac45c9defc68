#include "oracles/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "oracles/bounds.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/parallel.hpp"

namespace kgate::oracle {

std::string_view name(State s) {
  switch (s) {
    case State::passed: return "passed";
    case State::failed: return "failed";
    case State::untrusted: return "untrusted";
    case State::not_applicable: return "n/a";
    case State::skipped: return "skipped";
    case State::unimplemented: return "unimplemented";
    case State::invalid: return "invalid";
  }
  return "?";
}

Dims unravel(std::int64_t index, const Dims& dims) {
  Dims c(dims.size());
  for (std::size_t k = dims.size(); k-- > 0;) {
    c[k] = index % dims[k];
    index /= dims[k];
  }
  return c;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The value a correct kernel's result must have in dst when it is exact:
// the reference rounded once.
double round_once(DType t, double v) {
  double buf = 0;
  unsigned char b[8];
  store(t, b, 0, v);
  buf = load(t, b, 0);
  return buf;
}

// Largest finite magnitude that does not round to Inf in dst.
double overflow_threshold(DType t) {
  switch (t) {
    case DType::fp64: return std::numeric_limits<double>::max();
    case DType::fp32: return std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
    case DType::bf16: return std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
    case DType::fp16: return 65520.0;
  }
  return kInf;
}

// Keeps the n largest margins; among equal margins the lower index. A total
// order, so the kept set does not depend on the order of the offers (the
// element threads' chunks merge into the same worst elements).
class WorstKeeper {
 public:
  explicit WorstKeeper(int n) : n_(n) {}
  void offer(const WorstElement& w) {
    if (n_ <= 0) return;
    if (static_cast<int>(v_.size()) < n_) {
      v_.push_back(w);
      std::push_heap(v_.begin(), v_.end(), better);
    } else if (better(w, v_.front())) {
      std::pop_heap(v_.begin(), v_.end(), better);
      v_.back() = w;
      std::push_heap(v_.begin(), v_.end(), better);
    }
  }
  void merge(const WorstKeeper& other) {
    for (const auto& w : other.v_) offer(w);
  }
  std::vector<WorstElement> take(const Dims& dims) {
    std::sort(v_.begin(), v_.end(), better);
    for (auto& w : v_) w.coord = unravel(w.index, dims);
    return std::move(v_);
  }

 private:
  // The heap's front is the kept element that every other one beats.
  static bool better(const WorstElement& a, const WorstElement& b) {
    return a.margin > b.margin || (a.margin == b.margin && a.index < b.index);
  }
  int n_;
  std::vector<WorstElement> v_;
};

// NaN/Inf class agreement of one element. Returns true when the classes agree
// (both finite counts as agreement; finite vs Inf agrees when the reference
// can round to Inf in dst within `bound`).
bool classes_agree(double ref, double cand, double bound, DType dst, bool* nan_bad, bool* inf_bad) {
  *nan_bad = *inf_bad = false;
  const bool rn = std::isnan(ref), cn = std::isnan(cand);
  if (rn || cn) {
    *nan_bad = rn != cn;
    return !*nan_bad;
  }
  const bool ri = std::isinf(ref), ci = std::isinf(cand);
  if (!ri && !ci) return true;
  if (ri && ci) {
    *inf_bad = std::signbit(ref) != std::signbit(cand);
    return !*inf_bad;
  }
  const double thr = overflow_threshold(dst);
  if (ci) {  // finite reference, infinite candidate: fine if the true value may round to Inf
    *inf_bad = !(std::fabs(ref) + bound >= thr && std::signbit(ref) == std::signbit(cand));
  } else {  // infinite reference, finite candidate
    *inf_bad = true;
  }
  return !*inf_bad;
}

void finish_tier(TierResult& t, WorstKeeper& k, const Dims& dims, const char* what) {
  t.worst = k.take(dims);
  if (t.state == State::not_applicable) return;
  if (t.violations > 0) {
    t.state = State::failed;
    std::ostringstream o;
    o << t.violations << " of " << t.checked << " elements exceed the " << what << " (max margin "
      << std::setprecision(4) << t.max_margin << ")";
    t.reason = o.str();
  } else {
    t.state = State::passed;
  }
}

}  // namespace

Report decide(const ElementwiseCheck& c, const Tensor& reference, const Tensor& candidate, const Options& opt) {
  const std::int64_t n = reference.numel();
  if (reference.dtype() != DType::fp64) throw std::invalid_argument("oracle: reference must be fp64");
  if (candidate.dims() != reference.dims())
    throw std::invalid_argument("oracle: candidate dims " + dims_string(candidate.dims()) + " != reference dims " +
                                dims_string(reference.dims()));
  if (static_cast<std::int64_t>(c.bound2.size()) != n) throw std::invalid_argument("oracle: bound2 size");
  Report r;
  r.what = c.what;
  r.descriptor = c.descriptor;
  r.fill = c.fill;
  r.plan = c.plan;
  r.numel = n;
  r.depth = c.depth;
  r.u_acc = c.u_acc;
  r.u_out = c.u_out;
  r.lambda = c.lambda;

  const bool t1 = !c.exact_ok.empty();
  // A bound that is +Inf or NaN somewhere (gamma_D(u) with D*u >= 1: a
  // sequential fp32 sum of 2^24 or more terms in an unknown order) bounds
  // nothing: tier 2 (and tier 3, which rests on the same depth) does not
  // apply to this output rather than pass or fail. NaN elements (Inf * 0 of
  // a zero companion) are the same formula and are not a kernel's error.
  std::int64_t unbounded_at = -1;
  for (std::int64_t i = 0; i < n && unbounded_at < 0; ++i)
    if (!std::isfinite(c.bound2[i])) unbounded_at = i;
  const bool t2 = unbounded_at < 0;
  const bool t3 = t2 && !c.bound3.empty();
  r.tier1.state = t1 ? State::passed : State::not_applicable;
  r.tier2.state = t2 ? State::passed : State::not_applicable;
  r.tier3.state = t3 ? State::passed : State::not_applicable;
  if (!t1) r.tier1.reason = c.tier1_reason;
  if (!t2) {
    std::ostringstream o;
    o << "no finite rigorous bound (element " << unbounded_at << "): gamma_D(u) with D = " << c.depth
      << ", u = " << c.u_acc << " has D*u >= 1; a model that names the reduction's order (fp32-split:S) bounds it";
    r.tier2.reason = o.str();
  }
  if (!t3) r.tier3.reason = t2 ? c.tier3_reason : r.tier2.reason;
  // One partial per chunk of elements (reference/parallel.hpp), merged in
  // chunk order: the same report for any number of element threads.
  struct Partial {
    explicit Partial(int w) : k1(w), k2(w), k3(w), ks(w) {}
    TierResult t1, t2, t3;
    WorstKeeper k1, k2, k3, ks;
    std::int64_t nan_mismatch = 0, inf_mismatch = 0, first_index = -1;
    std::int64_t ref_zero = 0, cand_zero = 0, counted = 0, clamped = 0, trust_judged = 0, finite = 0;
    double sum_sq = 0, sum_signed_scaled = 0, sum_signed = 0, max_abs_error = 0, max_scaled = 0;
  };
  const bool relu = !c.relu_clamped.empty();
  std::vector<Partial> parts(static_cast<std::size_t>(chunk_count(n)), Partial(opt.worst_count));
  parallel_chunks(n, [&](std::int64_t lo, std::int64_t hi, std::int64_t chunk) {
    Partial& q = parts[static_cast<std::size_t>(chunk)];
    for (std::int64_t i = lo; i < hi; ++i) {
      const double ref = reference.get(i);
      const double cand = candidate.get(i);
      const double b2 = c.bound2[i];
      bool nan_bad = false, inf_bad = false;
      const bool agree = classes_agree(ref, cand, t2 ? b2 : 0.0, c.dst, &nan_bad, &inf_bad);
      if (!agree) {
        q.nan_mismatch += nan_bad;
        q.inf_mismatch += inf_bad;
        if (q.first_index < 0) q.first_index = i;
        q.ks.offer({i, {}, ref, cand, b2, kInf});
        // A class mismatch is a violation of every applicable tier.
        if (t1 && c.exact_ok[i]) {
          ++q.t1.checked;
          ++q.t1.violations;
          q.t1.max_margin = kInf;
          q.k1.offer({i, {}, ref, cand, b2, kInf});
        }
        if (t2) {
          ++q.t2.checked;
          ++q.t2.violations;
          q.t2.max_margin = kInf;
          q.k2.offer({i, {}, ref, cand, b2, kInf});
        }
        if (t3) {
          ++q.t3.checked;
          ++q.t3.violations;
          q.t3.max_margin = kInf;
          q.k3.offer({i, {}, ref, cand, c.bound3[i], kInf});
        }
        continue;
      }
      if (std::isnan(ref) || std::isinf(ref) || std::isinf(cand)) continue;  // agreeing specials
      // Trust counts (TrustResult): a reference element "within its bound of
      // zero" is one where a zero candidate passes every tier that applies to
      // it; a clamped ReLU output is zero by construction.
      if (relu && c.relu_clamped[i]) {
        ++q.clamped;
      } else {
        ++q.trust_judged;
        const bool t1_zero = !(t1 && c.exact_ok[i]) || round_once(c.dst, ref) == 0.0;
        q.ref_zero += t1_zero && (!t2 || std::fabs(ref) <= b2) && (!t3 || std::fabs(ref) <= c.bound3[i]);
        q.cand_zero += cand == 0.0;
      }
      ++q.finite;
      const double e = std::fabs(cand - ref);
      // Tier 1: bitwise against the reference rounded once (+0 == -0: the sign
      // of an exact zero sum depends on the accumulator's initial value).
      if (t1) {
        if (c.exact_ok[i]) {
          ++q.t1.checked;
          const double want = round_once(c.dst, ref);
          if (cand != want) {
            ++q.t1.violations;
            q.t1.max_margin = kInf;
            q.k1.offer({i, {}, ref, cand, 0.0, kInf});
          }
        } else {
          ++q.t1.excluded;
        }
      }
      auto judge = [&](TierResult& t, WorstKeeper& k, double b) {
        ++t.checked;
        const double m = b > 0 ? e / b : (e > 0 ? kInf : 0.0);
        if (m > 1.0) ++t.violations;
        t.max_margin = std::max(t.max_margin, m);
        k.offer({i, {}, ref, cand, b, m});
      };
      if (t2) judge(q.t2, q.k2, b2);
      if (t3) judge(q.t3, q.k3, c.bound3[i]);
      q.max_abs_error = std::max(q.max_abs_error, e);
      q.sum_signed += cand - ref;
      if (!c.scale.empty() && c.scale[i] > 0) {
        const double sc = e / c.scale[i];
        q.max_scaled = std::max(q.max_scaled, sc);
        q.sum_sq += sc * sc;
        q.sum_signed_scaled += (cand - ref) / c.scale[i];
        ++q.counted;
      }
    }
  });
  WorstKeeper k1(opt.worst_count), k2(opt.worst_count), k3(opt.worst_count), ks(opt.worst_count);
  std::int64_t ref_zero = 0, cand_zero = 0, counted = 0, clamped = 0, trust_judged = 0, finite = 0;
  double sum_sq = 0, sum_signed_scaled = 0, sum_signed = 0;
  auto add_tier = [](TierResult& to, const TierResult& from) {
    to.checked += from.checked;
    to.excluded += from.excluded;
    to.violations += from.violations;
    to.max_margin = std::max(to.max_margin, from.max_margin);
  };
  for (const Partial& q : parts) {
    add_tier(r.tier1, q.t1);
    add_tier(r.tier2, q.t2);
    add_tier(r.tier3, q.t3);
    k1.merge(q.k1);
    k2.merge(q.k2);
    k3.merge(q.k3);
    ks.merge(q.ks);
    r.specials.nan_mismatch += q.nan_mismatch;
    r.specials.inf_mismatch += q.inf_mismatch;
    if (r.specials.first_index < 0) r.specials.first_index = q.first_index;
    ref_zero += q.ref_zero;
    cand_zero += q.cand_zero;
    counted += q.counted;
    clamped += q.clamped;
    trust_judged += q.trust_judged;
    finite += q.finite;
    sum_sq += q.sum_sq;
    sum_signed_scaled += q.sum_signed_scaled;
    sum_signed += q.sum_signed;
    r.stats.max_abs_error = std::max(r.stats.max_abs_error, q.max_abs_error);
    r.stats.max_scaled = std::max(r.stats.max_scaled, q.max_scaled);
  }
  r.stats.count = counted;
  if (counted) {
    r.stats.rms_scaled = std::sqrt(sum_sq / static_cast<double>(counted));
    r.stats.mean_signed_scaled = sum_signed_scaled / static_cast<double>(counted);
  }
  if (finite) r.stats.mean_signed_error = sum_signed / static_cast<double>(finite);

  finish_tier(r.tier1, k1, c.dims, "exact result (tier 1)");
  finish_tier(r.tier2, k2, c.dims, "rigorous bound (tier 2)");
  finish_tier(r.tier3, k3, c.dims, "probabilistic bound (tier 3)");
  if (t1 && r.tier1.checked == 0 && r.tier1.violations == 0) {
    r.tier1.state = State::not_applicable;
    r.tier1.reason = "no element has A_i <= 2^digits: exactness not guaranteed for any element";
  }
  r.specials.examples = ks.take(c.dims);
  if (r.specials.nan_mismatch || r.specials.inf_mismatch) r.specials.state = State::failed;

  // Trust: a zero-heavy reference proves nothing; a candidate with far more
  // zeros than the reference did not compute (benchdnn's "mistrusted").
  auto share = [](std::int64_t k, std::int64_t of) { return of ? static_cast<double>(k) / static_cast<double>(of) : 1.0; };
  r.trust.ref_zero_fraction = share(ref_zero, trust_judged);
  r.trust.cand_zero_fraction = share(cand_zero, trust_judged);
  r.trust.relu_clamped_fraction = relu ? share(clamped, n) : 0.0;
  std::ostringstream why;
  bool nothing = true;
  if (finite == 0) {
    why << "no finite reference element to compare";
  } else if (!t2 && r.tier1.state != State::passed) {
    why << "no tier bounds this comparison: " << r.tier2.reason;
  } else if (!t2 && r.tier1.excluded > 0) {
    why << "tier 1 checked " << r.tier1.checked << " of " << (r.tier1.checked + r.tier1.excluded)
        << " elements and no rigorous bound covers the rest: " << r.tier2.reason;
  } else if (r.trust.relu_clamped_fraction > opt.max_ref_zero_fraction || trust_judged == 0) {
    why << "the fused ReLU clamps " << r.trust.relu_clamped_fraction * 100 << "% of the outputs to zero (> "
        << opt.max_ref_zero_fraction * 100 << "%): the comparison proves nothing";
  } else if (r.trust.ref_zero_fraction > opt.max_ref_zero_fraction) {
    why << "reference is " << r.trust.ref_zero_fraction * 100 << "% zeros or within its bound of zero (> "
        << opt.max_ref_zero_fraction * 100 << "%" << (relu ? " of the elements the ReLU passes" : "")
        << "): the comparison proves nothing";
  } else if (r.trust.cand_zero_fraction > r.trust.ref_zero_fraction + opt.max_extra_zero_fraction) {
    nothing = false;
    why << "candidate is " << r.trust.cand_zero_fraction * 100 << "% zeros, reference "
        << r.trust.ref_zero_fraction * 100 << "%";
  }
  if (!why.str().empty()) {
    r.trust.state = State::untrusted;
    r.trust.proves_nothing = nothing;
    r.trust.reason = why.str();
  }

  const bool any_fail = r.tier1.state == State::failed || r.tier2.state == State::failed ||
                        r.tier3.state == State::failed || r.specials.state == State::failed;
  r.state = any_fail ? State::failed : r.trust.state == State::untrusted ? State::untrusted : State::passed;
  return r;
}

// ---------------------------------------------------------------------------
// Convolution

Report compare_conv(const ConvProblem& p, Role output, const Tensor& reference, const Tensor& abs_companion,
                    const Tensor& candidate, const ReductionPlan& plan, const Fill& fill, const Tensor* bias,
                    const Options& opt) {
  plan.validate();
  const std::int64_t n = reference.numel();
  if (abs_companion.dims() != reference.dims() || abs_companion.dtype() != DType::fp64)
    throw std::invalid_argument("compare_conv: abs_companion must be fp64 with the reference's dims");
  const bool is_db = output == Role::db;
  const bool has_bias = bias != nullptr && p.dir == ConvDir::fwd && output == Role::y;
  if (has_bias && bias->numel() != p.cout) throw std::invalid_argument("compare_conv: bias must have cout elements");

  ElementwiseCheck c;
  c.what = std::string(op_dir_name(Problem{p})) + " " + std::string(name(output));
  c.descriptor = to_descriptor(p);
  c.fill = fill_string(fill) + " seed=" + std::to_string(fill.seed);
  c.plan = to_string(plan);
  c.dst = candidate.dtype();
  c.dims = reference.dims();
  // db sums dy alone: its terms are not products.
  const DType src_for_depth = is_db ? DType::bf16 : p.src;
  c.depth = term_depth(plan, src_for_depth);
  c.u_acc = accumulation_u(plan);
  c.u_out = output_u(c.dst);
  const double rel2 = rigorous_relative(plan, src_for_depth);
  const double floor = underflow_floor(plan, src_for_depth, c.dst);
  const std::int64_t k = std::max<std::int64_t>(1, is_db ? plan.length * plan.splits : p.reduction_length());
  const double rel_ref = reference_relative(k + 2);
  const bool t3 =
      plan.model == AccumModel::ieee_rn && plan.length <= opt.tier3_max_sequential && plan.operand_bits == 0;
  if (plan.model == AccumModel::ieee_rn && !t3)
    c.tier3_reason = "sequential length " + std::to_string(plan.length) + " > " +
                     std::to_string(opt.tier3_max_sequential) +
                     ": same-sign stagnation makes rounding errors biased (Options::tier3_max_sequential)";
  if (t3) {
    const double roundings =
        std::max({opt.run_roundings, opt.min_run_roundings, static_cast<double>(n) * static_cast<double>(c.depth)});
    c.lambda = hm_lambda(roundings, c.u_acc, opt.p_false);
  } else if (plan.operand_bits > 0) {
    // The operands' roundings are fixed by the inputs (one per input element,
    // shared by every product it enters), not independent per product.
    c.tier3_reason = "operands rounded to " + std::to_string(plan.operand_bits) +
                     " bits before the products: those errors are shared between terms, not independent";
  } else if (plan.model == AccumModel::mfma_cdna3) {
    c.tier3_reason = "truncating MFMA accumulation (mfma_cdna3): rounding errors are biased, not independent";
  } else if (plan.model == AccumModel::mma_sm90) {
    // Round-toward-zero is one-sided: the errors of a K loop add up like D u,
    // not like sqrt(D) u, so the probabilistic tier does not hold.
    c.tier3_reason = "round-toward-zero mma.sync accumulation (mma_sm90): errors are one-sided, a bias";
  }
  const double rel3 = t3 ? probabilistic_relative(plan, src_for_depth, c.lambda) : 0.0;
  const int epi = plan.epilogue_ops + (has_bias && plan.epilogue_ops == 0 ? 1 : 0);

  // Tier 1 applies to lattice fills: integers, so every partial sum is an
  // exact integer in the accumulator while A_i (+|b|) <= 2^digits.
  const bool t1 = fill.kind == FillKind::lattice;
  const int digits = std::min({significand_bits(c.dst), significand_bits(plan.acc),
                               plan.narrow_partials() ? significand_bits(plan.partial) : 99});
  const double exact_limit = std::ldexp(1.0, digits);
  if (!t1) c.tier1_reason = "fill '" + std::string(name(fill.kind)) + "' is not a lattice fill";
  if (t1 && plan.model != AccumModel::ieee_rn) {
    // Integers in chunks: alignment to the chunk max keeps 24 fractional bits,
    // so integer products below 2^24 are never truncated; the same limit holds.
  }
  // Operands rounded to operand_bits (tf32: 11) keep the lattice fill's
  // integers (|v| <= lattice_max(role) = 4) exact: tier 1 holds unchanged.

  const std::int64_t cout = p.cout;
  c.bound2.resize(n);
  if (t3) c.bound3.resize(n);
  c.scale.resize(n);
  if (t1) c.exact_ok.resize(n);
  const double sqrt_d = std::sqrt(static_cast<double>(c.depth));
  for_each_element(n, [&](std::int64_t i) {
    const double a = abs_companion.get(i);
    const double y = std::fabs(reference.get(i));
    const double b = has_bias ? std::fabs(bias->get(i % cout)) : 0.0;
    // A sum rounded to the output dtype before the bias is added errs by up
    // to u_out of |sum| <= |y| + |b| more.
    const double epi_term = epi * c.u_acc * (y + b) + (plan.rounded_before_epilogue && epi > 0 ? c.u_out * (y + b) : 0.0);
    const double common = c.u_out * y + floor + rel_ref * a + epi_term;
    c.bound2[i] = rel2 * a * (1.0 + c.u_out) + common;
    if (t3) c.bound3[i] = std::min(c.bound2[i], rel3 * a * (1.0 + c.u_out) + common);
    c.scale[i] = c.u_acc * sqrt_d * a;
    if (t1) c.exact_ok[i] = a <= exact_limit;  // A includes |b|
  });
  return decide(c, reference, candidate, opt);
}

}  // namespace kgate::oracle
