// RapidCheck generators of valid problems, sized so that one case stays
// cheap on the host backend. Every generated value shrinks toward the
// smallest problem (n 1, one group, one channel, extent 1, fp32).
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

// A fill for a GroupNorm problem with `src` inputs: signed random, the exact
// pair-symmetric fill (constant groups included), or a large-mean /
// small-variance sweep whose values `src` holds (fp16 overflows above 65504:
// a group of infinities has statistics that depend on the algorithm, a
// running mean turning Inf into NaN, which is not what the property is
// about).
inline rc::Gen<Fill> gen_groupnorm_fill(DType src) {
  return rc::gen::exec([src] {
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
        std::vector<double> means;
        for (double m : {1.0, 100.0, 1e4, 1e6}) {
          double held = 0;
          store(src, &held, 0, 2 * m);
          if (std::isfinite(load(src, &held, 0))) means.push_back(m);
        }
        f.mean = *rc::gen::elementOf(means);
        f.sigma = *rc::gen::element(1.0, 0.01);
        return f;
      }
      default: return parse_fill("positive", seed);
    }
  });
}


// Convolution problems of every operator-direction: groups, per-axis kernel
// in {1, 2, 3, 5}, stride 1-3, dilation 1-2, asymmetric padding, output
// padding (conv_transpose3d), bias, every supported dtype pair and the three
// shape forms, with small extents (the input grows until the output exists).
inline rc::Gen<ConvProblem> gen_conv() {
  return rc::gen::exec([] {
    ConvProblem p;
    p.op = *rc::gen::element(ConvOp::conv3d, ConvOp::conv_transpose3d);
    p.dir = *rc::gen::element(ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight);
    p.n = *rc::gen::inRange<std::int64_t>(1, 3);
    p.groups = *rc::gen::inRange<std::int64_t>(1, 4);
    p.cin = p.groups * *rc::gen::inRange<std::int64_t>(1, 6);
    p.cout = p.groups * *rc::gen::inRange<std::int64_t>(1, 6);
    p.form = *rc::gen::element(ShapeForm::logical, ShapeForm::halo, ShapeForm::adapter);
    for (int a = 0; a < 3; ++a) {
      p.kernel[a] = *rc::gen::element<std::int64_t>(1, 2, 3, 5);
      p.stride[a] = *rc::gen::inRange<std::int64_t>(1, 4);
      p.dilation[a] = *rc::gen::inRange<std::int64_t>(1, 3);
      p.in[a] = *rc::gen::inRange<std::int64_t>(1, 7);
      if (p.form != ShapeForm::logical) p.halo[a] = *rc::gen::inRange<std::int64_t>(0, 3);
      if (p.form == ShapeForm::halo || p.halo[a] > 0) {
        p.in[a] = std::max(p.in[a], 2 * p.halo[a] + 1);
      } else {
        p.pad_front[a] = *rc::gen::inRange<std::int64_t>(0, 3);
        p.pad_back[a] = *rc::gen::inRange<std::int64_t>(0, 3);
      }
      const std::int64_t span = p.dilation[a] * (p.kernel[a] - 1) + 1;
      if (p.op == ConvOp::conv3d) {
        p.in[a] = std::max(p.in[a], span - p.pad_front[a] - p.pad_back[a]);
      } else {
        p.output_padding[a] = *rc::gen::inRange<std::int64_t>(0, std::max(p.stride[a], p.dilation[a]));
        // out = (in - 1)*s - pads + span + op >= 1
        while ((p.in[a] - 1) * p.stride[a] - p.pad_front[a] - p.pad_back[a] + span + p.output_padding[a] < 1) ++p.in[a];
      }
    }
    if (p.form == ShapeForm::halo && p.halo[0] == 0 && p.halo[1] == 0 && p.halo[2] == 0) {
      p.halo[0] = 1;
      p.pad_front[0] = p.pad_back[0] = 0;
      p.in[0] = std::max<std::int64_t>(p.in[0], 3);
      if (p.op == ConvOp::conv3d) p.in[0] = std::max(p.in[0], p.dilation[0] * (p.kernel[0] - 1) + 1);
    }
    // bwd_data has no bias tensor (its bias gradient is bwd_weight's db).
    p.bias = p.dir != ConvDir::bwd_data && *rc::gen::element(false, true);
    p.src = *rc::gen::element(DType::fp32, DType::bf16, DType::fp16);
    p.dst = *rc::gen::element(DType::fp32, p.src);
    p.validate();
    return p;
  });
}

