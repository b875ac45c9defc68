// Device memory on the host backend: poison, guard regions, range-checked
// copies.
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::bits_of;
using kgate::rt::test::error_of;

namespace {

KGATE_KERNEL(write_even, float* y, int n) {
  const int i = static_cast<int>(rt::block_idx().x * rt::block_dim().x + rt::thread_idx().x);
  if (i < n && i % 2 == 0) y[i] = 1.0f;
}

// Reads one element past the end of x (an off-by-one bound).
KGATE_KERNEL(shift_left_buggy, const float* x, float* y, int n) {
  const int i = static_cast<int>(rt::thread_idx().x);
  if (i < n) y[i] = x[i + 1] * 2.0f;
}

KGATE_KERNEL(write_past_end, float* y, int n) {
  const int i = static_cast<int>(rt::thread_idx().x);
  y[i] = 3.0f;  // no bound: items >= n write into the guard
  (void)n;
}

KGATE_KERNEL(write_before_start, float* y) {
  if (rt::thread_idx().x == 0) y[-1] = 3.0f;
}

// Writes and reads 2^40 bytes before y: far from every allocation (an
// unmapped page), where no guard lies.
KGATE_KERNEL(access_far_away, float* y) {
  float* far = y - (std::int64_t{1} << 38);
  far[rt::thread_idx().x] = 1.0f;
  y[rt::thread_idx().x] = far[rt::thread_idx().x + 1];
}

class Memory : public ::testing::Test {
 protected:
  rt::host::ScopedConfig cfg_{rt::test::test_config()};
};

TEST_F(Memory, FreshMemoryIsPoison) {
  rt::DeviceBuffer<std::uint16_t> b(100);
  for (std::uint16_t h : b.download()) ASSERT_EQ(h, rt::host::poison16);
  // The pattern is a signalling NaN in fp32 and bf16.
  const float f = std::bit_cast<float>(rt::host::poison32);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_EQ(rt::host::poison32 & 0x00400000u, 0u);  // quiet bit clear
  EXPECT_TRUE(std::isnan(kgate::bf16_bits_to_fp32(rt::host::poison16)));
  EXPECT_EQ(rt::host::poison16 & 0x0040u, 0u);
}

TEST_F(Memory, UnwrittenOutputIsVisibleAsPoison) {
  const int n = 100;
  rt::DeviceBuffer<float> y(n);
  KGATE_LAUNCH(write_even, (rt::LaunchConfig{2, 64}), y.data(), n);
  const auto v = y.download();
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      ASSERT_EQ(v[i], 1.0f);
    } else {
      ASSERT_EQ(bits_of(v[i]), rt::host::poison32) << i;
      ASSERT_TRUE(std::isnan(v[i]));
    }
  }
}

// A read one element past the end traps in the back guard page (the
// allocation ends where the page begins, whatever its size) and is reported
// after the kernel, naming the kernel, the allocation and the offset; the
// next kernel finds the guard closed again.
TEST_F(Memory, ReadPastTheEndIsReported) {
  for (const int n : {64, 61, 1}) {
    std::vector<float> x(n, 1.0f);
    rt::DeviceBuffer<float> dx(n), dy(n);
    dx.upload(x);
    const std::string msg =
        error_of([&] { KGATE_LAUNCH(shift_left_buggy, (rt::LaunchConfig{1, 64}), dx.data(), dy.data(), n); });
    EXPECT_NE(msg.find("kernel 'shift_left_buggy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a read outside the device allocation"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(" + std::to_string(4 * n) + " bytes): byte at offset +" + std::to_string(4 * n) +
                       " (past the end) was read"),
              std::string::npos)
        << msg;
    EXPECT_EQ(error_of([&] { KGATE_LAUNCH(write_even, (rt::LaunchConfig{1, 64}), dy.data(), n); }), "");
  }
}

TEST_F(Memory, WritePastTheEndIsReported) {
  rt::DeviceBuffer<float> y(60);
  const std::string msg = error_of([&] { KGATE_LAUNCH(write_past_end, (rt::LaunchConfig{1, 64}), y.data(), 60); });
  EXPECT_NE(msg.find("kernel 'write_past_end'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(240 bytes)"), std::string::npos) << msg;
}

TEST_F(Memory, WriteBeforeTheStartIsReported) {
  rt::DeviceBuffer<float> y(8);
  const std::string msg = error_of([&] { KGATE_LAUNCH(write_before_start, (rt::LaunchConfig{1, 1}), y.data()); });
  EXPECT_NE(msg.find("before the start"), std::string::npos) << msg;
}

// A wild access fails the launch, naming the address and the nearest
// allocation, instead of killing the process; the next launch runs clean.
TEST_F(Memory, FarOutOfBoundsAccessFailsTheLaunch) {
  rt::DeviceBuffer<float> y(64);
  const std::string msg = error_of([&] { KGATE_LAUNCH(access_far_away, (rt::LaunchConfig{1, 64}), y.data()); });
  EXPECT_NE(msg.find("launch of kernel 'access_far_away'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outside every device allocation"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { KGATE_LAUNCH(write_even, (rt::LaunchConfig{1, 64}), y.data(), 64); }), "");
}

TEST_F(Memory, CopiesAreRangeChecked) {
  rt::DeviceBuffer<float> d(10);
  std::vector<float> h(11, 0.0f);
  const std::string msg = error_of([&] { rt::copy_h2d(d.data(), h.data(), 11 * sizeof(float)); });
  EXPECT_NE(msg.find("copy_h2d(44 bytes at offset 0): past the end of a device allocation of 40 bytes"),
            std::string::npos)
      << msg;
  EXPECT_NE(error_of([&] { rt::copy_d2h(h.data(), d.data() + 5, 6 * sizeof(float)); }), "");
  EXPECT_NE(error_of([&] { rt::device_memset(d.data() + 1, 0, 40); }), "");
  EXPECT_EQ(error_of([&] { rt::copy_h2d(d.data(), h.data(), 10 * sizeof(float)); }), "");
}

TEST_F(Memory, RoundTripAndFill) {
  std::vector<int> h(1000);
  for (int i = 0; i < 1000; ++i) h[i] = i * 7;
  rt::DeviceBuffer<int> a(1000), b(1000);
  a.upload(h);
  rt::copy_d2d(b.data(), a.data(), a.bytes());
  EXPECT_EQ(b.download(), h);
  rt::device_memset(b.data(), 0, b.bytes());
  for (int v : b.download()) ASSERT_EQ(v, 0);
}

TEST_F(Memory, FreeOfAForeignPointerFails) {
  int x = 0;
  EXPECT_NE(error_of([&] { rt::device_free(&x); }).find("device_free"), std::string::npos);
}

}  // namespace
