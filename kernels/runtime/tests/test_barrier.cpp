// Barriers on the host backend: ordering, and divergence reported with the
// kernel, workgroup, work-items and sites (never a hang).
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::error_of;

namespace {

// Phase 1: every work-item increments a counter. Phase 2 (after the barrier):
// every work-item reads it. With a working barrier all read the block size.
KGATE_KERNEL(count_then_read, int* counter, int* seen) {
  const unsigned t = rt::flat_thread_idx();
  int* c = counter + rt::block_idx().x;
  rt::atomic_add(c, 1);
  rt::barrier();
  seen[rt::block_idx().x * rt::block_dim().x + t] = rt::atomic_add(c, 0);
}

// Ping-pong through LDS over many epochs: value moves one work-item to the
// left per round; after `rounds` rounds item t holds (t + rounds) % n.
KGATE_KERNEL(rotate_rounds, int* out, int rounds) {
  KGATE_LDS(buf, int, 256);
  const unsigned t = rt::flat_thread_idx();
  const unsigned n = rt::block_dim().x;
  int v = static_cast<int>(t);
  for (int r = 0; r < rounds; ++r) {
    buf[t] = v;
    rt::barrier();
    v = buf[(t + 1) % n];
    rt::barrier();
  }
  out[t] = v;
}

KGATE_KERNEL(early_exit, int* out) {
  const unsigned t = rt::flat_thread_idx();
  if (rt::block_idx().x == 1 && t == 3) return;  // exits before the barrier
  rt::barrier();
  out[t] = 1;
}

int g_line_a = 0, g_line_b = 0;
KGATE_KERNEL(two_sites, int* out) {
  const unsigned t = rt::flat_thread_idx();
  if (t < 32) {
    g_line_a = __LINE__; rt::barrier();
  } else {
    g_line_b = __LINE__; rt::barrier();
  }
  out[t] = 1;
}

// Trip count depends on the work-item: work-item 5 runs one more round.
KGATE_KERNEL(uneven_loop, int* out) {
  const unsigned t = rt::flat_thread_idx();
  const int rounds = t == 5 ? 3 : 2;
  for (int r = 0; r < rounds; ++r) rt::barrier();
  out[t] = rounds;
}

class Barrier : public ::testing::TestWithParam<int> {
 protected:
  rt::host::ScopedConfig cfg_{[] {
    auto c = rt::test::test_config();
    c.threads = GetParam();
    return c;
  }()};
};

TEST_P(Barrier, OrdersPhases) {
  const unsigned n = 256, groups = 8;
  rt::DeviceBuffer<int> counter(groups), seen(n * groups);
  rt::device_memset(counter.data(), 0, counter.bytes());
  KGATE_LAUNCH(count_then_read, (rt::LaunchConfig{groups, n}), counter.data(), seen.data());
  for (int v : seen.download()) ASSERT_EQ(v, static_cast<int>(n));
}

TEST_P(Barrier, ManyEpochs) {
  const unsigned n = 200;
  const int rounds = 37;
  rt::DeviceBuffer<int> out(n);
  KGATE_LAUNCH(rotate_rounds, (rt::LaunchConfig{1, n}), out.data(), rounds);
  const auto v = out.download();
  for (unsigned t = 0; t < n; ++t) ASSERT_EQ(v[t], static_cast<int>((t + rounds) % n)) << t;
}

TEST_P(Barrier, EarlyExitIsDivergence) {
  rt::DeviceBuffer<int> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(early_exit, (rt::LaunchConfig{2, 64}), out.data()); });
  EXPECT_NE(msg.find("barrier divergence"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel 'early_exit'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("workgroup (1,0,0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("work-item (3,0,0) exited"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_barrier.cpp:"), std::string::npos) << msg;
}

TEST_P(Barrier, TwoSitesIsDivergence) {
  rt::DeviceBuffer<int> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(two_sites, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("barrier divergence"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel 'two_sites'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("workgroup (0,0,0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_barrier.cpp:" + std::to_string(g_line_a)), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_barrier.cpp:" + std::to_string(g_line_b)), std::string::npos) << msg;
  EXPECT_NE(g_line_a, g_line_b);
}

TEST_P(Barrier, UnevenTripCountIsDivergence) {
  rt::DeviceBuffer<int> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(uneven_loop, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("barrier divergence"), std::string::npos) << msg;
  EXPECT_NE(msg.find("uneven_loop"), std::string::npos) << msg;
}

TEST_P(Barrier, RecoversAfterDivergence) {
  // The fibers abandoned by a divergent workgroup are reused cleanly.
  rt::DeviceBuffer<int> out(64);
  EXPECT_FALSE(error_of([&] { KGATE_LAUNCH(early_exit, (rt::LaunchConfig{2, 64}), out.data()); }).empty());
  EXPECT_TRUE(error_of([&] { KGATE_LAUNCH(rotate_rounds, (rt::LaunchConfig{1, 64}), out.data(), 3); }).empty());
  const auto v = out.download();
  for (unsigned t = 0; t < 64; ++t) ASSERT_EQ(v[t], static_cast<int>((t + 3) % 64));
}

INSTANTIATE_TEST_SUITE_P(Threads, Barrier, ::testing::Values(1, 2));

}  // namespace
