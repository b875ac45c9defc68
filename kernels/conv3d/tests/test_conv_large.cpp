// 64-bit indexing of the convolution kernels on the host backend: a tensor of
// 1291^3 = 2,151,685,171 elements (> 2^31) read (forward, backward-weight) or
// written (backward-data) through a k1 s8 convolution, so the work is small
// (162^3 lattice positions) but the last positions lie past 2^31. The input
// is zero except for values planted at those elements; a wrapped 32-bit
// offset would read a zero (or fault) instead, or write elsewhere. About
// 4.3 GB of memory (runs alone).
#include <gtest/gtest.h>

#include "kernels/api.hpp"
#include "kernels/conv3d/conv3d.hpp"
#include "kernels/conv3d/conv_kernels.hpp"
#include "reference/descriptor.hpp"

namespace kgate {
namespace {

namespace cv = kernels::cv;

rt::LaunchConfig launch_of(const kernels::LaunchStep& s) {
  rt::LaunchConfig c;
  c.grid = rt::dim3(s.grid[0], s.grid[1], s.grid[2]);
  c.block = rt::dim3(s.block[0], s.block[1], s.block[2]);
  return c;
}

struct Large {
  static constexpr std::int64_t kExtent = 1291, kLast = 1288;  // last position on the stride-8 lattice
  std::int64_t numel = kExtent * kExtent * kExtent;
  rt::DeviceBuffer<kgate::bf16> x{static_cast<std::size_t>(numel)};
  // Linear index of lattice position (kLast, kLast, kLast - 8*back).
  static std::int64_t at(std::int64_t back) { return (kLast * kExtent + kLast) * kExtent + kLast - 8 * back; }
  Large() {
    rt::device_memset(x.data(), 0, static_cast<std::size_t>(numel) * 2);
    for (std::int64_t b = 0; b < 2; ++b) {
      const kgate::bf16 v = kgate::bf16::from_float(static_cast<float>(b + 2));
      rt::copy_h2d(x.data() + at(b), &v, sizeof v);
    }
  }
};

TEST(ConvLarge, ContractReadsPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.fwd bf16:fp32 n1 c1 k1 d1291 kd1 s8");
  const auto& cp = std::get<ConvProblem>(p);
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  Large big;
  ASSERT_GT(Large::at(0), std::int64_t{1} << 31);
  ASSERT_GT(Large::at(1), std::int64_t{1} << 31);
  const kernels::Plan plan = kernels::plan(p);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  rt::DeviceBuffer<kgate::bf16> w(1);
  w.upload({kgate::bf16::from_float(1.0f)});
  rt::DeviceBuffer<float> y(static_cast<std::size_t>(outs));
  const cv::GemmArgs a{kernels::conv_device_geom(cp), big.x.data(), w.data(), nullptr, y.data(),
                       static_cast<int>(plan.params.at("bn"))};
  KGATE_LAUNCH((cv::conv_contract<kgate::bf16, float>), launch_of(plan.steps.at(0)), a);
  const std::vector<float> got = y.download();
  EXPECT_EQ(got[static_cast<std::size_t>(outs - 1)], 2.0f);
  EXPECT_EQ(got[static_cast<std::size_t>(outs - 2)], 3.0f);
  EXPECT_EQ(got[static_cast<std::size_t>(outs - 3)], 0.0f);
  EXPECT_EQ(got[0], 0.0f);
}

TEST(ConvLarge, BackwardWeightReadsPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.bwd_weight bf16:fp32 n1 c1 k1 d1291 kd1 s8");
  const auto& cp = std::get<ConvProblem>(p);
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  Large big;
  const kernels::Plan plan = kernels::plan(p);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  // dy: 5 at the last output, 7 at the one before it: dw = 2*5 + 3*7 = 31.
  std::vector<kgate::bf16> dyh(static_cast<std::size_t>(outs), kgate::bf16::from_float(0.0f));
  dyh[static_cast<std::size_t>(outs - 1)] = kgate::bf16::from_float(5.0f);
  dyh[static_cast<std::size_t>(outs - 2)] = kgate::bf16::from_float(7.0f);
  rt::DeviceBuffer<kgate::bf16> dy(static_cast<std::size_t>(outs));
  dy.upload(dyh);
  const std::int64_t splits = plan.params.at("splits");
  rt::DeviceBuffer<float> ws(static_cast<std::size_t>(splits)), dw(1);
  cv::WgradArgs wa{kernels::conv_device_geom(cp), dy.data(), big.x.data(), ws.data(),
                   static_cast<int>(plan.params.at("bn")), plan.params.at("slice")};
  wa.rgroups = static_cast<int>(plan.params.at("rgroups"));
  wa.splits = splits;
  KGATE_LAUNCH((cv::conv_wgrad<kgate::bf16>), launch_of(plan.steps.at(0)), wa);
  const cv::TreeArgs ta{ws.data(), 1, splits, dw.data()};
  ASSERT_EQ(plan.steps.at(1).kernel, "conv_tree_split");  // one element over many splits
  KGATE_LAUNCH((cv::conv_tree_split<float>), launch_of(plan.steps.at(1)), ta);
  EXPECT_EQ(dw.download()[0], 31.0f);
}

// Backward-data (the scatter family) writes past 2^31: dx is the 1291^3
// tensor, dy the 162^3 lattice of a k1 s8 convolution. Only stride phase 0
// (grid z = 1 of the plan's 8^3 phases) is launched: it holds every lattice
// position, the last ones past 2^31, and the other phases have no tap.
TEST(ConvLarge, BackwardDataWritesPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.bwd_data bf16 n1 c1 k1 d1291 kd1 s8");
  const auto& cp = std::get<ConvProblem>(p);
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const kernels::Plan plan = kernels::plan(p);
  ASSERT_EQ(plan.steps.at(0).kernel, "conv_scatter");
  ASSERT_EQ(plan.steps.at(0).grid[2], 512u);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  std::vector<kgate::bf16> dyh(static_cast<std::size_t>(outs), kgate::bf16::from_float(0.0f));
  dyh[static_cast<std::size_t>(outs - 1)] = kgate::bf16::from_float(5.0f);
  dyh[static_cast<std::size_t>(outs - 2)] = kgate::bf16::from_float(7.0f);
  rt::DeviceBuffer<kgate::bf16> dy(static_cast<std::size_t>(outs)), w(1);
  dy.upload(dyh);
  w.upload({kgate::bf16::from_float(1.0f)});
  Large big;  // dx: written by the kernel at the lattice positions
  const cv::GemmArgs a{kernels::conv_device_geom(cp), dy.data(), w.data(), nullptr, big.x.data(),
                       static_cast<int>(plan.params.at("bn"))};
  rt::LaunchConfig c = launch_of(plan.steps.at(0));
  c.grid.z = 1;
  KGATE_LAUNCH((cv::conv_scatter<kgate::bf16, kgate::bf16, false>), c, a);
  auto at = [&](std::int64_t i) {
    kgate::bf16 v;
    rt::copy_d2h(&v, big.x.data() + i, sizeof v);
    return v.to_float();
  };
  ASSERT_GT(Large::at(1), std::int64_t{1} << 31);
  EXPECT_EQ(at(Large::at(0)), 5.0f);
  EXPECT_EQ(at(Large::at(1)), 7.0f);
  EXPECT_EQ(at(Large::at(2)), 0.0f);
}

}  // namespace
}  // namespace kgate
