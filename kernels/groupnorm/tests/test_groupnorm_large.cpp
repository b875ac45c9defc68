// 64-bit indexing: a GroupNorm forward whose tensors pass 2^31 elements, on
// the host backend. Constant groups (gn_exact constant=1) make the result
// exact: y[.., c] = beta[c] and mean is the group's centre, so the check is
// bitwise (digests), and a wrapped 32-bit offset anywhere would show.
#include <gtest/gtest.h>

#include "kernels/api.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/fill.hpp"

namespace kgate {
namespace {

TEST(GroupNormLarge, PastTwoToTheThirtyOneElements) {
  // 8 channels x 268,959,744 positions = 2,151,677,952 elements > 2^31.
  const Problem p = parse_descriptor("groupnorm.fwd bf16:bf16 n1 c8 g4 d1024 h512 w513");
  const auto& g = std::get<GroupNormProblem>(p);
  ASSERT_GT(g.x_dims()[1] * g.x_dims()[2] * g.x_dims()[3] * g.c, std::int64_t{1} << 31);
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const Fill f = parse_fill("gn_exact:constant=1", 7);
  std::map<Role, Tensor> in;
  for (const auto& s : inputs(p)) {
    Tensor t(s.dtype, s.dims);
    fill_tensor(f, p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  std::map<Role, const Tensor*> ptr;
  for (const auto& [r, t] : in) ptr[r] = &t;
  const auto out = kernels::run(p, kernels::plan(p), ptr);
  in.erase(Role::x);  // memory back before building the expectation

  const Tensor& beta = in.at(Role::beta);
  Tensor want(DType::bf16, g.x_dims());
  for (std::int64_t i = 0; i < want.numel(); ++i) want.set(i, beta.get(i % g.c));
  EXPECT_EQ(digest(out.at(Role::y)), digest(want));
  // The last elements, past 2^31, explicitly.
  for (std::int64_t i = want.numel() - 16; i < want.numel(); ++i)
    EXPECT_EQ(out.at(Role::y).get(i), beta.get(i % g.c)) << i;
}

}  // namespace
}  // namespace kgate
