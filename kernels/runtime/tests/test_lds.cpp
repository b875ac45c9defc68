// LDS on the host backend: the race checker (both work-items and sites),
// poison, the 64 KiB limit, bounds, static and dynamic declarations.
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::bits_of;
using kgate::rt::test::error_of;

namespace {

int g_write_line = 0, g_read_line = 0;

// Neighbour exchange with the barrier missing: item t writes buf[t], then
// reads buf[t+1], which item t+1 writes in the same epoch.
KGATE_KERNEL(exchange_racy, float* out) {
  KGATE_LDS(buf, float, 64);
  const unsigned t = rt::flat_thread_idx();
  g_write_line = __LINE__; buf[t] = static_cast<float>(t);
  g_read_line = __LINE__; const float v = buf[(t + 1) % 64];
  out[t] = v;
}

KGATE_KERNEL(exchange_ok, float* out) {
  KGATE_LDS(buf, float, 64);
  const unsigned t = rt::flat_thread_idx();
  buf[t] = static_cast<float>(t);
  rt::barrier();
  const float v = buf[(t + 1) % 64];
  out[t] = v;
}

// Every work-item writes the same word: a write-write race.
KGATE_KERNEL(all_write_one, float* out) {
  KGATE_LDS(buf, float, 4);
  buf[0] = 1.0f;
  rt::barrier();
  const float v = buf[0];
  out[rt::flat_thread_idx()] = v;
}

// Reads before the barrier, writes after it: legal (different epochs), and
// every item reading the same word in one epoch is legal too.
KGATE_KERNEL(read_then_write, float* out) {
  KGATE_LDS(buf, float, 64);
  const unsigned t = rt::flat_thread_idx();
  if (t == 0) buf[0] = 5.0f;
  rt::barrier();
  const float v = buf[0];
  rt::barrier();
  buf[t] = v + static_cast<float>(t);
  buf[t] += 1.0f;
  rt::barrier();
  const float w = buf[63 - t];
  out[t] = w;
}

KGATE_KERNEL(read_unwritten, float* out) {
  KGATE_LDS(buf, float, 64);
  const float v = buf[rt::flat_thread_idx()];
  out[rt::flat_thread_idx()] = v;
}

KGATE_KERNEL(too_much_static, float* out) {
  KGATE_LDS(big, float, 20000);  // 80000 bytes > 64 KiB
  big[0] = 1.0f;
  out[0] = 1.0f;
}

KGATE_KERNEL(out_of_range, float* out, int index) {
  KGATE_LDS(buf, float, 16);
  buf[index] = 1.0f;
  out[0] = 1.0f;
}

// Dynamic LDS (ints) and a static array together; both must be usable.
KGATE_KERNEL(dynamic_and_static, int* out) {
  KGATE_LDS_DYNAMIC(dyn, int);
  KGATE_LDS(stat, int, 64);
  const unsigned t = rt::flat_thread_idx();
  dyn[t] = static_cast<int>(t);
  stat[t] = 1000 + static_cast<int>(t);
  rt::barrier();
  const int a = dyn[63 - t];
  const int b = stat[63 - t];
  out[t] = a + b;
  out[64] = static_cast<int>(dyn.size());
}

// Every workgroup reads its dynamic and static LDS before writing them, then
// writes them: what a workgroup reads first must be poison however many
// workgroups ran before it on the same emulator thread.
KGATE_KERNEL(read_then_write_each_group, unsigned* out) {
  KGATE_LDS_DYNAMIC(dyn, unsigned);
  KGATE_LDS(stat, unsigned, 64);
  const unsigned t = rt::flat_thread_idx(), wg = rt::block_idx().x;
  out[wg * 128 + t] = dyn[t];
  out[wg * 128 + 64 + t] = stat[t];
  dyn[t] = wg + 1;
  stat[t] = wg + 1;
}

// Vector access: 4 floats at once.
struct f4 {
  float v[4];
};
KGATE_KERNEL(vector_lds, float* out) {
  KGATE_LDS(buf, float, 256);
  const unsigned t = rt::flat_thread_idx();
  f4 x{{1.0f * t, 2.0f * t, 3.0f * t, 4.0f * t}};
  buf.store<f4>(4 * t, x);
  rt::barrier();
  const f4 y = buf.load<f4>(4 * (63 - t));
  for (int i = 0; i < 4; ++i) out[4 * t + i] = y.v[i];
}

// A 16-byte vector access one float past an aligned start.
struct alignas(16) a16 {
  float v[4];
};
KGATE_KERNEL(misaligned_vector_lds, float* out, int start) {
  KGATE_LDS(buf, float, 64);
  buf.store<a16>(start, a16{{1.0f, 2.0f, 3.0f, 4.0f}});
  out[0] = buf[start];
}

// Asynchronous copies. Each work-item copies 16 bytes of `in` (its own
// a16) into stage 0, zeros into stage 1, commits, and reads both stages of
// its right neighbour after `mode`: 0 wait then barrier (correct), 1 only a
// barrier (the copy has not landed: the reader sees poison), 2 wait without
// a barrier (a race with the neighbour's copy landing).
KGATE_KERNEL(async_copy_kernel, const a16* in, float* out, int mode) {
  KGATE_LDS(buf, float, 2 * 4 * 64);
  const unsigned t = rt::flat_thread_idx();
  buf.copy_async<a16>(4 * t, in + t, true);
  buf.copy_async<a16>(256 + 4 * t, in + t, false);
  rt::async_commit();
  if (mode != 1) rt::async_wait<0>();
  if (mode != 2) rt::barrier();
  const unsigned n = (t + 1) % 64;
  for (int i = 0; i < 4; ++i) out[8 * t + i] = buf[4 * n + i];
  for (int i = 0; i < 4; ++i) out[8 * t + 4 + i] = buf[256 + 4 * n + i];
}

// Groups land in order: three groups in flight, async_wait<N> leaves the
// newest N pending. Work-item 0 only; out[k] is stage k's first float after
// wait<2>, then wait<1>, then wait<0> (each sampled as 0 .. 2 landed).
KGATE_KERNEL(async_groups_kernel, const a16* in, float* out) {
  KGATE_LDS(buf, float, 3 * 4);
  for (int k = 0; k < 3; ++k) {
    buf[4 * k] = -1.0f;
    buf.copy_async<a16>(4 * k, in + k, true);
    rt::async_commit();
  }
  rt::async_wait<2>();
  for (int k = 0; k < 3; ++k) out[k] = buf[4 * k];
  rt::async_wait<1>();
  for (int k = 0; k < 3; ++k) out[3 + k] = buf[4 * k];
  rt::async_wait<0>();
  for (int k = 0; k < 3; ++k) out[6 + k] = buf[4 * k];
}

class Lds : public ::testing::Test {
 protected:
  rt::host::ScopedConfig cfg_{rt::test::test_config()};
};

TEST_F(Lds, RaceIsReportedWithBothWorkItemsAndSites) {
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(exchange_racy, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("LDS race"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel 'exchange_racy'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("workgroup (0,0,0)"), std::string::npos) << msg;
  // Item 0 read buf[1] first; item 1 then writes it: both named, both sites.
  EXPECT_NE(msg.find("work-item (1,0,0) writes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("work-item (0,0,0) read"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_lds.cpp:" + std::to_string(g_write_line)), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_lds.cpp:" + std::to_string(g_read_line)), std::string::npos) << msg;
}

TEST_F(Lds, RaceFreeVariantPasses) {
  rt::DeviceBuffer<float> out(64);
  KGATE_LAUNCH(exchange_ok, (rt::LaunchConfig{1, 64}), out.data());
  const auto v = out.download();
  for (unsigned t = 0; t < 64; ++t) ASSERT_EQ(v[t], static_cast<float>((t + 1) % 64));
}

TEST_F(Lds, CheckerOffLetsTheRaceThrough) {
  auto c = rt::test::test_config();
  c.check_lds = false;
  rt::host::ScopedConfig off(c);
  rt::DeviceBuffer<float> out(64);
  EXPECT_EQ(error_of([&] { KGATE_LAUNCH(exchange_racy, (rt::LaunchConfig{1, 64}), out.data()); }), "");
}

TEST_F(Lds, WriteWriteRace) {
  rt::DeviceBuffer<float> out(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(all_write_one, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("LDS race"), std::string::npos) << msg;
  EXPECT_NE(msg.find("work-item (1,0,0) writes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("work-item (0,0,0) wrote"), std::string::npos) << msg;
}

TEST_F(Lds, EpochsAndSharedReadsAreNotRaces) {
  rt::DeviceBuffer<float> out(64);
  KGATE_LAUNCH(read_then_write, (rt::LaunchConfig{1, 64}), out.data());
  const auto v = out.download();
  for (unsigned t = 0; t < 64; ++t) ASSERT_EQ(v[t], 5.0f + static_cast<float>(63 - t) + 1.0f);
}

TEST_F(Lds, UnwrittenLdsIsPoison) {
  rt::DeviceBuffer<float> out(64);
  KGATE_LAUNCH(read_unwritten, (rt::LaunchConfig{1, 64}), out.data());
  for (float f : out.download()) {
    ASSERT_EQ(bits_of(f), rt::host::poison32);
    ASSERT_TRUE(std::isnan(f));
  }
}

TEST_F(Lds, EachWorkgroupStartsFromPoison) {
  constexpr unsigned kGroups = 8;
  rt::DeviceBuffer<unsigned> out(kGroups * 128);
  KGATE_LAUNCH(read_then_write_each_group, (rt::LaunchConfig{kGroups, 64, 64 * sizeof(unsigned)}), out.data());
  for (unsigned v : out.download()) ASSERT_EQ(v, rt::host::poison32);
}

TEST_F(Lds, StaticLimitEnforced) {
  rt::DeviceBuffer<float> out(1);
  const std::string msg = error_of([&] { KGATE_LAUNCH(too_much_static, (rt::LaunchConfig{1, 64}), out.data()); });
  EXPECT_NE(msg.find("exceeds the gfx942 limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("too_much_static"), std::string::npos) << msg;
}

TEST_F(Lds, DynamicLimitEnforcedAtLaunch) {
  rt::DeviceBuffer<int> out(65);
  const std::string msg = error_of(
      [&] { KGATE_LAUNCH(dynamic_and_static, (rt::LaunchConfig{1, 64, 65537}), out.data()); });
  EXPECT_NE(msg.find("dynamic LDS of 65537 bytes exceeds"), std::string::npos) << msg;
  // Dynamic that fits, but not together with the static array.
  const std::string msg2 = error_of(
      [&] { KGATE_LAUNCH(dynamic_and_static, (rt::LaunchConfig{1, 64, 65536 - 64}), out.data()); });
  EXPECT_NE(msg2.find("exceeds the gfx942 limit"), std::string::npos) << msg2;
}

TEST_F(Lds, IndexOutOfRange) {
  rt::DeviceBuffer<float> out(1);
  const std::string msg = error_of([&] { KGATE_LAUNCH(out_of_range, (rt::LaunchConfig{1, 1}), out.data(), 16); });
  EXPECT_NE(msg.find("LDS index 16 out of range [0, 16)"), std::string::npos) << msg;
  const std::string neg = error_of([&] { KGATE_LAUNCH(out_of_range, (rt::LaunchConfig{1, 1}), out.data(), -1); });
  EXPECT_NE(neg.find("LDS index (negative)"), std::string::npos) << neg;
  EXPECT_EQ(error_of([&] { KGATE_LAUNCH(out_of_range, (rt::LaunchConfig{1, 1}), out.data(), 15); }), "");
}

TEST_F(Lds, DynamicAndStaticCoexist) {
  rt::DeviceBuffer<int> out(65);
  KGATE_LAUNCH(dynamic_and_static, (rt::LaunchConfig{1, 64, 64 * sizeof(int)}), out.data());
  const auto v = out.download();
  for (int t = 0; t < 64; ++t) ASSERT_EQ(v[t], (63 - t) + 1000 + (63 - t));
  EXPECT_EQ(v[64], 64);
}

TEST_F(Lds, VectorAccess) {
  rt::DeviceBuffer<float> out(256);
  KGATE_LAUNCH(vector_lds, (rt::LaunchConfig{1, 64}), out.data());
  const auto v = out.download();
  for (unsigned t = 0; t < 64; ++t)
    for (unsigned i = 0; i < 4; ++i) ASSERT_EQ(v[4 * t + i], static_cast<float>((i + 1) * (63 - t)));
}

TEST_F(Lds, MisalignedVectorAccessIsReported) {
  rt::DeviceBuffer<float> out(1);
  const std::string msg =
      error_of([&] { KGATE_LAUNCH(misaligned_vector_lds, (rt::LaunchConfig{1, 1}), out.data(), 1); });
  EXPECT_NE(msg.find("LDS vector access not aligned to 16 bytes"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { KGATE_LAUNCH(misaligned_vector_lds, (rt::LaunchConfig{1, 1}), out.data(), 4); }), "");
}

TEST_F(Lds, AsynchronousCopyLandsAtTheWaitAndZeroFills) {
  std::vector<a16> host_in(64);
  for (int t = 0; t < 64; ++t)
    for (int i = 0; i < 4; ++i) host_in[t].v[i] = static_cast<float>(10 * t + i);
  rt::DeviceBuffer<a16> in(64);
  in.upload(host_in);
  rt::DeviceBuffer<float> out(8 * 64);
  KGATE_LAUNCH(async_copy_kernel, (rt::LaunchConfig{1, 64}), in.data(), out.data(), 0);
  const auto v = out.download();
  for (int t = 0; t < 64; ++t)
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(v[8 * t + i], static_cast<float>(10 * ((t + 1) % 64) + i));
      ASSERT_EQ(bits_of(v[8 * t + 4 + i]), 0u);  // !valid: zeros
    }
  // Without the wait the copies have not landed: the neighbour's stage is
  // still the LDS poison.
  KGATE_LAUNCH(async_copy_kernel, (rt::LaunchConfig{1, 64}), in.data(), out.data(), 1);
  for (float f : out.download()) ASSERT_EQ(bits_of(f), rt::host::poison32);
  // Without the barrier the neighbour's copy landing races with the read.
  const std::string msg =
      error_of([&] { KGATE_LAUNCH(async_copy_kernel, (rt::LaunchConfig{1, 64}), in.data(), out.data(), 2); });
  EXPECT_NE(msg.find("LDS race"), std::string::npos) << msg;
}

TEST_F(Lds, AsynchronousCopyGroupsLandOldestFirst) {
  std::vector<a16> host_in(3);
  for (int k = 0; k < 3; ++k) host_in[k].v[0] = static_cast<float>(k + 1);
  rt::DeviceBuffer<a16> in(3);
  in.upload(host_in);
  rt::DeviceBuffer<float> out(9);
  KGATE_LAUNCH(async_groups_kernel, (rt::LaunchConfig{1, 1}), in.data(), out.data());
  EXPECT_EQ(out.download(), (std::vector<float>{1, -1, -1, 1, 2, -1, 1, 2, 3}));
}

}  // namespace
