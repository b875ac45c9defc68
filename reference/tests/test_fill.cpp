// Input generators: counter-based (element i depends only on seed, role, i),
// each kind's contract, and the generator as a serialisable value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/conv3d/combine.hpp"
#include "reference/fill.hpp"
#include "reference/parallel.hpp"

namespace kgate {
namespace {

Tensor make(const Problem& p, Role r) {
  for (const auto& s : inputs(p))
    if (s.role == r) return Tensor(s.dtype, s.dims);
  throw std::logic_error("no such role");
}

TEST(Fill, ElementDependsOnlyOnSeedRoleIndex) {
  // The same element of two tensors of different shapes gets the same value.
  const Problem small = parse_descriptor("conv3d.fwd fp32 n1 c4 k4 d4 kd3 p1");
  const Problem big = parse_descriptor("conv3d.fwd fp32 n2 c4 k4 d8 kd3 p1");
  const Fill f = parse_fill("signed", 42);
  Tensor a = make(small, Role::x), b = make(big, Role::x);
  fill_tensor(f, small, Role::x, a);
  fill_tensor(f, big, Role::x, b);
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), b.get(i)) << i;
  // Another role or seed gives other data.
  Tensor w = make(small, Role::w);
  fill_tensor(f, small, Role::w, w);
  // Compared over the shorter of the two (w has more elements than x here).
  const std::int64_t common = std::min(w.numel(), a.numel());
  int same = 0;
  for (std::int64_t i = 0; i < common; ++i) same += w.get(i) == a.get(i);
  EXPECT_LT(same, common / 10);
  Tensor a2 = make(small, Role::x);
  fill_tensor(parse_fill("signed", 43), small, Role::x, a2);
  same = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) same += a2.get(i) == a.get(i);
  EXPECT_LT(same, a.numel() / 10);
}

TEST(Fill, UniformRangesAndRoundingToDtype) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c8 k8 d8 kd3 p1");
  for (const char* spec : {"signed:scale=3", "positive:scale=2", "uniform:lo=5,hi=6"}) {
    const Fill f = parse_fill(spec, 1);
    Tensor x = make(p, Role::x);
    fill_tensor(f, p, Role::x, x);
    double lo = 1e300, hi = -1e300, sum = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.get(i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      // Stored in bf16: the value is a bf16 value.
      ASSERT_EQ(static_cast<double>(bf16_bits_to_fp32(fp64_to_bf16_bits(v))), v);
    }
    const double want_lo = f.kind == FillKind::uniform ? f.lo : f.kind == FillKind::positive ? 0.0 : -f.scale;
    const double want_hi = f.kind == FillKind::uniform ? f.hi : f.scale;
    EXPECT_GE(lo, want_lo) << spec;
    EXPECT_LE(hi, want_hi) << spec;
    // 4096 samples: the range is covered and the mean is central.
    EXPECT_LT(lo, want_lo + 0.05 * (want_hi - want_lo)) << spec;
    EXPECT_GT(hi, want_hi - 0.05 * (want_hi - want_lo)) << spec;
    EXPECT_NEAR(sum / static_cast<double>(x.numel()), (want_lo + want_hi) / 2, 0.05 * (want_hi - want_lo)) << spec;
  }
}

TEST(Fill, LatticeIsIntegerWithDerivedDensity) {
  const Problem p = parse_descriptor("conv3d.fwd bf16 n1 c64 k16 d8 kd3 p1");
  const Fill f = lattice_fill(p, 5);
  // bf16 output: 2^8 / (4*2) = 32 safe terms over K = 64*27.
  EXPECT_DOUBLE_EQ(f.density, 32.0 / (64 * 27));
  Tensor x = make(p, Role::x), w = make(p, Role::w);
  fill_tensor(f, p, Role::x, x);
  fill_tensor(f, p, Role::w, w);
  std::int64_t nonzero = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(x.get(i), std::rint(x.get(i)));
    ASSERT_LE(std::fabs(x.get(i)), lattice_max(Role::x));
  }
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    ASSERT_EQ(w.get(i), std::rint(w.get(i)));
    ASSERT_LE(std::fabs(w.get(i)), lattice_max(Role::w));
    nonzero += w.get(i) != 0;
  }
  const double expected = f.density * static_cast<double>(w.numel());
  EXPECT_NEAR(static_cast<double>(nonzero), expected, 5 * std::sqrt(expected));
  // fp32 output: every element may be nonzero.
  EXPECT_DOUBLE_EQ(lattice_fill(parse_descriptor("conv3d.fwd fp32 n1 c64 k16 d8 kd3 p1"), 5).density, 1.0);
  // bwd_weight makes dy sparse.
  EXPECT_EQ(sparse_role(parse_descriptor("conv3d.bwd_weight bf16 n1 c4 k4 d8 kd3 p1")), Role::dy);
}

