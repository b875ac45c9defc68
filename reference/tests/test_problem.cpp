// Problems: output-shape formula (PyTorch's), validation naming the field,
// descriptor and JSON round trips, cost counts.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <random>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/problem.hpp"
#include "reference/reduction.hpp"

namespace kgate {
namespace {

ConvProblem conv(std::string_view d) { return std::get<ConvProblem>(parse_descriptor(d)); }

// The field an invalid descriptor is rejected for.
std::string rejected_field(std::string_view d) {
  try {
    parse_descriptor(d);
  } catch (const InputError& e) {
    return e.field();
  }
  return "<accepted>";
}

TEST(Problem, OutputShapeMatchesPyTorch) {
  // torch.nn.functional.conv3d(ones(1,1,128,128,128), ones(1,1,3,3,3), padding=1).shape[2:] == 128^3
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c3 k64 d128 kd3 p1").out(), (Axis3{128, 128, 128}));
  // stride 2, k=3, p=1, in=7 -> floor((7+2-2-1)/2)+1 = 4
  EXPECT_EQ(conv("conv3d.fwd fp32 n1 c1 k1 d7 kd3 s2 p1").out(), (Axis3{4, 4, 4}));
  // dilation 2, k=3, p=0, in=9 -> 9-4 = 5
  EXPECT_EQ(conv("conv3d.fwd fp32 n1 c1 k1 d9 kd3 dil2").out(), (Axis3{5, 5, 5}));
  // asymmetric padding and per-axis values
  EXPECT_EQ(conv("conv3d.fwd fp32 n1 c1 k1 d5 h6 w7 kd3 kh1 kw2 pd0:1 ph0 pw2:0").out(), (Axis3{4, 6, 8}));
  // conv_transpose3d k=2 s=2: 8 -> 16; torch formula (in-1)*s - 2p + dil*(k-1) + op + 1
  EXPECT_EQ(conv("conv_transpose3d.fwd bf16 n1 c1024 k512 d8 kd2 s2 bias").out(), (Axis3{16, 16, 16}));
  EXPECT_EQ(conv("conv_transpose3d.fwd fp32 n1 c2 k2 d5 kd3 s2 p1 op1").out(), (Axis3{10, 10, 10}));
  EXPECT_EQ(conv("conv_transpose3d.fwd fp32 n1 c2 k2 d4 kd3 s3 p1 dil2 op2").out(), (Axis3{14, 14, 14}));
}

TEST(Problem, TensorShapesAndLayouts) {
  const ConvProblem p = conv("conv3d.fwd bf16 n2 c8 k16 g4 d6 h5 w4 kd3 kh2 kw1");
  EXPECT_EQ(p.x_dims(), (Dims{2, 6, 5, 4, 8}));
  EXPECT_EQ(p.w_dims(), (Dims{16, 3, 2, 1, 2}));
  EXPECT_EQ(p.y_dims(), (Dims{2, 4, 4, 4, 16}));
  const ConvProblem t = conv("conv_transpose3d.fwd bf16 n1 c8 k6 g2 d3 kd2 s2");
  EXPECT_EQ(t.w_dims(), (Dims{8, 2, 2, 2, 3}));
  EXPECT_EQ(t.y_dims(), (Dims{1, 6, 6, 6, 6}));
  // Directions: bwd_data reads dy and w, writes dx.
  const ConvProblem bd = conv("conv3d.bwd_data bf16 n1 c4 k8 d4 kd3 p1");
  ASSERT_EQ(bd.inputs().size(), 2u);
  EXPECT_EQ(bd.inputs()[0].role, Role::dy);
  EXPECT_EQ(bd.outputs()[0].role, Role::dx);
  EXPECT_EQ(bd.outputs()[0].dims, bd.x_dims());
  const ConvProblem bw = conv("conv3d.bwd_weight bf16:fp32 n1 c4 k8 d4 kd3 p1 bias");
  EXPECT_EQ(bw.outputs()[0].dims, bw.w_dims());
  EXPECT_EQ(bw.outputs()[0].dtype, DType::fp32);
  EXPECT_EQ(bw.outputs()[1].role, Role::db);
  EXPECT_EQ(bw.reduction_length(), 64);
}

TEST(Problem, ValidationNamesTheField) {
  // A descriptor's errors name its tokens, not the problem's internal fields.
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c64 k6 g4 d8 kd3"), "g");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d2 kd5"), "d");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 h2 kd1 kh5"), "h");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n0 c4 k4 d2 kd1"), "n");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c0 k4 d2 kd1"), "c");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k0 d2 kd1"), "k");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d0 kd1"), "d");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 w0 kd1"), "w");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 kw0"), "kw");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 s0"), "sd");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 sh0"), "sh");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 dilw0"), "dilw");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 ph-1"), "ph");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 pw0:-1"), "pw");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 op1"), "opd");
  EXPECT_EQ(rejected_field("conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 op2"), "opd");
  EXPECT_EQ(rejected_field("conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 oph2"), "oph");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16:fp32:bf16 n1 c4 k4 d8 kd3"), "acc");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1 form=halo halo=1,1,1"), "pd");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 pd0:1 form=halo halo=1,1,1"), "pd");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 halo=1,0,0"), "halo");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 bogus7"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf17 n1 c4 k4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 n2"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.sideways bf16 n1 c4 k4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("groupnorm.fwd bf16 n1 c64 g7 d8"), "g");
  EXPECT_EQ(rejected_field("groupnorm.fwd bf16 n1 c64 g8 d8 h0"), "h");
  EXPECT_EQ(rejected_field("groupnorm.fwd bf16 n1 c64 g8 d8 eps0"), "eps");
  // Shapes whose element count overflows int64 are rejected, not wrapped.
  EXPECT_EQ(rejected_field("conv3d.fwd fp32 n16000000 c16000000 k1 d16000000 kd1"), "x");
  // The message names the allowed range.
  try {
    parse_descriptor("conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 op2");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("max(stride, dilation)"), std::string::npos) << e.what();
  }
}

