// Problems: output-shape formula (PyTorch's), validation naming the field,
// descriptor and JSON round trips, cost counts.
#include <gtest/gtest.h>

#include <random>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/problem.hpp"

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
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c64 k6 g4 d8 kd3"), "groups");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d2 kd5"), "out[d]");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n0 c4 k4 d2 kd1"), "n");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 s0"), "stride[d]");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 op1"), "output_padding[d]");
  EXPECT_EQ(rejected_field("conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 op2"), "output_padding[d]");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16:fp32:bf16 n1 c4 k4 d8 kd3"), "acc");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1 form=halo halo=1,1,1"), "pad[d]");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 halo=1,0,0"), "halo[d]");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 bogus7"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf17 n1 c4 k4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 k4 d8 kd3 n2"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.fwd bf16 n1 c4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("conv3d.sideways bf16 n1 c4 k4 d8 kd3"), "descriptor");
  EXPECT_EQ(rejected_field("groupnorm.fwd bf16 n1 c64 g7 d8"), "groups");
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

TEST(Problem, ShapeForms) {
  // Sharded along D: the adapter form keeps the H/W padding.
  const ConvProblem a = conv("conv3d.fwd bf16 n1 c64 k64 d66 h128 w128 kd3 pd0 ph1 pw1 form=adapter halo=1,0,0");
  EXPECT_EQ(a.out(), (Axis3{64, 128, 128}));
  const ConvProblem h = conv("conv3d.fwd bf16 n1 c64 k64 d66 h130 w130 kd3 form=halo halo=1,1,1");
  EXPECT_EQ(h.out(), (Axis3{64, 128, 128}));
}

TEST(Problem, DescriptorCanonicalForms) {
  EXPECT_EQ(to_descriptor(parse_descriptor("conv3d.fwd bf16 n1 c64 k64 d128 h128 w128 kd3 s1 p1")),
            "conv3d.fwd bf16 n1 c64 k64 d128 kd3 p1");
  EXPECT_EQ(to_descriptor(parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d128 relu")),
            "groupnorm.fwd bf16 n1 c64 g8 d128 relu");
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
    p.bias = r(0, 1);
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
  for (const char* d : {"groupnorm.fwd bf16 n1 c64 g8 d128 relu", "groupnorm.bwd fp16:fp16 n2 c6 g3 d2 h3 w5 eps1e-06 noaffine",
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

}  // namespace
}  // namespace kgate