TEST(Fill, GroupNormExactFillIsPairSymmetric) {
  for (const char* d : {"groupnorm.fwd bf16 n2 c12 g3 d3 h2 w3", "groupnorm.fwd fp16 n1 c8 g2 d4"}) {
    const Problem p = parse_descriptor(d);
    const auto& gn = std::get<GroupNormProblem>(p);
    for (double mean : {0.0, 1000.0, -65536.0}) {
      if (gn.src == DType::fp16 && mean < -60000) continue;
      Fill f = parse_fill("gn_exact", 9);
      f.mean = mean;
      Tensor x = make(p, Role::x);
      fill_tensor(f, p, Role::x, x);
      // Per (n, group): the exact mean is the pairs' centre, sum of deviations 0.
      std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> groups;
      const std::int64_t C = gn.c, Cg = gn.c / gn.groups;
      for (std::int64_t i = 0; i < x.numel(); ++i)
        groups[{i / (x.numel() / gn.n), (i % C) / Cg}].push_back(x.get(i));
      for (auto& [key, v] : groups) {
        ASSERT_EQ(static_cast<std::int64_t>(v.size()), gn.group_size());
        long double s = 0;
        for (double e : v) s += e;
        const long double m = s / v.size();
        // pairs in NDHWC order differ symmetrically about m
        std::int64_t devsum = 0;
        for (double e : v) devsum += static_cast<std::int64_t>(e - m);
        EXPECT_EQ(devsum, 0) << d << " mean " << mean;
        EXPECT_NEAR(static_cast<double>(m), mean, 8 * std::max(1.0, std::ldexp(1.0, std::ilogb(std::fabs(mean) + 12) + 2 - significand_bits(gn.src))));
      }
    }
  }
  // constant=1: every group is constant.
  const Problem p = parse_descriptor("groupnorm.fwd bf16 n1 c8 g2 d2");
  Tensor x = make(p, Role::x);
  fill_tensor(parse_fill("gn_exact:constant=1", 3), p, Role::x, x);
  for (std::int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.get(i), x.get((i % 8) / 4 * 4)) << i;
}

TEST(Fill, GeneratorIsAValue) {
  for (const char* s : {"signed", "signed:scale=4", "positive", "uniform:lo=-2,hi=3", "uniform:lo=-1,hi=3", "lattice:density=0.25",
                        "gn_exact:mean=1024", "gn_exact:constant=1", "gn_sweep:mean=10000,sigma=0.5",
                        "combine:run=9,db_run=256", "combine:run=3"}) {
    const Fill f = parse_fill(s, 77);
    EXPECT_EQ(fill_string(f), s);
    EXPECT_EQ(fill_from_json(nlohmann::json::parse(to_json(f).dump())), f) << s;
  }
  auto field_of = [](auto fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(field_of([] { parse_fill("gaussian", 0); }), "fill");
  EXPECT_EQ(field_of([] { parse_fill("signed:lo=1", 0); }), "fill");
  EXPECT_EQ(field_of([] { parse_fill("signed:scale=x", 0); }), "fill.scale");
  EXPECT_EQ(field_of([] { parse_fill("uniform:lo=3,hi=2", 0); }), "fill.lo");
  EXPECT_EQ(field_of([] { fill_from_json(nlohmann::json::parse(R"({"kind":"signed","seed":1,"lo":2})")); }), "fill.lo");
  EXPECT_EQ(field_of([] { fill_from_json(nlohmann::json::parse(R"({"kind":"signed"})")); }), "fill.seed");
  // Found by fuzz_fill: a subnormal parameter was accepted in one spelling
  // (hex, through strtod) and refused in the one fill_string prints (ERANGE).
  // Numbers are decimal (from_chars), subnormals included, both ways.
  const Fill tiny = parse_fill("uniform:lo=-0,hi=5e-324", 1);
  EXPECT_EQ(tiny.hi, 0x1p-1074);
  EXPECT_EQ(parse_fill(fill_string(tiny), 1), tiny);
  EXPECT_EQ(field_of([] { parse_fill("uniform:lo=-0,hi=0x1p-1074", 0); }), "fill.hi");
  EXPECT_EQ(field_of([] { parse_fill("signed:scale=1e400", 0); }), "fill.scale");
  EXPECT_EQ(field_of([] { parse_fill("signed:scale=inf", 0); }), "fill.scale");
  EXPECT_EQ(field_of([] { parse_fill("combine:run=0", 0); }), "fill.run");
  EXPECT_EQ(field_of([] { parse_fill("combine:run=2.5", 0); }), "fill.run");
  EXPECT_EQ(field_of([] { parse_fill("combine:db_run=-1", 0); }), "fill.db_run");
  EXPECT_EQ(field_of([] {
              const Problem g = parse_descriptor("groupnorm.fwd fp32 n1 c4 g2 d2");
              Tensor x(DType::fp32, std::get<GroupNormProblem>(g).x_dims());
              fill_tensor(parse_fill("combine", 0), g, Role::x, x);
            }),
            "fill");
  EXPECT_EQ(field_of([] { parse_fill("signed:scale= 2", 0); }), "fill.scale");
}

TEST(Fill, ThreadCountDoesNotChangeData) {
  // Filling halves of a tensor on two threads equals a serial fill: the value
  // is a function of the index alone.
  const Problem p = parse_descriptor("conv3d.fwd fp16 n1 c16 k4 d16 kd1");
  Tensor a = make(p, Role::x), b = make(p, Role::x);
  const Fill f = parse_fill("signed", 123);
  fill_tensor(f, p, Role::x, a);
  for (std::int64_t i = 0; i < a.numel(); ++i) b.set(i, NAN);
  std::thread t1([&] { for (std::int64_t i = 0; i < b.numel() / 2; ++i) b.set(i, static_cast<float>(-1.0f + 2.0f * (static_cast<float>(counter_hash(123, Role::x, i) >> 40) * 0x1p-24f))); });
  std::thread t2([&] { for (std::int64_t i = b.numel() / 2; i < b.numel(); ++i) b.set(i, static_cast<float>(-1.0f + 2.0f * (static_cast<float>(counter_hash(123, Role::x, i) >> 40) * 0x1p-24f))); });
  t1.join();
  t2.join();
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), b.get(i)) << i;
}