TEST(Problem, PerAxisKeysSetOneAxis) {
  // sd/dild/opd set D only (they once applied to all three axes).
  const ConvProblem s = conv("conv3d.fwd bf16 n1 c1 k1 d8 kd1 sd2");
  EXPECT_EQ(s.stride, (Axis3{2, 1, 1}));
  EXPECT_EQ(s.y_dims(), (Dims{1, 4, 8, 8, 1}));
  EXPECT_EQ(to_descriptor(s), "conv3d.fwd bf16:bf16 n1 c1 k1 d8 kd1 sd2 sh1 sw1");
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c1 k1 d8 kd2 dild2").dilation, (Axis3{2, 1, 1}));
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c1 k1 d8 kd2 dilw3").dilation, (Axis3{1, 1, 3}));
  EXPECT_EQ(conv("conv_transpose3d.fwd bf16 n1 c1 k1 d8 kd2 s2 opd1").output_padding, (Axis3{1, 0, 0}));
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c1 k1 d8 kd2 pd1").pad_front, (Axis3{1, 0, 0}));
  // The extents' d key is also the default of h and w.
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c1 k1 d8 w5 kd3 kh1").in, (Axis3{8, 8, 5}));
  EXPECT_EQ(conv("conv3d.fwd bf16 n1 c1 k1 d8 w5 kd3 kh1").kernel, (Axis3{3, 1, 3}));
}

// A conv descriptor written from per-axis tokens, and the values it must parse to.
struct AxisCase {
  std::string text;
  ConvProblem want;
};

