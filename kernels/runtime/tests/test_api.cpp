// The runtime interface on the host backend: launch checks, indices, kernel
// arguments and templates, atomics, events, fiber stacks, error recovery.
#include <set>
#include <thread>
#include <tuple>

#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::error_of;

namespace {

KGATE_KERNEL(record_ids, unsigned* out) {
  const rt::dim3 b = rt::block_idx(), t = rt::thread_idx(), bd = rt::block_dim(), gd = rt::grid_dim();
  const unsigned wg = (b.z * gd.y + b.y) * gd.x + b.x;
  const unsigned wi = (t.z * bd.y + t.y) * bd.x + t.x;
  const unsigned i = wg * static_cast<unsigned>(bd.count()) + wi;
  out[4 * i] = b.x | b.y << 8 | b.z << 16;
  out[4 * i + 1] = t.x | t.y << 8 | t.z << 16;
  out[4 * i + 2] = rt::flat_thread_idx();
  out[4 * i + 3] = wi;
}

TEST(Api, EveryWorkItemOfA3DLaunchRunsOnce) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  const rt::dim3 grid(3, 2, 2), block(4, 3, 5);
  const std::size_t n = grid.count() * block.count();
  rt::DeviceBuffer<unsigned> out(4 * n);
  KGATE_LAUNCH(record_ids, (rt::LaunchConfig{grid, block}), out.data());
  const auto v = out.download();
  std::set<std::pair<unsigned, unsigned>> seen;
  for (std::size_t i = 0; i < n; ++i) {
    seen.insert({v[4 * i], v[4 * i + 1]});
    ASSERT_EQ(v[4 * i + 2], v[4 * i + 3]);  // flat index is x-fastest
  }
  EXPECT_EQ(seen.size(), n);
}

template <int Scale, class T>
KGATE_KERNEL(scale_by, const T* x, T* y, T offset) {
  const unsigned i = rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x;
  y[i] = x[i] * Scale + offset;
}

struct Params {
  int a;
  float b;
};
KGATE_KERNEL(by_value, Params p, float* out) { out[rt::thread_idx().x] = static_cast<float>(p.a) + p.b; }

KGATE_KERNEL(record_wave, int* out) {
  if (rt::flat_thread_idx() == 0) out[rt::block_idx().x] = rt::wave_size();
}

// A ThreadConfig is this thread's alone: two threads launch at the same time
// with different targets and each launch's work-groups (on whichever pool
// threads run them) see their own launcher's wave size; the process's
// configuration and the other thread's are untouched, and it nests.
TEST(Api, ThreadConfigIsPerThreadAndReachesEveryWorkGroupOfItsLaunches) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  const rt::host::Config gfx = rt::host::config_for(rt::Target::gfx942, rt::host::process_config());
  const rt::host::Config sm90 = rt::host::config_for(rt::Target::sm90, gfx);
  auto waves_on = [](const rt::host::Config& c, std::vector<int>& got) {
    const rt::host::ThreadConfig tc(c);
    for (int rep = 0; rep < 20; ++rep) {
      rt::DeviceBuffer<int> out(16);
      KGATE_LAUNCH(record_wave, (rt::LaunchConfig{16, 64}), out.data());
      for (int w : out.download()) got.push_back(w);
    }
  };
  std::vector<int> a, b;
  std::thread t1([&] { waves_on(sm90, a); });
  std::thread t2([&] { waves_on(gfx, b); });
  t1.join();
  t2.join();
  ASSERT_EQ(a.size(), 320u);
  ASSERT_EQ(b.size(), 320u);
  for (int w : a) ASSERT_EQ(w, 32);
  for (int w : b) ASSERT_EQ(w, 64);
  EXPECT_EQ(rt::host::config().target, rt::Target::gfx942);  // this thread: the process's
  {
    const rt::host::ThreadConfig outer(sm90);
    EXPECT_EQ(rt::host::config().target, rt::Target::sm90);
    EXPECT_EQ(rt::host::process_config().target, rt::Target::gfx942);
    {
      const rt::host::ThreadConfig inner(gfx);
      EXPECT_EQ(rt::host::config().target, rt::Target::gfx942);
    }
    EXPECT_EQ(rt::host::config().target, rt::Target::sm90);
  }
  EXPECT_EQ(rt::host::config().target, rt::Target::gfx942);
  rt::host::Config bad = sm90;
  bad.wave_size = 64;
  EXPECT_THROW(rt::host::ThreadConfig{bad}, rt::host::ConfigError);
}

