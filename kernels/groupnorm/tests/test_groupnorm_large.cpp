// 64-bit indexing: a GroupNorm forward whose tensors pass 2^31 elements, on
// the host backend. Constant groups (gn_exact constant=1) make the result
// exact: y[.., c] = beta[c] and mean is the group's centre, so the check is
// bitwise, and a wrapped 32-bit offset anywhere would show.
//
// The kernels run through kernels::launch on caller-owned memory (the C
// ABI's entry point; on the host backend device memory is host memory and
// every launch completes when issued): no device copies of x and y, so the
// test needs x, y and the small tensors only (about 8.6 GB), and CTest runs
// it beside other tests (RESOURCE_LOCK large_memory against the other
// tests of that size).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/api.hpp"
#include "reference/descriptor.hpp"
#include "reference/fill.hpp"
#include "reference/parallel.hpp"

namespace kgate {
namespace {

TEST(GroupNormLarge, PastTwoToTheThirtyOneElements) {
  const Problem p = parse_descriptor("groupnorm.fwd bf16:bf16 n1 c8 g4 d1024 h512 w513");
  const auto& g = std::get<GroupNormProblem>(p);
  ASSERT_GT(g.x_dims()[1] * g.x_dims()[2] * g.x_dims()[3] * g.c, std::int64_t{1} << 31);
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const Fill f = parse_fill("gn_exact:constant=1", 7);
  std::map<Role, Tensor> in, out;
  for (const auto& s : inputs(p)) {
    Tensor t(s.dtype, s.dims);
    fill_tensor(f, p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  for (const auto& s : outputs(p)) out.emplace(s.role, Tensor(s.dtype, s.dims, Tensor::Unfilled{}));
  const kernels::Plan plan = kernels::plan(p);
  std::vector<std::byte> workspace(plan.workspace_bytes + 16);
  kernels::DeviceArgs a;
  for (const auto& [r, t] : in) a.in[r] = t.data();
  for (auto& [r, t] : out) a.out[r] = t.data();
  a.workspace = plan.workspace_bytes ? workspace.data() : nullptr;
  kernels::launch(p, plan, a);

  // y[i] == beta[i % C] bit for bit, every element (on the element threads).
  const Tensor& beta = in.at(Role::beta);
  const Tensor& y = out.at(Role::y);
  const std::int64_t C = g.c;
  std::atomic<std::int64_t> wrong{0}, first{-1};
  parallel_chunks(y.numel(), [&](std::int64_t lo, std::int64_t hi, std::int64_t) {
    for (std::int64_t i = lo; i < hi; ++i)
      if (y.get(i) != beta.get(i % C)) {
        if (wrong++ == 0) first = i;
      }
  });
  EXPECT_EQ(wrong.load(), 0) << "first wrong element " << first.load();
  for (std::int64_t i = y.numel() - 16; i < y.numel(); ++i) EXPECT_EQ(y.get(i), beta.get(i % C)) << i;
}

}  // namespace
}  // namespace kgate