// Every per-axis field (d h w, kd kh kw, s|sd sh sw, p|pd ph pw with F or
// F:B, dil|dild dilh dilw, op|opd oph opw), each either absent, given for all
// axes, or given per axis for a subset of the axes; tokens in random order.
rc::Gen<AxisCase> gen_axis_case() {
  return rc::gen::exec([] {
    ConvProblem p;
    p.op = *rc::gen::element(ConvOp::conv3d, ConvOp::conv_transpose3d);
    p.dir = *rc::gen::element(ConvDir::fwd, ConvDir::bwd_data, ConvDir::bwd_weight);
    p.n = *rc::gen::inRange<std::int64_t>(1, 3);
    p.cin = *rc::gen::inRange<std::int64_t>(1, 5);
    p.cout = *rc::gen::inRange<std::int64_t>(1, 5);
    std::vector<std::string> tokens{"n" + std::to_string(p.n), "c" + std::to_string(p.cin),
                                    "k" + std::to_string(p.cout)};
    const char axes[] = {'d', 'h', 'w'};
    // Each axis of a family present with probability 1/2.
    auto subset = [] {
      std::array<bool, 3> on{};
      for (auto& o : on) o = *rc::gen::arbitrary<bool>();
      return on;
    };
    // Extents: the d key is required and defaults h and w.
    auto extent = [&](Axis3& v, const std::string& prefix, std::int64_t lo, std::int64_t hi) {
      const auto on = subset();
      v.fill(*rc::gen::inRange<std::int64_t>(lo, hi + 1));
      tokens.push_back(prefix + "d" + std::to_string(v[0]));
      for (int a = 1; a < 3; ++a)
        if (on[a]) {
          v[a] = *rc::gen::inRange<std::int64_t>(lo, hi + 1);
          tokens.push_back(prefix + axes[a] + std::to_string(v[a]));
        }
    };
    // Families with an all-axes key: absent, all axes, or a subset per axis.
    auto family = [&](Axis3& v, const std::string& all, const std::string& prefix, auto value, auto text) {
      switch (*rc::gen::inRange(0, 3)) {
        case 0: break;
        case 1: {
          const auto x = value(-1);
          v.fill(x);
          tokens.push_back(all + text(x));
          break;
        }
        default: {
          const auto on = subset();
          for (int a = 0; a < 3; ++a)
            if (on[a]) {
              v[a] = value(a);
              tokens.push_back(prefix + axes[a] + text(v[a]));
            }
        }
      }
    };
    auto str = [](std::int64_t x) { return std::to_string(x); };
    auto small = [](std::int64_t lo, std::int64_t hi) {
      return [=](int) { return *rc::gen::inRange<std::int64_t>(lo, hi + 1); };
    };
    extent(p.kernel, "k", 1, 4);
    // Inputs at least as large as any dilated kernel: every conv3d output >= 1.
    extent(p.in, "", 10, 20);
    family(p.stride, "s", "s", small(1, 3), str);
    family(p.dilation, "dil", "dil", small(1, 3), str);
    // Padding: value F or F:B; the pair travels through a packed integer.
    Axis3 packed{};
    family(packed, "p", "p", [](int) {
      const auto f = *rc::gen::inRange<std::int64_t>(0, 3), b = *rc::gen::inRange<std::int64_t>(0, 3);
      return f * 16 + b;
    }, [](std::int64_t x) {
      return x / 16 == x % 16 ? std::to_string(x / 16) : std::to_string(x / 16) + ":" + std::to_string(x % 16);
    });
    for (int a = 0; a < 3; ++a) {
      p.pad_front[a] = packed[a] / 16;
      p.pad_back[a] = packed[a] % 16;
    }
    if (p.op == ConvOp::conv_transpose3d) {
      // Output padding below max(stride, dilation) on the axes it is given for.
      auto limit = [&](int a) { return std::max(p.stride[a], p.dilation[a]) - 1; };
      const std::int64_t common = std::min({limit(0), limit(1), limit(2)});
      family(p.output_padding, "op", "op",
             [&](int a) { return *rc::gen::inRange<std::int64_t>(0, (a < 0 ? common : limit(a)) + 1); }, str);
    }
    const auto order = *rc::gen::container<std::vector<std::uint32_t>>(tokens.size(), rc::gen::arbitrary<std::uint32_t>());
    std::vector<std::size_t> idx(tokens.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return order[a] < order[b]; });
    std::string text = std::string(name(p.op)) + "." + std::string(name(p.dir)) + " fp32";
    for (std::size_t i : idx) text += " " + tokens[i];
    p.src = p.dst = DType::fp32;
    return AxisCase{text, p};
  });
}