TEST(Api, TemplateKernelsAndStructArguments) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  std::vector<double> x(128);
  for (int i = 0; i < 128; ++i) x[i] = i;
  rt::DeviceBuffer<double> dx(128), dy(128);
  dx.upload(x);
  KGATE_LAUNCH((scale_by<3, double>), (rt::LaunchConfig{2, 64}), dx.data(), dy.data(), 0.5);
  const auto y = dy.download();
  for (int i = 0; i < 128; ++i) ASSERT_EQ(y[i], 3.0 * i + 0.5);
  rt::DeviceBuffer<float> out(8);
  KGATE_LAUNCH(by_value, (rt::LaunchConfig{1, 8}), Params{2, 0.25f}, out.data());
  for (float f : out.download()) ASSERT_EQ(f, 2.25f);
}

KGATE_KERNEL(noop, int* out) { out[0] = 0; }

TEST(Api, LaunchesTheDeviceWouldRefuseFail) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<int> out(1);
  const std::string big = error_of([&] { KGATE_LAUNCH(noop, (rt::LaunchConfig{1, rt::dim3(32, 33)}), out.data()); });
  EXPECT_NE(big.find("launch of kernel 'noop'"), std::string::npos) << big;
  EXPECT_NE(big.find("1056 work-items"), std::string::npos) << big;
  EXPECT_NE(error_of([&] { KGATE_LAUNCH(noop, (rt::LaunchConfig{0, 64}), out.data()); }).find("empty grid"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { KGATE_LAUNCH(noop, (rt::LaunchConfig{1, 1024}), out.data()); }), "");
}

KGATE_KERNEL(atomics, int* i32, unsigned* u32, std::uint64_t* u64, std::int64_t* i64) {
  const int t = static_cast<int>(rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x);
  rt::atomic_add(&i32[0], 1);
  rt::atomic_sub(&i32[1], 2);
  rt::atomic_min(&i32[2], 1000 - t);
  rt::atomic_max(&i32[3], t);
  rt::atomic_or(&u32[0], 1u << (t % 32));
  rt::atomic_and(&u32[1], ~(1u << (t % 16)));
  rt::atomic_xor(&u32[2], 1u);
  rt::atomic_cas(&i32[4], 0, t + 1);  // exactly one work-item wins
  rt::atomic_add(&u64[0], std::uint64_t{1} << 33);
  rt::atomic_max(&i64[0], std::int64_t{-1} - t);
  rt::atomic_exch(&i32[5], 7);
}

TEST(Api, IntegerAtomics) {
  auto c = rt::test::test_config();
  c.threads = 2;
  rt::host::ScopedConfig sc(c);
  const int n = 8 * 128;
  rt::DeviceBuffer<int> i32(6);
  rt::DeviceBuffer<unsigned> u32(3);
  rt::DeviceBuffer<std::uint64_t> u64(1);
  rt::DeviceBuffer<std::int64_t> i64(1);
  i32.upload({0, 0, 1 << 30, -1, 0, 0});
  u32.upload({0, ~0u, 0});
  u64.upload({0});
  i64.upload({std::int64_t{-1} << 40});
  KGATE_LAUNCH(atomics, (rt::LaunchConfig{8, 128}), i32.data(), u32.data(), u64.data(), i64.data());
  const auto a = i32.download();
  EXPECT_EQ(a[0], n);
  EXPECT_EQ(a[1], -2 * n);
  EXPECT_EQ(a[2], 1000 - (n - 1));
  EXPECT_EQ(a[3], n - 1);
  EXPECT_GE(a[4], 1);
  EXPECT_LE(a[4], n);
  EXPECT_EQ(a[5], 7);
  const auto u = u32.download();
  EXPECT_EQ(u[0], ~0u);
  EXPECT_EQ(u[1], 0xffff0000u);
  EXPECT_EQ(u[2], 0u);  // n is even
  EXPECT_EQ(u64.download()[0], static_cast<std::uint64_t>(n) << 33);
  EXPECT_EQ(i64.download()[0], -1);
}

