// GroupNorm kernels, properties that need no reference: fused ReLU equals ReLU
// of the unfused output bit for bit, declines carry a reason, the plan is a
// value.
#include <gtest/gtest.h>

#include "kernels/api.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/fill.hpp"

namespace kgate {
namespace {

std::map<Role, Tensor> make_inputs(const Problem& p, const Fill& f) {
  std::map<Role, Tensor> in;
  for (const auto& s : inputs(p)) {
    Tensor t(s.dtype, s.dims);
    if (!s.derived) fill_tensor(f, p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  return in;
}

std::map<Role, const Tensor*> ptrs(const std::map<Role, Tensor>& m) {
  std::map<Role, const Tensor*> r;
  for (const auto& [k, v] : m) r[k] = &v;
  return r;
}

TEST(GroupNormKernel, FusedReluIsReluOfTheUnfusedOutput) {
  for (const char* d : {"groupnorm.fwd bf16 n2 c64 g8 d6 relu", "groupnorm.fwd fp16:fp16 n1 c24 g3 d5 h4 w3 relu",
                        "groupnorm.fwd fp32 n1 c6 g2 d7 relu", "groupnorm.fwd bf16:bf16 n1 c32 g8 d4 relu noaffine"}) {
    const Problem fused = parse_descriptor(d);
    GroupNormProblem plain_p = std::get<GroupNormProblem>(fused);
    plain_p.relu = false;
    const Problem plain = plain_p;
    const auto in = make_inputs(fused, parse_fill("signed", 5));
    const auto yf = kernels::run(fused, kernels::plan(fused), ptrs(in));
    const auto yp = kernels::run(plain, kernels::plan(plain), ptrs(in));
    const Tensor& a = yf.at(Role::y);
    const Tensor& b = yp.at(Role::y);
    Tensor relu_b(b.dtype(), b.dims());
    for (std::int64_t i = 0; i < b.numel(); ++i) {
      const double v = b.get(i);
      relu_b.set(i, (v > 0 || std::isnan(v)) ? v : 0.0);
    }
    EXPECT_EQ(digest(a), digest(relu_b)) << d;
    // Statistics do not depend on the ReLU.
    EXPECT_EQ(digest(yf.at(Role::mean)), digest(yp.at(Role::mean))) << d;
    EXPECT_EQ(digest(yf.at(Role::rstd)), digest(yp.at(Role::rstd))) << d;
  }
}

TEST(GroupNormKernel, DeclinesWithAReason) {
  auto reason = [](const char* d) { return kernels::is_supported(parse_descriptor(d)).reason; };
  EXPECT_TRUE(kernels::is_supported(parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d4")));
  EXPECT_NE(reason("groupnorm.fwd fp64:fp64 n1 c64 g8 d4").find("dtype pair"), std::string::npos);
  EXPECT_NE(reason("groupnorm.fwd bf16:fp16 n1 c64 g8 d4").find("dtype pair"), std::string::npos);
  // 4099 channels, odd groups: V = 1, more columns than one workgroup covers.
  EXPECT_NE(reason("groupnorm.fwd fp32 n1 c4099 g1 d1").find("columns"), std::string::npos);
}

TEST(GroupNormKernel, PlanIsAValue) {
  for (const char* d : {"groupnorm.fwd bf16 n1 c64 g8 d32 relu", "groupnorm.bwd bf16 n2 c1024 g8 d8 relu"}) {
    const Problem p = parse_descriptor(d);
    const kernels::Plan a = kernels::plan(p), b = kernels::plan(p);
    EXPECT_EQ(a, b);
    EXPECT_EQ(kernels::plan_from_json(nlohmann::json::parse(kernels::to_json(a).dump())), a);
    EXPECT_NE(kernels::to_string(a).find("launch gn_"), std::string::npos);
    EXPECT_FALSE(a.reduction.empty());
  }
  // A plan for another problem is refused.
  const Problem p = parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d4");
  const Problem q = parse_descriptor("groupnorm.fwd bf16 n1 c64 g8 d5");
  const auto in = make_inputs(p, parse_fill("signed", 1));
  EXPECT_THROW(kernels::run(p, kernels::plan(q), ptrs(in)), std::invalid_argument);
}

}  // namespace
}  // namespace kgate