RC_GTEST_PROP(Descriptor, PerAxisFieldsParseToTheirValues, ()) {
  const AxisCase c = *gen_axis_case();
  RC_LOG() << c.text << "\n";
  const ConvProblem got = std::get<ConvProblem>(parse_descriptor(c.text));
  RC_ASSERT(got.in == c.want.in);
  RC_ASSERT(got.kernel == c.want.kernel);
  RC_ASSERT(got.stride == c.want.stride);
  RC_ASSERT(got.pad_front == c.want.pad_front);
  RC_ASSERT(got.pad_back == c.want.pad_back);
  RC_ASSERT(got.dilation == c.want.dilation);
  RC_ASSERT(got.output_padding == c.want.output_padding);
  RC_ASSERT(got == c.want);
  // The canonical form parses back to the same values.
  RC_ASSERT(std::get<ConvProblem>(parse_descriptor(to_descriptor(got))) == c.want);
}

RC_GTEST_PROP(Descriptor, GroupNormExtentsParseToTheirValues, ()) {
  const auto d = *rc::gen::inRange<std::int64_t>(1, 40);
  const auto h = *rc::gen::maybe(rc::gen::inRange<std::int64_t>(1, 40));
  const auto w = *rc::gen::maybe(rc::gen::inRange<std::int64_t>(1, 40));
  std::string text = "groupnorm.fwd bf16 n1 c4 g2 d" + std::to_string(d);
  if (w) text += " w" + std::to_string(*w);
  if (h) text += " h" + std::to_string(*h);
  const auto got = std::get<GroupNormProblem>(parse_descriptor(text));
  RC_ASSERT(got.spatial == (Axis3{d, h ? *h : d, w ? *w : d}));
}

TEST(Problem, ShapeForms) {
  // Sharded along D: the adapter form keeps the H/W padding.
  const ConvProblem a = conv("conv3d.fwd bf16 n1 c64 k64 d66 h128 w128 kd3 pd0 ph1 pw1 form=adapter halo=1,0,0");
  EXPECT_EQ(a.out(), (Axis3{64, 128, 128}));
  const ConvProblem h = conv("conv3d.fwd bf16 n1 c64 k64 d66 h130 w130 kd3 form=halo halo=1,1,1");
  EXPECT_EQ(h.out(), (Axis3{64, 128, 128}));
}

