// Wave operations on the host backend against the gfx942 rule table:
// shuffles for every width 1..64 and every lane, inactive source lanes,
// ballot/any/all and readfirstlane with divergent lanes, a 32-wide target.
#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
using kgate::rt::test::error_of;

namespace {

enum Op : int { kShfl, kXor, kUp, kDown };

// Workgroup b = (arg, width - 1): lane value 1000 + lane.
KGATE_KERNEL(shuffle_all, int op, int* out) {
  const int arg = static_cast<int>(rt::block_idx().x);
  const int width = static_cast<int>(rt::block_idx().y) + 1;
  const int lane = rt::lane_id();
  const int v = 1000 + lane;
  int r = 0;
  switch (op) {
    case kShfl: r = rt::shfl(v, arg, width); break;
    case kXor: r = rt::shfl_xor(v, arg, width); break;
    case kUp: r = rt::shfl_up(v, static_cast<unsigned>(arg), width); break;
    case kDown: r = rt::shfl_down(v, static_cast<unsigned>(arg), width); break;
  }
  out[(rt::block_idx().y * rt::grid_dim().x + rt::block_idx().x) * 64 + lane] = r;
}

// The rule table, written out from HIP's gfx942 definitions (amd_warp_functions.h
// on ds_bpermute), independently of common.hpp: the source lane each lane reads.
int expected_source(int op, int self, int arg, int width) {
  const int seg = self & ~(width - 1);  // first lane of self's segment
  int index = self;
  switch (op) {
    case kShfl: index = seg + (arg & (width - 1)); break;
    case kXor: {
      const int x = self ^ arg;
      index = x >= ((self + width) & ~(width - 1)) ? self : x;
      break;
    }
    case kUp: index = self - arg < seg ? self : self - arg; break;
    case kDown: index = (self & (width - 1)) + arg >= width ? self : self + arg; break;
  }
  return index % 64;  // ds_bpermute addresses lanes modulo 64
}

class Wave : public ::testing::Test {
 protected:
  rt::host::ScopedConfig cfg_{rt::test::test_config()};
};

TEST_F(Wave, ShufflesMatchTheRuleTableForEveryWidthAndLane) {
  for (int op : {kShfl, kXor, kUp, kDown}) {
    const unsigned nargs = 65;  // 0..64 (64: a full-wave shift / mask)
    rt::DeviceBuffer<int> out(nargs * 64 * 64);
    KGATE_LAUNCH(shuffle_all, (rt::LaunchConfig{rt::dim3(nargs, 64), 64}), op, out.data());
    const auto v = out.download();
    for (int width = 1; width <= 64; ++width)
      for (int arg = 0; arg < static_cast<int>(nargs); ++arg)
        for (int lane = 0; lane < 64; ++lane) {
          const int got = v[((width - 1) * nargs + arg) * 64 + lane];
          ASSERT_EQ(got, 1000 + expected_source(op, lane, arg, width))
              << "op " << op << " width " << width << " arg " << arg << " lane " << lane;
        }
  }
}

TEST_F(Wave, XorReachesALowerSegment) {
  // width 16, lane 40 (segment 32..47), mask 32 -> lane 8: not clamped.
  rt::DeviceBuffer<int> out(65 * 64 * 64);
  KGATE_LAUNCH(shuffle_all, (rt::LaunchConfig{rt::dim3(65, 64), 64}), static_cast<int>(kXor), out.data());
  const auto v = out.download();
  EXPECT_EQ(v[((16 - 1) * 65 + 32) * 64 + 40], 1000 + 8);
  // The upper segment is clamped: lane 8 with mask 32 reads itself.
  EXPECT_EQ(v[((16 - 1) * 65 + 32) * 64 + 8], 1000 + 8);
}

// Only even lanes take part; they read their odd neighbour (inactive) and an
// even lane (active).
KGATE_KERNEL(inactive_source, int* out) {
  const int lane = rt::lane_id();
  int a = -1, b = -1;
  if (lane % 2 == 0) {
    a = rt::shfl(100 + lane, lane + 1);
    b = rt::shfl(100 + lane, (lane + 2) % 64);
  }
  out[2 * lane] = a;
  out[2 * lane + 1] = b;
}

TEST_F(Wave, InactiveSourceLaneReadsZero) {
  rt::DeviceBuffer<int> out(128);
  KGATE_LAUNCH(inactive_source, (rt::LaunchConfig{1, 64}), out.data());
  const auto v = out.download();
  for (int lane = 0; lane < 64; ++lane) {
    if (lane % 2) {
      ASSERT_EQ(v[2 * lane], -1);
      continue;
    }
    ASSERT_EQ(v[2 * lane], 0) << lane;
    ASSERT_EQ(v[2 * lane + 1], 100 + (lane + 2) % 64) << lane;
  }
}

// A partial wave: lanes past the end of the workgroup do not exist.
KGATE_KERNEL(partial_wave, int* out) {
  const int lane = rt::lane_id();
  out[lane] = rt::shfl_down(7 + lane, 8u);
}

TEST_F(Wave, LanesPastAPartialWaveReadZero) {
  rt::DeviceBuffer<int> out(40);
  KGATE_LAUNCH(partial_wave, (rt::LaunchConfig{1, 40}), out.data());
  const auto v = out.download();
  for (int lane = 0; lane < 40; ++lane) ASSERT_EQ(v[lane], lane + 8 < 40 ? 7 + lane + 8 : 0) << lane;
}

KGATE_KERNEL(ballot_divergent, std::uint64_t* out) {
  const int lane = rt::lane_id();
  std::uint64_t* o = out + 8 * lane;
  for (int i = 0; i < 8; ++i) o[i] = 0xdead;
  if (lane < 20) {
    o[0] = rt::ballot(lane % 3 == 0);
    o[1] = rt::wave_any(lane == 19);
    o[2] = rt::wave_any(lane == 25);  // lane 25 is inactive here
    o[3] = rt::wave_all(lane < 20);   // true for every active lane
    o[4] = rt::wave_all(lane < 19);
    o[5] = static_cast<std::uint64_t>(rt::readfirstlane(lane * 10));
  } else {
    o[0] = rt::ballot(true);
    o[5] = static_cast<std::uint64_t>(rt::readfirstlane(lane * 10));
  }
}

TEST_F(Wave, BallotAnyAllReadfirstlaneWithDivergentLanes) {
  rt::DeviceBuffer<std::uint64_t> out(8 * 64);
  KGATE_LAUNCH(ballot_divergent, (rt::LaunchConfig{1, 64}), out.data());
  const auto v = out.download();
  std::uint64_t mod3 = 0;
  for (int l = 0; l < 20; l += 3) mod3 |= std::uint64_t{1} << l;
  for (int lane = 0; lane < 64; ++lane) {
    const std::uint64_t* o = v.data() + 8 * lane;
    if (lane < 20) {
      EXPECT_EQ(o[0], mod3) << lane;
      EXPECT_EQ(o[1], 1u);
      EXPECT_EQ(o[2], 0u);
      EXPECT_EQ(o[3], 1u);
      EXPECT_EQ(o[4], 0u);
      EXPECT_EQ(o[5], 0u);
    } else {
      EXPECT_EQ(o[0], ~std::uint64_t{0} << 20) << lane;
      EXPECT_EQ(o[5], 200u);
    }
  }
}

KGATE_KERNEL(wide_types, double* d, std::int64_t* i) {
  const int lane = rt::lane_id();
  d[lane] = rt::shfl_xor(0.5 + lane, 1);
  i[lane] = rt::shfl_up(std::int64_t{1} << 40 | lane, 1u);
}

TEST_F(Wave, EightByteTypes) {
  rt::DeviceBuffer<double> d(64);
  rt::DeviceBuffer<std::int64_t> i(64);
  KGATE_LAUNCH(wide_types, (rt::LaunchConfig{1, 64}), d.data(), i.data());
  const auto dv = d.download();
  const auto iv = i.download();
  for (int lane = 0; lane < 64; ++lane) {
    ASSERT_EQ(dv[lane], 0.5 + (lane ^ 1));
    ASSERT_EQ(iv[lane], (std::int64_t{1} << 40) | (lane == 0 ? 0 : lane - 1));
  }
}

KGATE_KERNEL(wave_geometry, int* out) {
  const unsigned t = rt::flat_thread_idx();
  out[4 * t] = rt::wave_size();
  out[4 * t + 1] = rt::lane_id();
  out[4 * t + 2] = rt::wave_id();
  out[4 * t + 3] = static_cast<int>(rt::ballot(true) >> 32);
}

TEST_F(Wave, A32WideTargetCanBeModelled) {
  auto c = rt::test::test_config();
  c.wave_size = 32;
  rt::host::ScopedConfig w32(c);
  rt::DeviceBuffer<int> out(4 * 128);
  KGATE_LAUNCH(wave_geometry, (rt::LaunchConfig{1, 128}), out.data());
  const auto v = out.download();
  for (int t = 0; t < 128; ++t) {
    ASSERT_EQ(v[4 * t], 32);
    ASSERT_EQ(v[4 * t + 1], t % 32);
    ASSERT_EQ(v[4 * t + 2], t / 32);
    ASSERT_EQ(v[4 * t + 3], 0);  // ballot has only 32 bits
  }
}

TEST_F(Wave, Wave64Geometry) {
  rt::DeviceBuffer<int> out(4 * 128);
  KGATE_LAUNCH(wave_geometry, (rt::LaunchConfig{1, 128}), out.data());
  const auto v = out.download();
  for (int t = 0; t < 128; ++t) {
    ASSERT_EQ(v[4 * t], 64);
    ASSERT_EQ(v[4 * t + 1], t % 64);
    ASSERT_EQ(v[4 * t + 2], t / 64);
    ASSERT_EQ(static_cast<unsigned>(v[4 * t + 3]), 0xffffffffu);
  }
}

// A wave reduction inside a barrier loop: wave ops and barriers interleave.
KGATE_KERNEL(wave_sum_rounds, int* out) {
  KGATE_LDS(partial, int, 16);
  const unsigned t = rt::flat_thread_idx();
  int total = 0;
  for (int round = 0; round < 3; ++round) {
    int v = static_cast<int>(t) + round;
    for (int m = 32; m >= 1; m /= 2) v += rt::shfl_xor(v, m);
    if (rt::lane_id() == 0) partial[rt::wave_id()] = v;
    rt::barrier();
    if (t == 0)
      for (unsigned w = 0; w < rt::block_dim().x / 64; ++w) total += partial[w];
    rt::barrier();
  }
  if (t == 0) out[0] = total;
}

TEST_F(Wave, WaveOpsAndBarriersInterleave) {
  rt::DeviceBuffer<int> out(1);
  KGATE_LAUNCH(wave_sum_rounds, (rt::LaunchConfig{1, 256}), out.data());
  int expect = 0;
  for (int round = 0; round < 3; ++round)
    for (int t = 0; t < 256; ++t) expect += t + round;
  EXPECT_EQ(out.download()[0], expect);
}

}  // namespace