// The fills run on the element threads: every kind gives the same bytes
// with one thread and with several, over tensors of many chunks.
TEST(Fill, SameValuesForAnyThreadCount) {
  const Problem gn = parse_descriptor("groupnorm.bwd bf16 n1 c8 g2 d48 relu");
  const Problem cv = parse_descriptor("conv3d.fwd bf16 n1 c8 k8 d48 kd3 p1");
  const int before = element_threads();
  for (const char* spec : {"signed", "uniform", "positive", "lattice", "lattice:density=0.3", "gn_exact", "gn_sweep"}) {
    const Problem& p = std::string(spec).rfind("gn_", 0) == 0 ? gn : cv;
    const bool is_gn = std::holds_alternative<GroupNormProblem>(p);
    for (Role r : {Role::x, is_gn ? Role::dy : Role::x}) {
      Tensor one = make(p, r), many = make(p, r);
      ASSERT_GT(one.numel(), 2 * kElementChunk);
      set_element_threads(1);
      fill_tensor(parse_fill(spec, 9), p, r, one);
      set_element_threads(5);
      fill_tensor(parse_fill(spec, 9), p, r, many);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), static_cast<std::size_t>(one.nbytes()))) << spec;
    }
  }
  set_element_threads(before);
}

}  // namespace
}  // namespace kgate

namespace kgate {
namespace {

// The combine probe: per run of the published slice map, its first and last
// terms set (equal values), every other term of the probed operand zero,
// the other operand the constant 2^12; the replay of the plan differs from
// one chain over the terms (the order a kernel that ignored its split
// would take) on some element.
TEST(Fill, CombineProbeSetsTheFirstAndLastTermOfEachRun) {
  const Problem p = parse_descriptor("conv3d.bwd_weight fp32 n1 c4 k4 d5 kd1");
  const auto& c = std::get<ConvProblem>(p);
  const Fill f = parse_fill("combine:run=7", 1);
  Tensor dy = make(p, Role::dy), x = make(p, Role::x);
  fill_tensor(f, p, Role::dy, dy);  // the small operand: rows of 4 channels
  fill_tensor(f, p, Role::x, x);
  const std::map<Role, const Tensor*> in{{Role::dy, &dy}, {Role::x, &x}};
  for (std::int64_t r = 0; r < 125; ++r)
    for (std::int64_t ch = 0; ch < 4; ++ch) {
      const bool set = r % 7 == 0 || r % 7 == 6;
      EXPECT_EQ(dy.get(r * 4 + ch) != 0.0, set) << r << " " << ch;
    }
  for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.get(i), 4096.0);
  ReductionPlan split = ReductionPlan::split_k(125, 18, PartialCombine::tree);
  split.split_run = 7;
  const ref::Replay rp = ref::combine_replay(c, Role::dw, split, in);
  EXPECT_EQ(rp.probed_count, rp.value.numel());
  EXPECT_GT(rp.order_sensitive, 0);
  split.split_run = 0;
  EXPECT_THROW(ref::combine_replay(c, Role::dw, split, in), std::logic_error);
}

}  // namespace
}  // namespace kgate
