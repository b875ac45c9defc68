// The convolution references: the three implementations agree within derived
// bounds, the operators satisfy their adjoint identities, match independent
// definitions (PyTorch's scatter form of the transposed convolution, hand
// values), grouped = concatenated groups, shape forms agree, lattice inputs
// give exact integers equal to MPFR bit for bit, and the fast path does not
// depend on the thread count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "reference/conv3d/conv_fast.hpp"
#include "reference/conv3d/conv_geometry.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/conv3d/tests/ref_test_util.hpp"
#include "reference/conv3d/tests/ref_tolerance.hpp"
#include "reference/digest.hpp"
#include "reference/npy.hpp"

namespace kgate::ref {
namespace {

using namespace kgate::ref::testing;

ConvProblem desc(const std::string& s) { return std::get<ConvProblem>(parse_descriptor(s)); }

ConvProblem with_dir(ConvProblem p, ConvDir d) {
  p.dir = d;
  p.bias = p.bias && d != ConvDir::bwd_data;  // bwd_data has no bias tensor
  return p;
}

// Hand-picked shapes (every feature named in the issue) plus random ones.
std::vector<ConvProblem> problems_for(ConvOp op, ConvDir dir, int random_count, std::uint64_t seed) {
  std::vector<ConvProblem> v;
  const char* named_conv[] = {
      "conv3d.fwd fp32 n1 c3 k4 d5 kd3 p1 bias",           // k=3
      "conv3d.fwd fp32 n1 c8 k6 d4 kd1 bias",               // k=1 head
      "conv3d.fwd fp32 n2 c4 k4 d6 kd2 s2",                 // k=2 s=2
      "conv3d.fwd fp32 n1 c2 k2 d3 kd3",                    // output extent 1
      "conv3d.fwd fp32 n1 c1 k1 d1 kd1",                      // tiny
      "conv3d.fwd fp32 n1 c6 k4 g2 d5 h4 w6 kd3 kh2 kw1 pd1:2 ph0:1 dil2 sd2",  // groups, asymmetric
      "conv3d.fwd fp32 n1 c3 k3 g3 d4 kd3 p2:0 dil2 bias",  // depthwise
  };
  const char* named_convt[] = {
      "conv_transpose3d.fwd fp32 n1 c8 k4 d3 kd2 s2 bias",  // the U-Net up-conv
      "conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd3 s2 p1 op1",
      "conv_transpose3d.fwd fp32 n1 c4 k6 g2 d2 h3 w4 kd3 kh2 kw1 sd3 pd1:0 dil2 bias",
      "conv_transpose3d.fwd fp32 n2 c2 k2 d1 kd1",          // tiny, output extent 1
      "conv_transpose3d.fwd fp32 n1 c3 k3 d3 kd3 p1",       // stride 1
  };
  if (op == ConvOp::conv3d)
    for (const char* s : named_conv) v.push_back(with_dir(desc(s), dir));
  else
    for (const char* s : named_convt) v.push_back(with_dir(desc(s), dir));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < random_count; ++i) v.push_back(random_conv(rng, op, dir));
  return v;
}

class ConvAllDirs : public ::testing::TestWithParam<std::tuple<ConvOp, ConvDir>> {};

TEST_P(ConvAllDirs, DirectFastDot2MpfrAgree) {
  const auto [op, dir] = GetParam();
  int i = 0;
  for (const ConvProblem& p : problems_for(op, dir, 14, 1000 + static_cast<int>(op) * 10 + static_cast<int>(dir))) {
    SCOPED_TRACE(to_descriptor(p));
    const Outputs in = generated_inputs(Problem{p}, parse_fill("signed", static_cast<std::uint64_t>(++i)));
    const Outputs d = conv(p, refs(in), Impl::direct), f = conv(p, refs(in), Impl::fast);
    const Outputs m = conv(p, refs(in), Impl::mpfr), q = conv(p, refs(in), Impl::dot2);
    const Outputs A = conv_abs(p, refs(in), Impl::direct);
    const double D = conv_depth(p);
    ASSERT_EQ(d.size(), p.outputs().size());
    for (const auto& s : p.outputs()) {
      SCOPED_TRACE(std::string(kgate::name(s.role)));
      ASSERT_EQ(d.at(s.role).dims(), s.dims);
      ASSERT_EQ(d.at(s.role).dtype(), DType::fp64);
      EXPECT_TRUE(within(f.at(s.role), d.at(s.role), A.at(s.role), pair_factor(D)));
      EXPECT_TRUE(within(d.at(s.role), m.at(s.role), A.at(s.role), vs_exact_factor(D)));
      EXPECT_TRUE(within(f.at(s.role), m.at(s.role), A.at(s.role), vs_exact_factor(D)));
      EXPECT_TRUE(within(q.at(s.role), m.at(s.role), A.at(s.role), dot2_factor(D)));
      // The companion bounds the result.
      for (std::int64_t e = 0; e < A.at(s.role).numel(); ++e)
        ASSERT_LE(std::fabs(m.at(s.role).get(e)), A.at(s.role).get(e) * (1 + vs_exact_factor(D))) << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ConvAllDirs,
                         ::testing::Combine(::testing::Values(ConvOp::conv3d, ConvOp::conv_transpose3d),
                                            ::testing::Values(ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight)),
                         [](const auto& info) {
                           return std::string(name(std::get<0>(info.param))) + "_" +
                                  std::string(name(std::get<1>(info.param)));
                         });

// The comparison above is not vacuous: an error of 1e-12 relative in one
// element of the fast result is caught.
TEST(ConvRef, BoundCatchesASmallError) {
  const ConvProblem p = desc("conv3d.fwd fp32 n1 c4 k4 d5 kd3 p1");
  const Outputs in = generated_inputs(Problem{p}, parse_fill("signed", 3));
  Outputs f = conv(p, refs(in), Impl::fast);
  const Outputs m = conv(p, refs(in), Impl::mpfr), A = conv_abs(p, refs(in));
  ASSERT_TRUE(within(f.at(Role::y), m.at(Role::y), A.at(Role::y), vs_exact_factor(conv_depth(p))));
  Tensor& y = f.at(Role::y);
  y.set(17, y.get(17) + 1e-12 * A.at(Role::y).get(17));
  EXPECT_FALSE(within(y, m.at(Role::y), A.at(Role::y), vs_exact_factor(conv_depth(p))));
}

// ---------------------------------------------------------------------------
// Independent definitions.

TEST(ConvRef, HandComputedValues) {
  // conv3d, 1-D along w: x = [1 2 3], w = [1 10 100], p1: y[j] = sum_k x[j-1+k] w[k]
  ConvProblem c = desc("conv3d.fwd fp32 n1 c1 k1 d1 h1 w3 kd1 kh1 kw3 pw1");
  Tensor x(DType::fp32, c.x_dims()), w(DType::fp32, c.w_dims());
  for (int i = 0; i < 3; ++i) x.set(i, i + 1);
  w.set(0, 1);
  w.set(1, 10);
  w.set(2, 100);
  Inputs in{{Role::x, std::cref(x)}, {Role::w, std::cref(w)}};
  for (Impl impl : {Impl::direct, Impl::fast, Impl::mpfr}) {
    const Tensor y = take(conv(c, in, impl), Role::y);
    EXPECT_EQ(y.get(0), 0 * 1 + 1 * 10 + 2 * 100);
    EXPECT_EQ(y.get(1), 1 * 1 + 2 * 10 + 3 * 100);
    EXPECT_EQ(y.get(2), 2 * 1 + 3 * 10 + 0 * 100);
  }
  // conv_transpose3d k2 s2: y[2i + k] = x[i] * w[k]; x = [3 4], w = [1 2] -> [3 6 4 8]
  ConvProblem t = desc("conv_transpose3d.fwd fp32 n1 c1 k1 d1 h1 w2 kd1 kh1 kw2 sw2");
  Tensor xt(DType::fp32, t.x_dims()), wt(DType::fp32, t.w_dims());
  xt.set(0, 3);
  xt.set(1, 4);
  wt.set(0, 1);
  wt.set(1, 2);
  Inputs it{{Role::x, std::cref(xt)}, {Role::w, std::cref(wt)}};
  for (Impl impl : {Impl::direct, Impl::fast, Impl::mpfr}) {
    const Tensor y = take(conv(t, it, impl), Role::y);
    ASSERT_EQ(y.numel(), 4);
    EXPECT_EQ(y.get(0), 3);
    EXPECT_EQ(y.get(1), 6);
    EXPECT_EQ(y.get(2), 4);
    EXPECT_EQ(y.get(3), 8);
  }
}

// PyTorch's definition of conv_transpose3d as a scatter: every input element
// adds x * w[k] at j = i*s - pad_front + k*dil (dropped outside [0, L)).
// Written here independently of the reference's gather enumeration.
Tensor convt_scatter(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor* b) {
  const Axis3 L = p.out();
  Tensor y(DType::fp64, p.y_dims());
  const std::int64_t cig = p.cin / p.groups, cog = p.cout / p.groups;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t i0 = 0; i0 < p.in[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < p.in[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < p.in[2]; ++i2)
          for (std::int64_t ci = 0; ci < p.cin; ++ci)
            for (std::int64_t k0 = 0; k0 < p.kernel[0]; ++k0)
              for (std::int64_t k1 = 0; k1 < p.kernel[1]; ++k1)
                for (std::int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
                  const std::int64_t j0 = i0 * p.stride[0] - p.pad_front[0] + k0 * p.dilation[0];
                  const std::int64_t j1 = i1 * p.stride[1] - p.pad_front[1] + k1 * p.dilation[1];
                  const std::int64_t j2 = i2 * p.stride[2] - p.pad_front[2] + k2 * p.dilation[2];
                  if (j0 < 0 || j1 < 0 || j2 < 0 || j0 >= L[0] || j1 >= L[1] || j2 >= L[2]) continue;
                  const double xv = x.view().at({n, i0, i1, i2, ci});
                  for (std::int64_t q = 0; q < cog; ++q) {
                    const std::int64_t co = (ci / cig) * cog + q;
                    const std::int64_t yi = y.view().offset({n, j0, j1, j2, co});
                    y.set(yi, y.get(yi) + xv * w.view().at({ci, k0, k1, k2, q}));
                  }
                }
  if (b)
    for (std::int64_t e = 0; e < y.numel(); ++e) y.set(e, y.get(e) + b->get(e % p.cout));
  return y;
}

TEST(ConvRef, TransposedForwardIsPyTorchScatterAndConvBackwardData) {
  std::mt19937_64 rng(77);
  std::vector<ConvProblem> ps = problems_for(ConvOp::conv_transpose3d, ConvDir::fwd, 10, 77);
  for (const ConvProblem& t : ps) {
    SCOPED_TRACE(to_descriptor(t));
    const Outputs in = generated_inputs(Problem{t}, parse_fill("signed", 5));
    const Tensor* b = t.bias ? &in.at(Role::b) : nullptr;
    const Tensor want = convt_scatter(t, in.at(Role::x), in.at(Role::w), b);
    const Outputs A = conv_abs(t, refs(in));
    for (Impl impl : {Impl::direct, Impl::fast})
      EXPECT_TRUE(within(conv(t, refs(in), impl).at(Role::y), want, A.at(Role::y), pair_factor(conv_depth(t))));
    // conv3d.bwd_data with the same weight, cin/cout swapped and x's extent =
    // the transposed output (output padding below the stride keeps S).
    bool op_ok = true;
    for (int a = 0; a < 3; ++a) op_ok = op_ok && t.output_padding[a] < t.stride[a];
    if (!op_ok) continue;
    ConvProblem c = t;
    c.op = ConvOp::conv3d;
    c.dir = ConvDir::bwd_data;
    c.cin = t.cout;
    c.cout = t.cin;
    c.in = t.out();
    c.output_padding = {0, 0, 0};
    c.bias = false;
    c.validate();
    ASSERT_EQ(c.out(), t.in);
    ASSERT_EQ(c.w_dims(), t.w_dims());
    Inputs cin{{Role::dy, std::cref(in.at(Role::x))}, {Role::w, std::cref(in.at(Role::w))}};
    const Tensor want_nb = convt_scatter(t, in.at(Role::x), in.at(Role::w), nullptr);
    EXPECT_TRUE(within(conv(c, cin, Impl::fast).at(Role::dx), want_nb, conv_abs(c, cin).at(Role::dx),
                       pair_factor(conv_depth(c))));
  }
}

// ---------------------------------------------------------------------------
// Adjoint identities <fwd(x, w), y> = <x, bwd_data(y, w)> = <w, bwd_weight(x, y)>.

double dot(const Tensor& a, const Tensor& b) {
  Dot2 s;
  for (std::int64_t i = 0; i < a.numel(); ++i) s.add_prod(a.get(i), b.get(i));
  return s.value();
}

TEST(ConvRef, AdjointIdentities) {
  std::mt19937_64 rng(4242);
  for (ConvOp op : {ConvOp::conv3d, ConvOp::conv_transpose3d})
    for (int rep = 0; rep < 12; ++rep) {
      ConvProblem p = rep == 0 ? desc(op == ConvOp::conv3d ? "conv3d.fwd fp32 n1 c8 k8 d8 kd3 p1"
                                                           : "conv_transpose3d.fwd fp32 n1 c8 k8 d4 kd2 s2")
                               : random_conv(rng, op, ConvDir::fwd, 1e6);
      p.bias = false;
      p.src = p.dst = DType::fp64;
      SCOPED_TRACE(to_descriptor(p));
      const ConvProblem pd = with_dir(p, ConvDir::bwd_data), pw = with_dir(p, ConvDir::bwd_weight);
      Tensor x(DType::fp64, p.x_dims()), w(DType::fp64, p.w_dims()), y(DType::fp64, p.y_dims());
      std::uniform_real_distribution<double> u(-1, 1);
      for (Tensor* t : {&x, &w, &y})
        for (std::int64_t i = 0; i < t->numel(); ++i) t->set(i, u(rng));
      for (Impl impl : {Impl::direct, Impl::fast}) {
        const Tensor Y = take(conv(p, {{Role::x, std::cref(x)}, {Role::w, std::cref(w)}}, impl), Role::y);
        const Tensor X = take(conv(pd, {{Role::dy, std::cref(y)}, {Role::w, std::cref(w)}}, impl), Role::dx);
        const Tensor W = take(conv(pw, {{Role::x, std::cref(x)}, {Role::dy, std::cref(y)}}, impl), Role::dw);
        const double l = dot(Y, y), m = dot(x, X), r = dot(w, W);
        const Tensor ax = abs_of(x), aw = abs_of(w), ay = abs_of(y);
        const double T =
            dot(conv(p, {{Role::x, std::cref(ax)}, {Role::w, std::cref(aw)}}, Impl::direct).at(Role::y), ay);
        const double D1 = static_cast<double>(p.reduction_length()), D2 = static_cast<double>(pd.reduction_length()),
                     D3 = static_cast<double>(pw.reduction_length()) + detail::kMaxSlots;
        EXPECT_LE(std::fabs(l - m), adjoint_factor(D1, D2) * T) << l << " " << m;
        EXPECT_LE(std::fabs(l - r), adjoint_factor(D1, D3) * T) << l << " " << r;
        EXPECT_LE(std::fabs(m - r), adjoint_factor(D2, D3) * T) << m << " " << r;
        EXPECT_LT(adjoint_factor(D1, D3), 1e-12);  // the identity holds to ~1e-12 relative
        // Negative control: a flipped kernel (w reversed along every tap) breaks it.
        if (rep == 0) {
          Tensor wf(DType::fp64, p.w_dims());
          const std::int64_t taps = p.kernel[0] * p.kernel[1] * p.kernel[2], inner = p.w_dims()[4];
          for (std::int64_t c = 0; c < p.w_dims()[0]; ++c)
            for (std::int64_t k = 0; k < taps; ++k)
              for (std::int64_t q = 0; q < inner; ++q)
                wf.set((c * taps + k) * inner + q, w.get((c * taps + (taps - 1 - k)) * inner + q));
          const Tensor Xf = take(conv(pd, {{Role::dy, std::cref(y)}, {Role::w, std::cref(wf)}}, impl), Role::dx);
          EXPECT_GT(std::fabs(l - dot(x, Xf)), 1e3 * adjoint_factor(D1, D2) * T);
        }
      }
    }
}

// ---------------------------------------------------------------------------

// A grouped convolution equals the concatenation of per-group convolutions.
TEST(ConvRef, GroupedIsConcatenationOfGroups) {
  for (const char* s : {"conv3d.fwd fp32 n2 c6 k9 g3 d4 kd3 p1 bias", "conv_transpose3d.fwd fp32 n1 c6 k4 g2 d3 kd2 s2 bias",
                        "conv3d.fwd fp32 n1 c4 k4 g4 d5 kd3 s2 p1:0"}) {
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight}) {
      const ConvProblem p = with_dir(desc(s), dir);
      SCOPED_TRACE(to_descriptor(p));
      const Outputs in = generated_inputs(Problem{p}, parse_fill("signed", 9));
      const Outputs whole = conv(p, refs(in), Impl::fast);
      ConvProblem pg = p;
      pg.groups = 1;
      pg.cin = p.cin / p.groups;
      pg.cout = p.cout / p.groups;
      const bool t = p.op == ConvOp::conv_transpose3d;
      const std::int64_t w_rows_per_group = (t ? p.cin : p.cout) / p.groups;
      // Channel slice of an activation (last dim), rows of a weight (first dim), or a vector.
      auto slice_channels = [](const Tensor& a, std::int64_t g, std::int64_t cg) {
        Dims d = a.dims();
        const std::int64_t c = d.back();
        d.back() = cg;
        Tensor r(a.dtype(), d);
        for (std::int64_t i = 0; i < r.numel(); ++i) r.set(i, a.get((i / cg) * c + g * cg + i % cg));
        return r;
      };
      auto slice_rows = [](const Tensor& a, std::int64_t g, std::int64_t rows) {
        Dims d = a.dims();
        const std::int64_t per = a.numel() / d[0];
        d[0] = rows;
        Tensor r(a.dtype(), d);
        for (std::int64_t i = 0; i < r.numel(); ++i) r.set(i, a.get(g * rows * per + i));
        return r;
      };
      for (std::int64_t g = 0; g < p.groups; ++g) {
        Outputs gin;
        for (const auto& sp : pg.inputs()) {
          const Tensor& a = in.at(sp.role);
          if (sp.role == Role::w) gin.emplace(sp.role, slice_rows(a, g, w_rows_per_group));
          else if (sp.role == Role::x) gin.emplace(sp.role, slice_channels(a, g, pg.cin));
          else if (sp.role == Role::dy || sp.role == Role::b) gin.emplace(sp.role, slice_channels(a, g, pg.cout));
        }
        const Outputs part = conv(pg, refs(gin), Impl::direct);
        const Outputs A = conv_abs(pg, refs(gin), Impl::direct);
        for (const auto& [role, t_part] : part) {
          SCOPED_TRACE(std::string(kgate::name(role)) + " group " + std::to_string(g));
          const Tensor& full = whole.at(role);
          const Tensor mine = role == Role::dw                                   ? slice_rows(full, g, w_rows_per_group)
                              : role == Role::dx                                 ? slice_channels(full, g, pg.cin)
                                                                                 : slice_channels(full, g, pg.cout);
          EXPECT_TRUE(within(mine, t_part, A.at(role), pair_factor(conv_depth(p))));
        }
      }
    }
  }
}

// A halo-form problem (zero planes concatenated along D, no D padding)
// computes the same output as the logical problem.
TEST(ConvRef, HaloFormEqualsLogicalForm) {
  const ConvProblem lg = desc("conv3d.fwd fp32 n1 c3 k4 d6 h5 w4 kd3 p1 bias");
  ConvProblem hl = lg;
  hl.form = ShapeForm::adapter;
  hl.halo = {1, 0, 0};
  hl.in[0] += 2;
  hl.pad_front[0] = hl.pad_back[0] = 0;
  hl.validate();
  ASSERT_EQ(hl.out(), lg.out());
  const Outputs in = generated_inputs(Problem{lg}, parse_fill("signed", 11));
  Tensor xh(DType::fp32, hl.x_dims());
  const std::int64_t plane = lg.in[1] * lg.in[2] * lg.cin;
  for (std::int64_t i = 0; i < in.at(Role::x).numel(); ++i) xh.set(i + plane, in.at(Role::x).get(i));
  Inputs hin{{Role::x, std::cref(xh)}, {Role::w, std::cref(in.at(Role::w))}, {Role::b, std::cref(in.at(Role::b))}};
  for (Impl impl : {Impl::direct, Impl::fast, Impl::mpfr})
    EXPECT_TRUE(bitwise_equal(conv(hl, hin, impl).at(Role::y), conv(lg, refs(in), impl).at(Role::y)));
}

// ---------------------------------------------------------------------------
// Exact lattice inputs: every implementation gives the exact integers, equal
// to MPFR bit for bit, and MPFR rounded to the problem's dst is the same.

TEST(ConvRef, LatticeInputsAreExact) {
  std::mt19937_64 rng(99);
  for (ConvOp op : {ConvOp::conv3d, ConvOp::conv_transpose3d})
    for (ConvDir dir : {ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight})
      for (int rep = 0; rep < 4; ++rep) {
        ConvProblem p = random_conv(rng, op, dir, 4e5);
        p.src = DType::bf16;
        p.dst = DType::fp32;
        SCOPED_TRACE(to_descriptor(p));
        const Outputs in = generated_inputs(Problem{p}, lattice_fill(Problem{p}, 7 + static_cast<std::uint64_t>(rep)));
        const Outputs m = conv(p, refs(in), Impl::mpfr);
        const Outputs m32 = conv_mpfr_rounded(p, refs(in), DType::fp32);
        for (Impl impl : {Impl::direct, Impl::fast, Impl::dot2}) {
          const Outputs r = conv(p, refs(in), impl);
          for (const auto& [role, t] : m) {
            EXPECT_TRUE(bitwise_equal(r.at(role), t)) << name(impl) << " " << kgate::name(role);
            EXPECT_TRUE(bitwise_equal(m32.at(role), t));
            EXPECT_EQ(m32.at(role).dtype(), DType::fp32);
            for (std::int64_t e = 0; e < t.numel(); ++e) ASSERT_EQ(t.get(e), std::rint(t.get(e)));
          }
        }
      }
}

// MPFR rounded once to bf16 differs from rounding its fp64 value when the
// fp64 rounding creates a tie: 1 + 2^-8 + 2^-60 -> fp64 1 + 2^-8 (a bf16 tie,
// to even: 1) but correctly 1 + 2^-7.
TEST(ConvRef, MpfrRoundsOnceToTheTargetDtype) {
  const ConvProblem p = desc("conv3d.fwd fp32:bf16 n1 c3 k1 d1 kd1");
  Tensor x(DType::fp32, p.x_dims()), w(DType::fp32, p.w_dims());
  x.set(0, 1.0);
  x.set(1, 0x1p-8);
  x.set(2, 0x1p-60);
  for (int i = 0; i < 3; ++i) w.set(i, 1.0);
  Inputs in{{Role::x, std::cref(x)}, {Role::w, std::cref(w)}};
  const double via64 = conv(p, in, Impl::mpfr).at(Role::y).get(0);
  EXPECT_EQ(via64, 1.0 + 0x1p-8);
  Tensor t(DType::bf16, {1});
  t.set(0, via64);
  EXPECT_EQ(t.get(0), 1.0);  // double rounding
  const Tensor once = take(conv_mpfr_rounded(p, in, DType::bf16), Role::y);
  EXPECT_EQ(once.dtype(), DType::bf16);
  EXPECT_EQ(once.get(0), 1.0 + 0x1p-7);
}

// ---------------------------------------------------------------------------

TEST(ConvRef, FastDoesNotDependOnThreadCount) {
  for (const char* s : {"conv3d.bwd_weight fp32 n1 c4 k4 d32 kd3 p1 bias", "conv3d.fwd fp32 n1 c4 k8 d20 kd3 p1",
                        "conv_transpose3d.fwd fp32 n1 c4 k4 d12 kd2 s2 bias",
                        // column tiles, bwd_weight's reduction chunks
                        "conv3d.fwd fp32 n1 c4 k520 d3 kd3 p1 bias", "conv_transpose3d.fwd fp32 n1 c8 k80 d2 kd2 s2",
                        "conv3d.bwd_weight fp32 n2 c2 k4 d24 kd3 p1 bias",
                        "conv_transpose3d.bwd_weight fp32 n2 c6 k200 g2 d2 kd2 s2 bias"}) {
    const ConvProblem p = desc(s);
    SCOPED_TRACE(s);
    const Outputs in = generated_inputs(Problem{p}, parse_fill("signed", 13));
    ::setenv("KGATE_REF_THREADS", "1", 1);
    const Outputs one = conv(p, refs(in), Impl::fast);
    ::setenv("KGATE_REF_THREADS", "3", 1);
    const Outputs three = conv(p, refs(in), Impl::fast);
    ::unsetenv("KGATE_REF_THREADS");
    for (const auto& [role, t] : one) EXPECT_EQ(digest(t), digest(three.at(role)));
  }
}

// ---------------------------------------------------------------------------
// The fast path's special cases: non-overlapping scatter (kernel == stride, no
// padding or dilation), column tiles where row blocks are few, bwd_weight's
// reduction chunks. Each agrees with the direct reference (within the pair
// bound on signed inputs, bit for bit on lattice inputs).

void expect_fast_matches_direct(const ConvProblem& p, std::uint64_t seed) {
  SCOPED_TRACE(to_descriptor(p));
  const Outputs in = generated_inputs(Problem{p}, parse_fill("signed", seed));
  const Outputs d = conv(p, refs(in), Impl::direct), f = conv(p, refs(in), Impl::fast);
  const Outputs A = conv_abs(p, refs(in), Impl::direct);
  for (const auto& s : p.outputs())
    EXPECT_TRUE(within(f.at(s.role), d.at(s.role), A.at(s.role), pair_factor(conv_depth(p))))
        << kgate::name(s.role);
  ConvProblem pl = p;
  pl.src = DType::bf16;
  const Outputs lin = generated_inputs(Problem{pl}, lattice_fill(Problem{pl}, seed));
  const Outputs ld = conv(pl, refs(lin), Impl::direct), lf = conv(pl, refs(lin), Impl::fast);
  for (const auto& s : pl.outputs()) EXPECT_TRUE(bitwise_equal(lf.at(s.role), ld.at(s.role))) << kgate::name(s.role);
}

TEST(ConvRef, NonOverlappingPathMatchesDirect) {
  std::mt19937_64 rng(123);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  for (ConvOp op : {ConvOp::conv_transpose3d, ConvOp::conv3d})
    for (int rep = 0; rep < 8; ++rep) {
      ConvProblem p;
      p.op = op;
      p.dir = op == ConvOp::conv3d ? ConvDir::bwd_data : ConvDir::fwd;  // the scatter directions
      p.src = p.dst = p.acc = DType::fp32;
      p.n = pick(1, 2);
      p.groups = pick(1, 3);
      // One problem in four has enough channels for column tiles.
      const std::int64_t wide = rep % 4 == 3 ? 520 : 1;
      p.cin = p.groups * pick(1, 3) * (op == ConvOp::conv_transpose3d ? 1 : wide);
      p.cout = p.groups * pick(1, 3) * (op == ConvOp::conv_transpose3d ? wide : 1);
      p.bias = pick(0, 1) == 1 && p.dir != ConvDir::bwd_data;
      for (int a = 0; a < 3; ++a) {
        p.kernel[a] = p.stride[a] = pick(1, 3);
        p.in[a] = pick(1, wide > 1 ? 2 : 4) * (op == ConvOp::conv3d ? p.kernel[a] : 1);
      }
      p.validate();
      ASSERT_TRUE(detail::non_overlapping(detail::make_geom(p))) << to_descriptor(p);
      if (wide > 1) {
        const auto g = detail::make_geom(p);
        ASSERT_GT(detail::col_tiles(g.taps * g.clg, g.n * g.groups), 1) << to_descriptor(p);
      }
      expect_fast_matches_direct(p, 40 + static_cast<std::uint64_t>(rep));
    }
}

TEST(ConvRef, NonOverlappingPathOnlyWhereItApplies) {
  auto applies = [](const char* s) { return detail::non_overlapping(detail::make_geom(desc(s))); };
  EXPECT_TRUE(applies("conv_transpose3d.fwd fp32 n1 c8 k4 d3 kd2 s2 bias"));
  EXPECT_TRUE(applies("conv3d.bwd_data fp32 n1 c4 k4 d6 h3 w4 kd2 kh1 kw2 sd2 sh1 sw2"));
  EXPECT_TRUE(applies("conv3d.bwd_data fp32 n1 c64 k6 d4 kd1"));  // the k1 head
  EXPECT_FALSE(applies("conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd2 s2 op1"));  // output padding
  EXPECT_FALSE(applies("conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd3 s2"));      // overlapping taps
  EXPECT_FALSE(applies("conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd2 s3"));      // gaps
  EXPECT_FALSE(applies("conv_transpose3d.fwd fp32 n1 c4 k4 d3 kd2 s2 dil2"));
  EXPECT_FALSE(applies("conv3d.bwd_data fp32 n1 c4 k4 d5 kd2 s2"));  // the last input plane has no tap
  EXPECT_FALSE(applies("conv3d.bwd_data fp32 n1 c4 k4 d4 kd2 s2 p1"));
}

// Shapes with one or two row blocks and at least 2*kMinCols output columns,
// so the GEMM's columns are cut into tiles: contract, overlapping scatter,
// non-overlapping scatter; and bwd_weight with column tiles of dw or
// reduction chunks.
TEST(ConvRef, TiledPathsMatchDirect) {
  const struct {
    const char* desc;
    std::int64_t cols;  // the tiled GEMM's output columns
  } cases[] = {
      {"conv3d.fwd fp32 n1 c4 k520 d3 kd3 p1 bias", 520},
      {"conv3d.bwd_data fp32 n1 c520 k4 d3 kd3 p1", 520},
      {"conv_transpose3d.fwd fp32 n1 c8 k160 g2 d2 h3 w1 kd2 s2 bias", 8 * 80},
      {"conv_transpose3d.bwd_data fp32 n1 c520 k4 d2 kd2 s2", 520},
  };
  for (const auto& c : cases) {
    const ConvProblem p = desc(c.desc);
    ASSERT_GT(detail::col_tiles(c.cols, p.n * p.groups), 1) << c.desc;
    expect_fast_matches_direct(p, 77);
  }
  // db summed with the fill (dy small: conv3d; dy large and non-overlapping:
  // conv_transpose3d k = s) and in a pass of its own (overlapping).
  for (const char* s : {"conv3d.bwd_weight fp32 n2 c2 k4 d24 kd3 p1 bias",  // reduction chunks
                        "conv3d.bwd_weight fp32 n2 c6 k8 g2 d20 kd3 p1 bias",  // groups and chunks
                        "conv3d.bwd_weight fp32 n1 c520 k6 d3 kd1 bias",  // column tiles (the k1 head)
                        "conv_transpose3d.bwd_weight fp32 n2 c6 k200 g2 d2 kd2 s2 bias",  // column tiles
                        "conv_transpose3d.bwd_weight fp32 n2 c4 k6 g2 d12 kd2 s2 bias",  // reduction chunks
                        "conv_transpose3d.bwd_weight fp32 n2 c4 k6 g2 d12 kd3 s2 p1 bias"}) {  // overlapping
    const ConvProblem p = desc(s);
    const detail::WgradSplit split = detail::wgrad_split(detail::make_geom(p));
    ASSERT_GT(split.tiles * split.chunks, 1) << s;
    expect_fast_matches_direct(p, 78);
  }
}

// The error-free transformations are exact (checked in MPFR), so Dot2 is.
TEST(ConvRef, TwoProdAndTwoSumAreExact) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> e(-300, 300);
  mpfr_t x, y;
  mpfr_init2(x, 2200);
  mpfr_init2(y, 2200);
  for (int i = 0; i < 20000; ++i) {
    const double a = std::ldexp(u(rng), e(rng)), b = std::ldexp(u(rng), e(rng));
    double p, err, s, es;
    two_prod(a, b, p, err);
    mpfr_set_d(x, a, MPFR_RNDN);
    mpfr_mul_d(x, x, b, MPFR_RNDN);  // exact at 2200 bits
    mpfr_set_d(y, p, MPFR_RNDN);
    mpfr_add_d(y, y, err, MPFR_RNDN);
    ASSERT_EQ(mpfr_cmp(x, y), 0) << a << " * " << b;
    two_sum(a, b, s, es);
    mpfr_set_d(x, a, MPFR_RNDN);
    mpfr_add_d(x, x, b, MPFR_RNDN);
    mpfr_set_d(y, s, MPFR_RNDN);
    mpfr_add_d(y, y, es, MPFR_RNDN);
    ASSERT_EQ(mpfr_cmp(x, y), 0) << a << " + " << b;
  }
  mpfr_clear(x);
  mpfr_clear(y);
}

TEST(ConvRef, BadInputsAreInputErrors) {
  const ConvProblem p = desc("conv3d.fwd fp32 n1 c4 k4 d4 kd3 p1 bias");
  Outputs in = generated_inputs(Problem{p}, parse_fill("signed", 1));
  in.erase(Role::b);
  try {
    conv(p, refs(in), Impl::fast);
    FAIL() << "accepted a missing bias";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "b");
  }
  in.emplace(Role::b, Tensor(DType::fp32, {5}));
  try {
    conv(p, refs(in), Impl::direct);
    FAIL() << "accepted a bias of the wrong shape";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "b");
  }
  const ConvProblem big = desc("conv3d.fwd fp32 n1 c64 k64 d32 kd3 p1");
  try {
    conv(big, {}, Impl::mpfr);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(e.field() == "impl" || e.field() == "x");
  }
  const Outputs bin = generated_inputs(Problem{big}, parse_fill("signed", 1));
  try {
    conv(big, refs(bin), Impl::mpfr);
    FAIL() << "mpfr accepted a large problem";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "impl");
  }
}