TEST(Api, EventsMeasureElapsedTime) {
  rt::Stream s;
  rt::Event a, b, never;
  a.record(&s);
  rt::DeviceBuffer<int> out(1);
  KGATE_LAUNCH(noop, (rt::LaunchConfig{64, 64, 0, &s}), out.data());
  b.record(&s);
  b.synchronize();
  EXPECT_GE(rt::elapsed_ms(a, b), 0.0f);
  EXPECT_NE(error_of([&] { (void)rt::elapsed_ms(a, never); }).find("never recorded"), std::string::npos);
  rt::device_synchronize();
}

// A Graph records without running and runs its sequence once per replay (the
// host has no graphs: the recording is the callable; the devices capture it).
KGATE_KERNEL(add_one, int* out) {
  if (rt::thread_idx().x == 0) out[0] += 1;
}

TEST(Api, GraphReplaysItsSequence) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<int> out(1);
  rt::device_memset(out.data(), 0, sizeof(int));
  int recorded = 0;
  rt::Graph g([&] {
    ++recorded;
    KGATE_LAUNCH(add_one, (rt::LaunchConfig{1, 64}), out.data());
    KGATE_LAUNCH(add_one, (rt::LaunchConfig{1, 64}), out.data());
  });
  EXPECT_FALSE(rt::has_graphs);
  EXPECT_EQ(out.download()[0], 0) << "constructing a graph ran its sequence";
  g.replay();
  g.replay();
  rt::device_synchronize();
  EXPECT_EQ(out.download()[0], 4);
  EXPECT_EQ(recorded, 2);
}

// A register tile of 32 KiB per work-item fits the fiber stack.
KGATE_KERNEL(big_frame, float* out) {
  float tile[8192];
  for (int i = 0; i < 8192; ++i) tile[i] = static_cast<float>(i % 7);
  rt::barrier();
  float s = 0.0f;
  for (int i = 0; i < 8192; ++i) s += tile[i];
  out[rt::thread_idx().x] = s;
}

TEST(Api, FiberStacksHoldLargeFrames) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<float> out(256);
  KGATE_LAUNCH(big_frame, (rt::LaunchConfig{1, 256}), out.data());
  float expect = 0.0f;
  for (int i = 0; i < 8192; ++i) expect += static_cast<float>(i % 7);
  for (float f : out.download()) ASSERT_EQ(f, expect);
}

KGATE_KERNEL(throws_in_kernel, int* out) {
  if (rt::thread_idx().x == 9) {
    KGATE_LDS(small, int, 4);
    small[4] = 1;  // out of range
  }
  rt::barrier();
  out[0] = 1;
}

TEST(Api, ErrorsNameKernelWorkgroupAndWorkItemAndDoNotHang) {
  for (int threads : {1, 2}) {
    auto c = rt::test::test_config();
    c.threads = threads;
    rt::host::ScopedConfig sc(c);
    rt::DeviceBuffer<int> out(1);
    const std::string msg =
        error_of([&] { KGATE_LAUNCH(throws_in_kernel, (rt::LaunchConfig{4, 64}), out.data()); });
    EXPECT_NE(msg.find("kernel 'throws_in_kernel'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("work-item (9,0,0)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_api.cpp:"), std::string::npos) << msg;
    // The next launch on the same fibers works.
    KGATE_LAUNCH(noop, (rt::LaunchConfig{4, 64}), out.data());
  }
}

TEST(Api, CapabilitiesOfTheHostBackend) {
  static_assert(rt::backend == rt::Backend::host);
  static_assert(rt::has_mfma);
  EXPECT_STREQ(rt::backend_name(rt::backend), "host");
  EXPECT_NE(error_of([] { rt::barrier(); }).find("outside a kernel"), std::string::npos);
}

}  // namespace