TEST(Problem, DescriptorCanonicalForms) {
  EXPECT_EQ(to_descriptor(parse_descriptor("conv3d.fwd bf16 n1 c64 k64 d128 h128 w128 kd3 s1 p1")),
            "conv3d.fwd bf16:bf16 n1 c64 k64 d128 kd3 p1");
  // A bare low-precision dtype means different outputs for the two operators,
  // so the canonical form spells both sides.
  EXPECT_EQ(to_descriptor(parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d128 relu")),
            "groupnorm.fwd bf16:fp32 n1 c64 g8 d128 relu");
  EXPECT_EQ(to_descriptor(parse_descriptor("conv3d.fwd fp16 n1 c4 k4 d8 kd3")), "conv3d.fwd fp16:fp16 n1 c4 k4 d8 kd3");
  EXPECT_EQ(to_descriptor(parse_descriptor("groupnorm.bwd fp16 n1 c4 g2 d8")), "groupnorm.bwd fp16:fp32 n1 c4 g2 d8");
  EXPECT_EQ(to_descriptor(parse_descriptor("conv3d.fwd fp32 n1 c4 k4 d8 kd3")), "conv3d.fwd fp32 n1 c4 k4 d8 kd3");
  EXPECT_EQ(canonical_descriptor("conv3d.fwd bf16 n1 c4 k4 d8 kd3 s1"), "conv3d.fwd bf16:bf16 n1 c4 k4 d8 kd3");
  EXPECT_EQ(canonical_descriptor("conv3d.fwd bf16 n1 c4 k4 d2 kd5"), std::nullopt);
  EXPECT_EQ(to_descriptor(parse_descriptor("groupnorm.bwd bf16:bf16 n1 c64 g8 d4 eps1e-3 noaffine")),
            "groupnorm.bwd bf16:bf16 n1 c64 g8 d4 eps0.001 noaffine");
  EXPECT_EQ(to_descriptor(parse_descriptor("conv3d.fwd bf16:bf16:fp64 n1 c4 k4 d8 h7 w6 kd3 pd0:1 ph1 pw1")),
            "conv3d.fwd bf16:bf16:fp64 n1 c4 k4 d8 h7 w6 kd3 pd0:1 ph1 pw1");
}

ConvProblem random_conv(std::mt19937_64& rng) {
  auto r = [&](int lo, int hi) { return static_cast<std::int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const DType dts[] = {DType::fp64, DType::fp32, DType::bf16, DType::fp16};
  for (;;) {
    ConvProblem p;
    p.op = r(0, 1) ? ConvOp::conv3d : ConvOp::conv_transpose3d;
    p.dir = static_cast<ConvDir>(r(0, 2));
    p.groups = r(1, 3);
    p.n = r(1, 3);
    p.cin = p.groups * r(1, 4);
    p.cout = p.groups * r(1, 4);
    for (int a = 0; a < 3; ++a) {
      p.in[a] = r(1, 12);
      p.kernel[a] = r(1, 4);
      p.stride[a] = r(1, 3);
      p.dilation[a] = r(1, 3);
      p.pad_front[a] = r(0, 2);
      p.pad_back[a] = r(0, 2);
      if (p.op == ConvOp::conv_transpose3d) p.output_padding[a] = r(0, std::max(p.stride[a], p.dilation[a]) - 1);
    }
    p.bias = r(0, 1) && p.dir != ConvDir::bwd_data;
    p.src = dts[r(0, 3)];
    p.dst = dts[r(0, 3)];
    p.acc = r(0, 1) ? DType::fp32 : DType::fp64;
    try {
      p.validate();
      return p;
    } catch (const InputError&) {
    }
  }
}

TEST(Problem, DescriptorAndJsonRoundTrip) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 5000; ++i) {
    const Problem p = random_conv(rng);
    const std::string d = to_descriptor(p);
    const Problem q = parse_descriptor(d);
    ASSERT_EQ(std::get<ConvProblem>(q), std::get<ConvProblem>(p)) << d;
    ASSERT_EQ(to_descriptor(q), d);
    const Problem r = problem_from_json(nlohmann::json::parse(to_json(p).dump()));
    ASSERT_EQ(std::get<ConvProblem>(r), std::get<ConvProblem>(p)) << d;
  }
  for (const char* d : {"groupnorm.fwd bf16:fp32 n1 c64 g8 d128 relu", "groupnorm.bwd fp16:fp16 n2 c6 g3 d2 h3 w5 eps1e-06 noaffine",
                        "groupnorm.fwd fp32 n1 c1 g1 d1"}) {
    const Problem p = parse_descriptor(d);
    EXPECT_EQ(to_descriptor(p), d);
    EXPECT_EQ(std::get<GroupNormProblem>(problem_from_json(to_json(p))), std::get<GroupNormProblem>(p));
  }
}

TEST(Problem, JsonErrorsNameTheField) {
  auto field_of = [](const char* text) {
    try {
      problem_from_json(nlohmann::json::parse(text), "p");
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16"})"), "<accepted>");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16","colour":1})"), "p.colour");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":"1","cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16"})"), "p.n");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"up","n":1,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16"})"), "p.dir");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,8],"kernel":[3,3,3],"src":"bf16"})"), "p.in");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3]})"), "p.src");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":6,"groups":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16"})"), "p.groups");
  EXPECT_EQ(field_of(R"([1,2])"), "p");
}