TEST(ConvRef, FilesRoundTrip) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kgate_ref_files_" + std::to_string(::getpid()));
  fs::create_directories(dir / "in");
  const Problem p = parse_descriptor("conv3d.bwd_weight bf16 n1 c4 k4 d5 kd3 p1 bias");
  const Outputs in = generated_inputs(p, parse_fill("signed", 21));
  for (const auto& [role, t] : in) write_npy((dir / "in" / (std::string(kgate::name(role)) + ".npy")).string(), t.view());
  run_reference_files(p, (dir / "in").string(), Impl::direct, (dir / "out").string());
  const Outputs want = run_reference(p, refs(in), Impl::direct);
  std::ifstream js(dir / "out" / "digests.json");
  const auto j = nlohmann::json::parse(js);
  EXPECT_EQ(j.at("problem"), to_descriptor(p));
  EXPECT_EQ(j.at("impl"), "direct");
  for (const auto& [role, t] : want) {
    const Tensor got = read_npy((dir / "out" / (std::string(kgate::name(role)) + ".npy")).string(), DType::fp64);
    EXPECT_EQ(digest(got), digest(t));
    EXPECT_EQ(j.at("outputs").at(std::string(kgate::name(role))), digest(t));
  }
  fs::remove(dir / "in" / "x.npy");
  try {
    run_reference_files(p, (dir / "in").string(), Impl::direct, (dir / "out").string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.field().find("x.npy"), std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kgate::ref