// Convolution problems the matrix-core kernels run (conv_mma's contract and
// scatter families, conv_wgrad_mma): bf16 / fp16 inputs, 16 or 32 channels
// per group on both sides (and 32 of the large side's where one tap would
// leave backward-weight's M short of a quarter tile), k in {1, 2, 3},
// stride and dilation 1-2, asymmetric padding, bias, and extents grown
// until both tensors have at least 128 positions per batch (a block tile of
// GEMM rows on either side, whichever the direction contracts). Kept small
// otherwise: every product goes through the emulator's atom model.
inline rc::Gen<ConvProblem> gen_conv_mma() {
  return rc::gen::exec([] {
    ConvProblem p;
    p.op = *rc::gen::element(ConvOp::conv3d, ConvOp::conv_transpose3d);
    p.dir = *rc::gen::element(ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight);
    p.n = *rc::gen::inRange<std::int64_t>(1, 3);
    p.groups = *rc::gen::inRange<std::int64_t>(1, 3);
    std::int64_t taps = 1;
    for (int a = 0; a < 3; ++a) {
      p.kernel[a] = *rc::gen::element<std::int64_t>(1, 2, 3);
      p.stride[a] = *rc::gen::inRange<std::int64_t>(1, 3);
      p.dilation[a] = *rc::gen::inRange<std::int64_t>(1, 3);
      p.pad_front[a] = *rc::gen::inRange<std::int64_t>(0, 2);
      p.pad_back[a] = *rc::gen::inRange<std::int64_t>(0, 2);
      p.in[a] = *rc::gen::inRange<std::int64_t>(2, 7);
      taps *= p.kernel[a];
    }
    std::int64_t cin_g = *rc::gen::element<std::int64_t>(16, 32), cout_g = *rc::gen::element<std::int64_t>(16, 32);
    // The large side: conv3d's input, conv_transpose3d's output.
    if (taps == 1) (p.op == ConvOp::conv3d ? cin_g : cout_g) = 32;
    p.cin = p.groups * cin_g;
    p.cout = p.groups * cout_g;
    auto positions = [](const Axis3& e) { return e[0] * e[1] * e[2]; };
    for (int a = 0; a < 3; ++a) {
      const std::int64_t span = p.dilation[a] * (p.kernel[a] - 1) + 1;
      if (p.op == ConvOp::conv3d) p.in[a] = std::max(p.in[a], span - p.pad_front[a] - p.pad_back[a]);
      else
        while ((p.in[a] - 1) * p.stride[a] - p.pad_front[a] - p.pad_back[a] + span < 1) ++p.in[a];
    }
    for (int grow = 0; p.n * std::min(positions(p.in), positions(p.out())) < 128 * p.stride[0] * p.stride[1] * p.stride[2];
         grow = (grow + 1) % 3)
      ++p.in[grow];
    p.bias = p.dir != ConvDir::bwd_data && *rc::gen::element(false, true);
    p.src = *rc::gen::element(DType::bf16, DType::fp16);
    p.dst = *rc::gen::element(DType::fp32, p.src);
    p.validate();
    return p;
  });
}

// A fill for a convolution: the exact lattice fill (tier 1), signed or
// all-positive random data.
inline rc::Gen<Fill> gen_conv_fill(const ConvProblem& p) {
  return rc::gen::exec([p] {
    const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1000000);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: return lattice_fill(Problem(p), seed);
      case 1: return parse_fill("signed", seed);
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
template <>
struct Arbitrary<kgate::ConvProblem> {
  static Gen<kgate::ConvProblem> arbitrary() { return kgate::prop::gen_conv(); }
};
}  // namespace rc

namespace kgate {
// RapidCheck prints a counterexample through this: the descriptor.
inline void showValue(const GroupNormProblem& p, std::ostream& os) { os << to_descriptor(p); }
inline void showValue(const ConvProblem& p, std::ostream& os) { os << to_descriptor(p); }
inline void showValue(const Fill& f, std::ostream& os) { os << "--fill " << fill_string(f) << " --seed " << f.seed; }
}  // namespace kgate
