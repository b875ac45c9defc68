// Workgroup order on the host backend: shuffling changes nothing for a
// correct kernel and exposes a planted order-dependent one.
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;

namespace {

// Correct: each workgroup reduces its own slice with a fixed tree.
KGATE_KERNEL(slice_sums, const float* x, float* out) {
  KGATE_LDS(s, float, 64);
  const unsigned t = rt::thread_idx().x, b = rt::block_idx().x;
  s[t] = x[b * 64 + t];
  rt::barrier();
  for (unsigned stride = 32; stride > 0; stride /= 2) {
    float v = 0.0f;
    if (t < stride) v = static_cast<float>(s[t]) + static_cast<float>(s[t + stride]);
    rt::barrier();
    if (t < stride) s[t] = v;
    rt::barrier();
  }
  if (t == 0) out[b] = s[0];
}

// Planted bug: workgroups take output slots from a ticket counter, so the
// result depends on the order in which workgroups run.
KGATE_KERNEL(ticket_order, int* counter, int* out) {
  if (rt::thread_idx().x == 0) {
    const int slot = rt::atomic_add(counter, 1);
    out[slot] = static_cast<int>(rt::block_idx().x);
  }
}

std::vector<int> run_ticket(rt::host::Order order, std::uint64_t seed) {
  auto c = rt::test::test_config();
  c.order = order;
  c.seed = seed;
  rt::host::ScopedConfig sc(c);
  rt::DeviceBuffer<int> counter(1), out(32);
  rt::device_memset(counter.data(), 0, 4);
  KGATE_LAUNCH(ticket_order, (rt::LaunchConfig{32, 64}), counter.data(), out.data());
  return out.download();
}

TEST(Order, ShufflingChangesNothingForACorrectKernel) {
  const unsigned groups = 97;
  std::vector<float> x(groups * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(1 + i % 13) + static_cast<float>(i);
  rt::DeviceBuffer<float> dx(x.size());
  dx.upload(x);
  std::vector<std::vector<float>> results;
  for (auto order : {rt::host::Order::in_order, rt::host::Order::reversed, rt::host::Order::shuffled})
    for (int threads : {1, 2})
      for (std::uint64_t seed : {1u, 2u}) {
        auto c = rt::test::test_config();
        c.order = order;
        c.threads = threads;
        c.seed = seed;
        rt::host::ScopedConfig sc(c);
        rt::DeviceBuffer<float> out(groups);
        KGATE_LAUNCH(slice_sums, (rt::LaunchConfig{groups, 64}), dx.data(), out.data());
        results.push_back(out.download());
      }
  for (const auto& r : results) EXPECT_EQ(std::memcmp(r.data(), results[0].data(), groups * 4), 0);
}

TEST(Order, ShufflingExposesAnOrderDependentKernel) {
  const auto in_order = run_ticket(rt::host::Order::in_order, 0);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(in_order[i], i);
  const auto reversed = run_ticket(rt::host::Order::reversed, 0);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(reversed[i], 31 - i);
  const auto shuffled = run_ticket(rt::host::Order::shuffled, 42);
  EXPECT_NE(shuffled, in_order);
  // A seed reproduces its order.
  EXPECT_EQ(run_ticket(rt::host::Order::shuffled, 42), shuffled);
}

}  // namespace
