#include "oracles/sim/selftest.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"

namespace kgate::sim {

namespace {

using oracle::Report;
using oracle::State;

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::int64_t in(std::int64_t lo, std::int64_t hi) { return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
};

std::vector<Strategy> strategies() {
  return {{Order::sequential, 0},  {Order::reversed, 0},     {Order::pairwise, 0},
          {Order::blocked, 64},    {Order::split_tree, 8},   {Order::split_serial, 4},
          {Order::mfma, 0},        {Order::split_tree, 4, DType::bf16}};
}

Fill make_fill(FillKind k, const ConvProblem& p, std::uint64_t seed) {
  if (k == FillKind::lattice) return lattice_fill(Problem{p}, seed);
  Fill f;
  f.kind = k;
  f.seed = seed;
  f.scale = (k == FillKind::positive && p.src == DType::fp16) ? 0.5 : 1.0;
  return f;
}

struct Acc {
  Campaign& c;
  std::map<std::string, std::size_t> row_index;
  std::map<std::pair<std::string, std::string>, std::size_t> tight_index;

  FalseAlarmRow& row(const std::string& g, const std::string& s) {
    const std::string key = g + "|" + s;
    auto it = row_index.find(key);
    if (it == row_index.end()) {
      it = row_index.emplace(key, c.rows.size()).first;
      c.rows.push_back({});
      c.rows.back().group = g;
      c.rows.back().strategy = s;
    }
    return c.rows[it->second];
  }
  TightnessRow& tight(const std::string& d, const std::string& t) {
    const auto key = std::make_pair(d, t);
    auto it = tight_index.find(key);
    if (it == tight_index.end()) {
      it = tight_index.emplace(key, c.tightness.size()).first;
      c.tightness.push_back({});
      c.tightness.back().direction = d;
      c.tightness.back().dtypes = t;
    }
    return c.tightness[it->second];
  }
  // dtypes: "src->dst".
  void add(const std::string& group, const std::string& strat, const std::string& dtypes, bool exact_fill,
           const Report& r) {
    FalseAlarmRow& w = row(group, strat);
    ++w.cases;
    w.elements += r.numel;
    ++c.total_cases;
    c.total_elements += r.numel;
    if (r.state == State::untrusted && r.trust.proves_nothing) {
      ++c.total_unprovable;
      if (c.unprovable_examples.size() < 2) c.unprovable_examples.push_back(oracle::to_table(r));
    } else if (!r.passed()) {
      ++w.failures;
      ++c.total_failures;
      if (w.failure_examples.size() < 2) w.failure_examples.push_back(oracle::to_table(r));
    }
    w.tier1_checked += r.tier1.checked;
    if (r.tier1.state != State::not_applicable) c.max_margin1 = std::max(c.max_margin1, r.tier1.max_margin);
    w.max_margin2 = std::max(w.max_margin2, r.tier2.max_margin);
    c.max_margin2 = std::max(c.max_margin2, r.tier2.max_margin);
    if (r.tier3.state != State::not_applicable) {
      ++w.tier3_cases;
      w.max_margin3 = std::max(w.max_margin3, r.tier3.max_margin);
      c.max_margin3 = std::max(c.max_margin3, r.tier3.max_margin);
    }
    // Tightness: random fills only (lattice results are exact), fp32
    // partials only (bf16 partials are dominated by their own rounding).
    if (!exact_fill && strat.find("partials") == std::string::npos) {
      TightnessRow& t = tight(group, dtypes);
      if (strat.rfind("mfma", 0) == 0 && r.tier3.state == State::not_applicable) {
        ++t.mfma_cases;
        t.max_margin2_mfma = std::max(t.max_margin2_mfma, r.tier2.max_margin);
      } else {
        ++t.cases;
        t.max_margin2 = std::max(t.max_margin2, r.tier2.max_margin);
        if (r.tier3.state != State::not_applicable) t.max_margin3 = std::max(t.max_margin3, r.tier3.max_margin);
      }
    }
  }
};

std::string pair_name(DType a, DType b) { return std::string(name(a)) + "->" + std::string(name(b)); }

void run_conv_case(Acc& acc, const std::string& group, const ConvProblem& p, FillKind fk, std::uint64_t seed,
                   const std::vector<Strategy>& strats) {
  const Fill f = make_fill(fk, p, seed);
  const ConvCase cc = make_conv_case(p, f);
  for (const Strategy& s : strats) {
    if (s.order == Order::mfma && p.src == DType::fp32 && s.partial != DType::fp32) continue;
    ReductionPlan plan = plan_of(s, cc.kmax, p.src);
    if (cc.bias.numel()) plan.epilogue_ops = 1;
    const Tensor y = run_conv(cc, s);
    const Report r = oracle::compare_conv(p, cc.out, cc.ref, cc.abs, y, plan, f, cc.bias.numel() ? &cc.bias : nullptr);
    acc.add(group, s.label(), pair_name(p.src, p.dst), fk == FillKind::lattice, r);
  }
}

std::string dir_group(const ConvProblem& p) { return op_dir_name(Problem{p}); }

// A random valid small conv problem.
ConvProblem random_conv(Rng& rng) {
  for (;;) {
    ConvProblem p;
    p.op = rng.in(0, 1) ? ConvOp::conv_transpose3d : ConvOp::conv3d;
    p.dir = static_cast<ConvDir>(rng.in(0, 2));
    p.n = rng.in(1, 2);
    p.groups = rng.in(1, 3) == 3 ? 2 : 1;
    p.cin = p.groups * rng.in(1, 6);
    p.cout = p.groups * rng.in(1, 6);
    for (int a = 0; a < 3; ++a) {
      p.kernel[a] = rng.in(1, 3);
      p.stride[a] = rng.in(1, 2);
      p.dilation[a] = rng.in(1, 4) == 4 ? 2 : 1;
      p.pad_front[a] = rng.in(0, p.kernel[a] - 1);
      p.pad_back[a] = rng.in(0, p.kernel[a] - 1);
      p.in[a] = rng.in(1, 6);
      if (p.op == ConvOp::conv_transpose3d) p.output_padding[a] = rng.in(0, std::max(p.stride[a], p.dilation[a]) - 1);
    }
    p.bias = p.dir == ConvDir::fwd && rng.in(0, 1);
    try {
      p.validate();
      return p;
    } catch (const InputError&) {
    }
  }
}

}  // namespace

Campaign run_false_alarm_campaign(bool quick) {
  Campaign c;
  Acc acc{c, {}, {}};
  const auto strats = strategies();
  const DType dtypes[] = {DType::fp32, DType::bf16, DType::fp16};
  const FillKind fills[] = {FillKind::signed_, FillKind::positive, FillKind::lattice};
  std::uint64_t seed = 1;

  // A. Long dot products: conv3d backward-weight with a 1x1x1 kernel, K = the
  // spatial volume, cin*cout independent dot products per case.
  const std::int64_t ks[] = {16, 255, 4096, 65536, 262144};
  for (std::int64_t k : ks) {
    if (quick && k > 4096) continue;
    for (DType t : dtypes)
      for (FillKind fk : fills) {
        ConvProblem p;
        p.dir = ConvDir::bwd_weight;
        const std::int64_t ch = k >= 65536 ? 4 : k >= 4096 ? 8 : 32;
        p.cin = p.cout = ch;
        p.in = {1, 1, k};
        p.src = t;
        p.dst = (seed % 2 && t != DType::fp32) ? DType::fp32 : t;
        run_conv_case(acc, "dot K=" + std::to_string(k), p, fk, seed++, strats);
      }
  }
  // B. Small genuine problems through every op and direction.
  Rng rng{12345};
  const int problems = quick ? 24 : 160;
  for (int i = 0; i < problems; ++i) {
    ConvProblem base = random_conv(rng);
    // A problem whose outputs mostly see no term (every tap in padding) has
    // a zero reference: the oracle rightly calls that untrusted
    // (test_checks), so the campaign draws another.
    for (;;) {
      const ConvCase probe = make_conv_case(base, make_fill(FillKind::signed_, base, 1));
      std::int64_t empty = 0;
      for (std::int64_t e = 0; e < probe.ref.numel(); ++e) empty += probe.terms.start[e] == probe.terms.start[e + 1];
      if (empty * 4 < probe.ref.numel()) break;
      ++c.degenerate_skipped;
      base = random_conv(rng);
    }
    for (DType t : dtypes)
      for (FillKind fk : fills) {
        ConvProblem p = base;
        p.src = t;
        p.dst = (rng.in(0, 1) && t != DType::fp32) ? DType::fp32 : t;
        run_conv_case(acc, dir_group(p), p, fk, seed++, strats);
      }
  }
  // C. GroupNorm forward and backward.
  const int gn_cases = quick ? 6 : 24;
  for (int i = 0; i < gn_cases; ++i) {
    GroupNormProblem p;
    p.n = rng.in(1, 2);
    p.groups = rng.in(1, 4);
    p.c = p.groups * rng.in(1, 8);
    p.spatial = {rng.in(1, 6), rng.in(1, 8), rng.in(1, 8)};
    p.relu = rng.in(0, 1);
    p.src = dtypes[rng.in(0, 2)];
    p.dst = rng.in(0, 1) ? DType::fp32 : p.src;
    for (GnDir dir : {GnDir::fwd, GnDir::bwd}) {
      p.dir = dir;
      std::vector<Fill> fl;
      Fill f;
      f.seed = seed++;
      f.kind = FillKind::signed_;
      fl.push_back(f);
      f.kind = FillKind::gn_sweep; f.sigma = 1;
      // Cancellation sweep: the largest mean whose x keeps some spread in src.
      f.mean = p.src == DType::fp32 ? 1e3 : p.src == DType::fp16 ? 100 : 10;
      fl.push_back(f);
      f.kind = FillKind::gn_exact; f.mean = 64; f.constant = false; fl.push_back(f);
      if (dir == GnDir::fwd) { f.constant = true; fl.push_back(f); }
      for (const Fill& fill : fl) {
        const GnCase gc = make_gn_case(p, fill);
        for (bool pw : {false, true}) {
          const GnOutputs o = run_gn(gc, pw);
          oracle::GroupNormInputs in;
          in.x = &gc.x;
          in.gamma = p.affine ? &gc.gamma : nullptr;
          in.beta = p.affine ? &gc.beta : nullptr;
          const std::string strat = pw ? "pairwise" : "sequential";
          const std::string grp = op_dir_name(Problem{p});
          if (dir == GnDir::fwd) {
            in.mean = &gc.mean;
            in.rstd = &gc.rstd;
            in.var = &gc.var;
            const ReductionPlan plan = gn_plan(p.group_size(), pw);
            const Report r = oracle::compare_groupnorm(p, Role::y, gc.y_ref, o.y, in, plan, fill);
            // Constant groups: output == beta, the trust check's zero rule does not apply to that design.
            const bool const_fill = fill.kind == FillKind::gn_exact && fill.constant;
            if (!(const_fill && r.state == State::untrusted && r.tier1.state == State::passed))
              acc.add(grp + " y", strat, pair_name(p.src, p.dst), const_fill, r);
            acc.add(grp + " mean", strat, pair_name(p.src, DType::fp32), false,
                    oracle::compare_groupnorm(p, Role::mean, gc.mean, o.mean, in, plan, fill));
            acc.add(grp + " rstd", strat, pair_name(p.src, DType::fp32), false,
                    oracle::compare_groupnorm(p, Role::rstd, gc.rstd, o.rstd, in, plan, fill));
          } else {
            in.dy = &gc.dy;
            in.mean = &gc.mean_fed;
            in.rstd = &gc.rstd_fed;
            const Report r = oracle::compare_groupnorm(p, Role::dx, gc.y_ref, o.y, in, gn_plan(p.group_size(), pw), fill);
            acc.add(grp + " dx", strat, pair_name(p.dst, p.src), false, r);
            const ReductionPlan cplan = gn_plan(p.n * p.spatial[0] * p.spatial[1] * p.spatial[2], pw);
            acc.add(grp + " dgamma", strat, pair_name(p.dst, DType::fp32), false,
                    oracle::compare_groupnorm(p, Role::dgamma, gc.dgamma_ref, o.dgamma, in, cplan, fill));
            acc.add(grp + " dbeta", strat, pair_name(p.dst, DType::fp32), false,
                    oracle::compare_groupnorm(p, Role::dbeta, gc.dbeta_ref, o.dbeta, in, cplan, fill));
          }
        }
      }
    }
  }
  return c;
}

// ---------------------------------------------------------------------------
// Defects

namespace {

DefectRow judge(std::string defect, std::string input, std::string expected, const Report& r) {
  DefectRow d;
  d.defect = std::move(defect);
  d.input = std::move(input);
  d.expected = std::move(expected);
  d.report = r;
  struct T { const char* n; const oracle::TierResult* t; };
  for (T t : {T{"tier1", &r.tier1}, T{"tier2", &r.tier2}, T{"tier3", &r.tier3}}) {
    if (t.t->state == State::failed && d.caught_by.empty()) {
      d.caught_by = t.n;
      d.margin = t.t->max_margin;
    }
  }
  if (r.specials.state == State::failed) d.caught_by += d.caught_by.empty() ? "nan/inf" : "+nan/inf";
  auto failed = [&](const std::string& n) {
    if (n == "tier1") return r.tier1.state == State::failed;
    if (n == "tier2") return r.tier2.state == State::failed;
    if (n == "tier3") return r.tier3.state == State::failed;
    if (n == "nan/inf") return r.specials.state == State::failed;
    return false;
  };
  d.ok = failed(d.expected);
  return d;
}

ConvProblem conv_fwd(DType t, std::int64_t c, std::int64_t d, std::int64_t k, std::int64_t pad) {
  ConvProblem p;
  p.cin = p.cout = c;
  p.in = {d, d, d};
  p.kernel = {k, k, k};
  p.pad_front = p.pad_back = {pad, pad, pad};
  p.src = p.dst = t;
  return p;
}

DefectRow conv_defect(Defect def, const ConvProblem& p, const Fill& f, const Strategy& s, const std::string& expected) {
  const ConvCase cc = make_conv_case(p, f);
  ReductionPlan plan = plan_of(s, cc.kmax, p.src);
  if (cc.bias.numel()) plan.epilogue_ops = 1;
  const Tensor y = run_conv(cc, s, def);
  const Report r = oracle::compare_conv(p, cc.out, cc.ref, cc.abs, y, plan, f, cc.bias.numel() ? &cc.bias : nullptr);
  return judge(std::string(name(def)), to_descriptor(p) + " | " + fill_string(f) + " | " + s.label(), expected, r);
}

DefectRow gn_defect(Defect def, const GroupNormProblem& p, const Fill& f, const std::string& expected) {
  const GnCase gc = make_gn_case(p, f);
  const GnOutputs o = run_gn(gc, false, def);
  oracle::GroupNormInputs in;
  in.x = &gc.x;
  in.gamma = &gc.gamma;
  in.beta = &gc.beta;
  in.mean = &gc.mean;
  in.rstd = &gc.rstd;
  in.var = &gc.var;
  const Report r = oracle::compare_groupnorm(p, Role::y, gc.y_ref, o.y, in, gn_plan(p.group_size(), false), f);
  return judge(std::string(name(def)), to_descriptor(p) + " | " + fill_string(f), expected, r);
}

Fill rand_fill(FillKind k, std::uint64_t seed, double scale = 1.0) {
  Fill f;
  f.kind = k;
  f.seed = seed;
  f.scale = scale;
  return f;
}

}  // namespace

std::vector<DefectRow> run_defect_campaign() {
  std::vector<DefectRow> out;
  const Strategy seq{Order::sequential, 0};
  {
    const ConvProblem p = conv_fwd(DType::bf16, 8, 6, 3, 1);
    out.push_back(conv_defect(Defect::tap_off_by_one, p, lattice_fill(Problem{p}, 11), seq, "tier1"));
    out.push_back(conv_defect(Defect::tap_off_by_one, p, rand_fill(FillKind::signed_, 11), seq, "tier2"));
  }
  {
    ConvProblem p = conv_fwd(DType::bf16, 8, 6, 2, 0);
    p.pad_front = {1, 1, 1};
    p.pad_back = {0, 0, 0};
    out.push_back(conv_defect(Defect::pad_wrong_side, p, lattice_fill(Problem{p}, 12), seq, "tier1"));
    out.push_back(conv_defect(Defect::pad_wrong_side, p, rand_fill(FillKind::signed_, 12), seq, "tier2"));
  }
  {
    const ConvProblem p = conv_fwd(DType::fp16, 8, 5, 3, 1);
    out.push_back(conv_defect(Defect::missing_element, p, lattice_fill(Problem{p}, 13), seq, "nan/inf"));
  }
  {
    ConvProblem p;
    p.dir = ConvDir::bwd_weight;
    p.cin = p.cout = 8;
    p.in = {1, 1, 4096};
    p.src = p.dst = DType::fp32;
    out.push_back(conv_defect(Defect::drop_last_chunk, p, rand_fill(FillKind::signed_, 14), {Order::blocked, 8}, "tier2"));
    p.src = DType::bf16;
    p.dst = DType::fp32;
    p.in = {1, 1, 65536};
    // Tier 2 (gamma_65536 ~ 4e-3) lets the 32 lost terms (~5e-4 of A) through; tier 3 does not.
    out.push_back(conv_defect(Defect::drop_last_chunk, p, rand_fill(FillKind::positive, 14), {Order::sequential}, "tier3"));
  }
  {
    ConvProblem p;
    p.dir = ConvDir::bwd_weight;
    p.cin = p.cout = 8;
    p.in = {1, 1, 1024};
    p.src = DType::bf16;
    p.dst = DType::fp32;
    out.push_back(conv_defect(Defect::bf16_accumulation, p, rand_fill(FillKind::signed_, 15), seq, "tier2"));
  }
  {
    const ConvProblem p = conv_fwd(DType::fp32, 4, 6, 3, 1);  // K = 108
    out.push_back(conv_defect(Defect::tf32_inputs, p, rand_fill(FillKind::signed_, 16), seq, "tier2"));
  }
  {
    const ConvProblem p = conv_fwd(DType::bf16, 2, 5, 3, 1);
    out.push_back(conv_defect(Defect::truncate_output, p, rand_fill(FillKind::positive, 17), seq, "tier2"));
  }
  {
    ConvProblem p = conv_fwd(DType::bf16, 8, 5, 3, 1);
    p.bias = true;
    out.push_back(conv_defect(Defect::wrong_bias_broadcast, p, lattice_fill(Problem{p}, 18), seq, "tier1"));
  }
  {
    GroupNormProblem p;
    p.n = 2;
    p.c = 16;
    p.groups = 4;
    p.spatial = {4, 4, 4};
    p.src = DType::bf16;
    p.dst = DType::fp32;
    out.push_back(gn_defect(Defect::gn_unbiased_var, p, rand_fill(FillKind::signed_, 19), "tier2"));
    Fill small = rand_fill(FillKind::gn_sweep, 20);
    small.mean = 0.0;
    small.sigma = 1e-2;
    out.push_back(gn_defect(Defect::gn_eps_outside_sqrt, p, small, "tier2"));
    p.relu = true;
    out.push_back(gn_defect(Defect::gn_relu_before_affine, p, rand_fill(FillKind::signed_, 21), "tier2"));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Tables

namespace {
std::string g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}
}  // namespace

std::string format_false_alarms(const Campaign& c) {
  std::ostringstream o;
  o << "False alarms (correct simulated kernels; a case = one compare of one output tensor)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %-26s %7s %10s %6s %9s %10s %10s\n", "group", "strategy", "cases", "elements",
                "fails", "t1-exact", "t2 margin", "t3 margin");
  o << line;
  for (const auto& r : c.rows) {
    std::snprintf(line, sizeof line, "%-28s %-26s %7lld %10lld %6lld %9lld %10s %10s\n", r.group.c_str(),
                  r.strategy.c_str(), static_cast<long long>(r.cases), static_cast<long long>(r.elements),
                  static_cast<long long>(r.failures), static_cast<long long>(r.tier1_checked), g(r.max_margin2).c_str(),
                  r.tier3_cases ? g(r.max_margin3).c_str() : "n/a");
    o << line;
  }
  o << "(random problems redrawn because most outputs had no term: " << c.degenerate_skipped << ")\n";
  o << "(comparisons that prove nothing, every tier passed: " << c.total_unprovable << ")\n";
  for (const auto& e : c.unprovable_examples) o << "PROVES NOTHING:\n" << e;
  o << "TOTAL cases " << c.total_cases << ", elements " << c.total_elements << ", failures " << c.total_failures
    << "; largest margin tier1 " << g(c.max_margin1) << " (exact), tier2 " << g(c.max_margin2) << ", tier3 "
    << g(c.max_margin3) << "\n";
  for (const auto& r : c.rows)
    for (const auto& e : r.failure_examples) o << "FAILURE EXAMPLE:\n" << e;
  return o.str();
}

std::string format_tightness(const Campaign& c) {
  std::ostringstream o;
  o << "Tightness: bound / largest error seen on correct kernels (random fills, fp32 partials; 1 = sharp).\n"
       "For bf16/fp16 outputs the output rounding u_out*|y| dominates both tiers.\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %-11s %6s %12s %12s %7s %12s\n", "direction", "src->dst", "cases",
                "t2/maxerr", "t3/maxerr", "mfma", "t2/maxerr");
  o << line;
  auto ratio = [](double m) { return m > 0 ? g(1.0 / m) : std::string("exact"); };
  for (const auto& t : c.tightness) {
    std::snprintf(line, sizeof line, "%-28s %-11s %6lld %12s %12s %7lld %12s\n", t.direction.c_str(),
                  t.dtypes.c_str(), static_cast<long long>(t.cases), ratio(t.max_margin2).c_str(),
                  t.max_margin3 > 0 ? ratio(t.max_margin3).c_str() : "n/a", static_cast<long long>(t.mfma_cases),
                  t.mfma_cases ? ratio(t.max_margin2_mfma).c_str() : "-");
    o << line;
  }
  return o.str();
}

std::string format_defects(const std::vector<DefectRow>& d) {
  std::ostringstream o;
  o << "Planted defects (each must fail the named check)\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-9s %-9s %-8s %-8s %-8s %-10s %-9s %s\n", "defect", "expected", "caught",
                "tier1", "tier2", "tier3", "margin", "result", "input");
  o << line;
  for (const auto& r : d) {
    std::snprintf(line, sizeof line, "%-28s %-9s %-9s %-8s %-8s %-8s %-10s %-9s %s\n", r.defect.c_str(),
                  r.expected.c_str(), r.caught_by.empty() ? "MISSED" : r.caught_by.c_str(),
                  std::string(oracle::name(r.report.tier1.state)).c_str(),
                  std::string(oracle::name(r.report.tier2.state)).c_str(),
                  std::string(oracle::name(r.report.tier3.state)).c_str(), g(r.margin).c_str(),
                  r.ok ? "ok" : "NOT CAUGHT", r.input.c_str());
    o << line;
  }
  return o.str();
}

}  // namespace kgate::sim