TEST(Problem, CostCounts) {
  const ConvProblem p = conv("conv3d.fwd bf16 n1 c64 k64 d128 kd3 p1");
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 128 * 128 * 128 * 64 * 64 * 27);
  EXPECT_EQ(p.min_bytes(), 2 * (128LL * 128 * 128 * 64 * 2 + 64 * 27 * 64));
  const ConvProblem t = conv("conv_transpose3d.fwd bf16 n1 c1024 k512 d8 kd2 s2 bias");
  EXPECT_DOUBLE_EQ(t.flops(), 2.0 * 512 * 1024 * 512 * 8 + 16.0 * 16 * 16 * 512);
  const GroupNormProblem g = std::get<GroupNormProblem>(parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d16 relu"));
  // x bf16 in, y fp32 out, gamma/beta fp32, mean/rstd fp32 per (n, g)
  EXPECT_EQ(g.min_bytes(), 16 * 16 * 16 * 64 * (2 + 4) + 2 * 64 * 4 + 2 * 8 * 4);
  EXPECT_EQ(g.group_size(), 8 * 16 * 16 * 16);
}

TEST(Problem, CountsBeyondInt64AreRefusedOrExact) {
  // x: 2^61 fp64 elements fit in int64, their 2^64 bytes do not.
  EXPECT_EQ(rejected_field("conv3d.fwd fp64 n16777216 c4194304 k1 d32 kd1"), "x");
  // x and y: 2^62 bytes each; together 2^63 bytes.
  EXPECT_EQ(rejected_field("conv3d.fwd fp32 n16777216 c2097152 k2097152 d32 kd1"), "bytes");
  EXPECT_EQ(rejected_field("groupnorm.bwd bf16 n16777216 c2097152 g1 d32"), "bytes");
  // Just below: x 2^62 bytes, y 2^42, w 2^23.
  const ConvProblem p = conv("conv3d.fwd fp64 n16777216 c1048576 k1 d32 kd1");
  EXPECT_EQ(p.min_bytes(), (std::int64_t{1} << 62) + (std::int64_t{1} << 42) + (std::int64_t{1} << 23));
  // FLOPs beyond 2^63 are rounded, never wrapped: 2 * 2^24 * 8^3 * 4096 * 4096 * 27.
  const ConvProblem f = conv("conv3d.fwd bf16 n16777216 c4096 k4096 d8 kd3 p1");
  EXPECT_DOUBLE_EQ(f.flops(), 27.0 * 0x1p58);
}

TEST(Problem, JsonIntegersThatWouldWrapAreRefused) {
  auto field_of = [](const char* text) {
    try {
      problem_from_json(parse_json(text, "f.json"), "p");
    } catch (const InputError& e) {
      return e.field() + ": " + e.message();
    }
    return std::string("<accepted>");
  };
  // 2^64 - 1 read through get<int64_t> was -1; 2^63 was INT64_MIN.
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":18446744073709551615,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf16"})"),
            "p.n: integer out of range: 18446744073709551615");
  EXPECT_EQ(field_of(R"({"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,9223372036854775808,8],"kernel":[3,3,3],"src":"bf16"})"),
            "p.in[1]: integer out of range: 9223372036854775808");
  EXPECT_EQ(field_of(R"({"op":"groupnorm","dir":"fwd","n":1,"c":4,"groups":2,"spatial":[8,8,8],"src":"bf16","eps":1e400})"),
            "f.json: eps: malformed JSON: number overflow parsing '1e400'");
  // The reduction plan's int fields: 2^32 + 8 was read as 8.
  nlohmann::json j = to_json(ReductionPlan::mfma(256, 4));
  j["chunk"] = std::int64_t{4294967304};
  try {
    reduction_from_json(j, "plan");
    ADD_FAILURE() << "chunk 2^32 + 8 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "plan.chunk: integer out of range: 4294967304");
  }
  j["chunk"] = std::uint64_t{18446744073709551615u};
  EXPECT_THROW(reduction_from_json(j, "plan"), InputError);
}

}  // namespace
}  // namespace kgate
