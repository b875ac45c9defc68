// Test helpers shared by the reference tests: inputs from a fill, random
// valid problems, and the bounded elementwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/fill.hpp"

namespace kgate::ref::testing {

// Moves one output out of a result map.
inline Tensor take(Outputs&& o, Role r) { return std::move(o.at(r)); }

// A deep copy of a result map.
inline Outputs clone(const Outputs& o) {
  Outputs r;
  for (const auto& [role, t] : o) r.emplace(role, t.to(t.dtype()));
  return r;
}

// Every generated (non-derived) input of p, filled by f.
inline Outputs generated_inputs(const Problem& p, const Fill& f) {
  Outputs in;
  for (const auto& s : inputs(p)) {
    if (s.derived) continue;
    Tensor t(s.dtype, s.dims);
    fill_tensor(f, p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  return in;
}

// A random valid conv problem with at most max_flops, covering stride,
// dilation, groups, asymmetric padding, output padding, kernel 1..3, bias.
inline ConvProblem random_conv(std::mt19937_64& rng, ConvOp op, ConvDir dir, double max_flops = 2e5) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  for (;;) {
    ConvProblem p;
    p.op = op;
    p.dir = dir;
    p.src = p.dst = p.acc = DType::fp32;
    p.n = pick(1, 2);
    p.groups = pick(1, 3);
    p.cin = p.groups * pick(1, 3);
    p.cout = p.groups * pick(1, 3);
    p.bias = pick(0, 1) == 1 && dir != ConvDir::bwd_data;
    for (int a = 0; a < 3; ++a) {
      p.kernel[a] = pick(1, 3);
      p.stride[a] = pick(1, 3);
      p.dilation[a] = pick(1, 2);
      p.pad_front[a] = pick(0, 2);
      p.pad_back[a] = pick(0, 2);
      p.in[a] = pick(1, 6);
      if (op == ConvOp::conv_transpose3d) p.output_padding[a] = pick(0, std::max(p.stride[a], p.dilation[a]) - 1);
    }
    try {
      p.validate();
    } catch (const InputError&) {
      continue;
    }
    if (p.flops() > max_flops) continue;
    return p;
  }
}

// |a_i - b_i| <= factor * A_i for every element (NaNs must match by class).
inline ::testing::AssertionResult within(const Tensor& a, const Tensor& b, const Tensor& A, double factor) {
  if (a.dims() != b.dims() || a.dims() != A.dims()) return ::testing::AssertionFailure() << "shape mismatch";
  std::int64_t bad = 0;
  std::ostringstream first;
  double worst = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) ++bad;
      continue;
    }
    const double err = std::fabs(x - y), tol = factor * A.get(i);
    if (tol > 0) worst = std::max(worst, err / tol);
    if (!(err <= tol)) {
      if (bad++ < 3) first << " [" << i << "] " << x << " vs " << y << " err " << err << " tol " << tol << ";";
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " elements outside the bound:" << first.str();
  return ::testing::AssertionSuccess() << "worst err/tol " << worst;
}

// Equal values (NaN by class; the sign of a zero sum is not compared).
inline ::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dims() != b.dims()) return ::testing::AssertionFailure() << "shape mismatch";
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (!(x == y || (std::isnan(x) && std::isnan(y))))
      return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kgate::ref::testing
