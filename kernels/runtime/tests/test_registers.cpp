// rt::regs on the host backend: in-range indices behave as a plain array,
// an index outside the register array (the off-by-one of a tile loop) is a
// kernel error naming the index and the work-item, without AddressSanitizer.
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::error_of;

namespace {

// Each work-item fills a 2 x 4 tile and writes its sum; `extra` widens the
// column loop past the tile.
KGATE_KERNEL(tile_sum, float* out, int extra) {
  rt::regs<rt::regs<float, 4>, 2> acc{};
  for (int u = 0; u < 2; ++u)
    for (int v = 0; v < 4 + extra; ++v) acc[u][v] = static_cast<float>(u * 4 + v);
  float s = 0.0f;
  for (int u = 0; u < 2; ++u)
    for (int v = 0; v < 4; ++v) s += acc[u][v];
  out[rt::thread_idx().x] = s;
}

TEST(Registers, InRangeIndicesActAsAnArray) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<float> out(8);
  KGATE_LAUNCH(tile_sum, (rt::LaunchConfig{rt::dim3(1), rt::dim3(8)}), out.data(), 0);
  for (float v : out.download()) EXPECT_EQ(v, 28.0f);
  static_assert(sizeof(rt::regs<rt::regs<float, 4>, 2>) == sizeof(float[2][4]));
}

TEST(Registers, AnIndexPastTheTileIsAKernelError) {
  rt::host::ScopedConfig sc(rt::test::test_config());
  rt::DeviceBuffer<float> out(8);
  const std::string e = error_of([&] {
    KGATE_LAUNCH(tile_sum, (rt::LaunchConfig{rt::dim3(1), rt::dim3(8)}), out.data(), 1);
  });
  EXPECT_NE(e.find("register array index 4 outside [0, 4)"), std::string::npos) << e;
  EXPECT_NE(e.find("tile_sum"), std::string::npos) << e;
}

}  // namespace
