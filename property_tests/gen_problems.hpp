// RapidCheck generators of valid problems, sized so that one case stays
// cheap on the host backend. Every generated value shrinks toward the
// smallest problem (n 1, one group, one channel, extent 1, fp32).
#pragma once

#include <rapidcheck.h>

#include "reference/descriptor.hpp"
#include "reference/fill.hpp"
#include "reference/problem.hpp"

namespace kgate::prop {

// GroupNorm problems: groups dividing channels, small extents, eps, affine,
// fused ReLU, every supported dtype pair, both directions.
inline rc::Gen<GroupNormProblem> gen_groupnorm() {
  return rc::gen::exec([] {
    GroupNormProblem p;
    p.dir = *rc::gen::element(GnDir::fwd, GnDir::bwd);
    p.n = *rc::gen::inRange<std::int64_t>(1, 3);
    p.groups = *rc::gen::inRange<std::int64_t>(1, 9);
    p.c = p.groups * *rc::gen::inRange<std::int64_t>(1, 17);
    for (auto& s : p.spatial) s = *rc::gen::inRange<std::int64_t>(1, 7);
    p.eps = *rc::gen::element(1e-5, 1e-3, 0.1);
    p.affine = *rc::gen::element(true, false);
    p.relu = *rc::gen::element(false, true);
    p.src = *rc::gen::element(DType::fp32, DType::bf16, DType::fp16);
    p.dst = *rc::gen::element(DType::fp32, p.src);
    p.validate();
    return p;
  });
}

// A fill for a GroupNorm problem: signed random, the exact pair-symmetric
// fill (constant groups included), or a large-mean / small-variance sweep.
inline rc::Gen<Fill> gen_groupnorm_fill() {
  return rc::gen::exec([] {
    const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1000000);
    switch (*rc::gen::inRange(0, 4)) {
      case 0: return parse_fill("signed", seed);
      case 1: {
        Fill f = parse_fill("gn_exact", seed);
        f.mean = *rc::gen::element(0.0, 16.0, 1024.0);
        f.constant = *rc::gen::element(false, true);
        return f;
      }
      case 2: {
        Fill f = parse_fill("gn_sweep", seed);
        f.mean = *rc::gen::element(1.0, 100.0, 1e4, 1e6);
        f.sigma = *rc::gen::element(1.0, 0.01);
        return f;
      }
      default: return parse_fill("positive", seed);
    }
  });
}

}  // namespace kgate::prop

namespace rc {
template <>
struct Arbitrary<kgate::GroupNormProblem> {
  static Gen<kgate::GroupNormProblem> arbitrary() { return kgate::prop::gen_groupnorm(); }
};
}  // namespace rc

namespace kgate {
// RapidCheck prints a counterexample through this: the descriptor.
inline void showValue(const GroupNormProblem& p, std::ostream& os) { os << to_descriptor(p); }
inline void showValue(const Fill& f, std::ostream& os) { os << "--fill " << fill_string(f) << " --seed " << f.seed; }
}  // namespace kgate
