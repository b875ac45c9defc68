// GroupNorm kernels, properties that need no reference: fused ReLU equals ReLU
// of the unfused output bit for bit, declines carry a reason, the plan is a
// value, the boundary problems reach every plan value, the plan's limits, and
// the two-phase entry (partials, finish) of the sharded global statistics.
#include <gtest/gtest.h>

#include <set>

#include "kernels/api.hpp"
#include "reference/conv3d/ref.hpp"
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

namespace kgate {
namespace {

// The boundary problems reach what the plan can select: every vector width,
// every column-pass count, single, two, kThreads and kThreads + 1 chunks,
// every supported dtype pair, the one-element group; each is supported.
TEST(GroupNormKernel, BoundaryProblemsReachEveryPlanValue) {
  for (const char* op : {"groupnorm.fwd", "groupnorm.bwd"}) {
    const auto probs = kernels::boundary_problems(op);
    ASSERT_FALSE(probs.empty()) << op;
    std::set<std::int64_t> v, passes, chunks;
    std::set<std::string> pairs, descriptors;
    bool smallest = false;
    for (const auto& b : probs) {
      EXPECT_EQ(op_dir_name(b.problem), op) << b.why;
      ASSERT_TRUE(kernels::is_supported(b.problem)) << b.why;
      EXPECT_TRUE(descriptors.insert(to_descriptor(b.problem)).second) << "twice: " << b.why;
      const kernels::Plan pl = kernels::plan(b.problem);
      v.insert(pl.params.at("V"));
      passes.insert(pl.params.at("col_iters"));
      chunks.insert(pl.params.at("chunks"));
      const auto& g = std::get<GroupNormProblem>(b.problem);
      pairs.insert(std::string(name(g.src)) + ":" + std::string(name(g.dst)));
      smallest |= g.group_size() == 1;
    }
    EXPECT_EQ(v, (std::set<std::int64_t>{1, 2, 4, 8})) << op;
    EXPECT_EQ(passes, (std::set<std::int64_t>{1, 2, 3, 4})) << op;
    for (std::int64_t c : {1, 2, 256, 257}) EXPECT_TRUE(chunks.count(c)) << op << " chunks " << c;
    EXPECT_EQ(pairs.size(), 5u) << op;
    EXPECT_TRUE(smallest) << op;
  }
  EXPECT_FALSE(kernels::unreachable_branches("groupnorm.fwd").empty());
}

// The plan's limits, checked without a run: the largest column count, batch
// and group are supported and one more is declined; the chunk count never
// passes the grid's 65535 even where S would need more chunks of the base size.
TEST(GroupNormKernel, PlanLimits) {
  auto ok = [](const std::string& d) { return kernels::is_supported(parse_descriptor(d)).ok; };
  EXPECT_TRUE(ok("groupnorm.fwd fp32 n1 c8192 g1024 d1"));   // 1024 columns of 8
  EXPECT_FALSE(ok("groupnorm.fwd fp32 n1 c8200 g1025 d1"));  // 1025 columns of 8
  EXPECT_TRUE(ok("groupnorm.fwd fp32 n65535 c8 g1 d1"));
  EXPECT_FALSE(ok("groupnorm.fwd fp32 n65536 c8 g1 d1"));
  // Cg * S = 2^31 - 1 (Cg = 1, S = 2^31 - 1 = 7 * 31 * 151 * 65537) and 2^31.
  EXPECT_TRUE(ok("groupnorm.fwd fp32 n1 c1 g1 d7 h4681 w65537"));
  EXPECT_FALSE(ok("groupnorm.fwd fp32 n1 c1 g1 d2048 h1024 w1024"));
  for (const char* d : {"groupnorm.fwd fp32 n1 c256 g256 d64 h1024 w16383", "groupnorm.bwd bf16 n1 c8 g8 d1024 h1024 w2047"}) {
    const Problem p = parse_descriptor(d);
    ASSERT_TRUE(kernels::is_supported(p)) << d;
    const kernels::Plan pl = kernels::plan(p);
    EXPECT_LE(pl.params.at("chunks"), 65535) << d;
    const auto& g = std::get<GroupNormProblem>(p);
    EXPECT_GE(pl.params.at("chunks") * pl.params.at("chunk_rows"), g.spatial[0] * g.spatial[1] * g.spatial[2]) << d;
    EXPECT_EQ(pl.params.at("chunk_rows") % pl.params.at("rows_par"), 0) << d;
  }
}

// One part: partials then finish is run() bit for bit (every output, forward
// and backward, one and several chunks, with and without affine and ReLU).
TEST(GroupNormKernel, TwoPhasesOfOnePartAreTheRun) {
  for (const char* d : {"groupnorm.fwd bf16 n2 c64 g8 d6 relu", "groupnorm.fwd fp32 n1 c6 g2 d40 h33 w9",
                        "groupnorm.fwd fp16:fp16 n1 c32 g8 d4 noaffine", "groupnorm.bwd bf16 n2 c64 g8 d6 relu",
                        "groupnorm.bwd fp32 n1 c6 g2 d40 h33 w9", "groupnorm.bwd fp16:fp32 n1 c32 g8 d4 noaffine relu"}) {
    const Problem p = parse_descriptor(d);
    const auto& g = std::get<GroupNormProblem>(p);
    const ref::Outputs in = ref::make_inputs(p, parse_fill("signed", 7));
    std::map<Role, const Tensor*> ip;
    for (const auto& [r, t] : in) ip[r] = &t;
    const auto whole = kernels::run(p, kernels::plan(p), ip);
    const Tensor part = kernels::groupnorm_partials(g, ip);
    EXPECT_EQ(part.dims(), (g.dir == GnDir::fwd ? Dims{g.n, g.groups, 3} : Dims{g.n, g.c, 2})) << d;
    const auto two = kernels::groupnorm_finish(g, ip, part, g.group_size());
    ASSERT_EQ(two.size(), whole.size()) << d;
    for (const auto& [r, t] : whole) EXPECT_EQ(digest(two.at(r)), digest(t)) << d << " " << name(r);
    // The group size enters the backward's coefficients: a larger whole
    // volume changes dx.
    if (g.dir == GnDir::bwd) {
      EXPECT_NE(digest(kernels::groupnorm_finish(g, ip, part, 2 * g.group_size()).at(Role::dx)),
                digest(whole.at(Role::dx)))
          << d;
    }
  }
}

TEST(GroupNormKernel, FinishRefusesPartialsOfAnotherShape) {
  const GroupNormProblem g = std::get<GroupNormProblem>(parse_descriptor("groupnorm.fwd fp32 n1 c8 g2 d4"));
  const ref::Outputs in = ref::make_inputs(g, parse_fill("signed", 1));
  std::map<Role, const Tensor*> ip;
  for (const auto& [r, t] : in) ip[r] = &t;
  EXPECT_THROW(kernels::groupnorm_finish(g, ip, Tensor(DType::fp32, {1, 2, 2}), g.group_size()), std::invalid_argument);
  EXPECT_THROW(kernels::groupnorm_finish(g, ip, Tensor(DType::fp64, {1, 2, 3}), g.group_size()), std::invalid_argument);
  EXPECT_THROW(kernels::groupnorm_finish(g, ip, Tensor(DType::fp32, {1, 2, 3}), g.group_size() - 1),
               std::invalid_argument);
}

}  // namespace
}  // namespace kgate
