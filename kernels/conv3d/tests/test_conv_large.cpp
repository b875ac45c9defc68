// 64-bit indexing of the convolution kernels on the host backend: a tensor of
// 1291^3 = 2,151,685,171 elements (> 2^31) read (forward, backward-weight) or
// written (backward-data) through a k1 s8 convolution, so the work is small
// (162^3 lattice positions) but the last positions lie past 2^31. The input
// is zero except for values planted at those elements; a wrapped 32-bit
// offset would read a zero (or fault) instead, or write elsewhere. About
// 4.3 GB of memory (runs alone).
//
// The matrix-core kernels (conv_mma for the contract and scatter families,
// conv_wgrad_mma) get the same test through the driver (kernels::run, the
// host tensor plus its device copy: about 8.6 GB), with the channel counts
// their plans need (at least 3 of K and 16 of N per group): the planted
// elements lie past 2^31 in the 16-byte-run-free channel layout the plan
// picks, and the run is checked to be the matrix-core plan. CTest runs them
// on both emulator targets (KGATE_HOST_TARGET), whose atoms tile the lanes
// differently.
#include <gtest/gtest.h>

#include <cmath>

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

// Runs p through the driver with x (or dy for bwd_data) a zero tensor
// holding `planted` (linear index, value), the other inputs given; returns
// the outputs. Asserts the plan is a matrix-core one.
std::map<Role, Tensor> run_mma(const Problem& p, std::map<Role, Tensor>& in) {
  const kernels::Plan plan = kernels::plan(p);
  EXPECT_EQ(plan.variant.rfind("mma-", 0), 0u) << plan.variant;
  return kernels::run(p, plan, kernels::pointers(in));
}

// Forward over x [1][897^3][3] (2,165,204,019 elements): a k1 s16
// convolution to 16 output channels reads the lattice (57^3 positions); the
// last two lie past 2^31.
TEST(ConvLarge, MatrixCoreContractReadsPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.fwd bf16:fp32 n1 c3 k16 d897 kd1 s16");
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const auto& cp = std::get<ConvProblem>(p);
  constexpr std::int64_t E = 897, last = 896;
  std::map<Role, Tensor> in;
  in.emplace(Role::x, Tensor(DType::bf16, {1, E, E, E, 3}));
  const std::int64_t at0 = ((last * E + last) * E + last) * 3 + 2, at1 = at0 - 16 * 3;
  ASSERT_GT(at1, std::int64_t{1} << 31);
  in.at(Role::x).set(at0, 2.0);
  in.at(Role::x).set(at1, 3.0);
  Tensor w(DType::bf16, {16, 1, 1, 1, 3});
  w.set(5 * 3 + 2, 1.0);  // output channel 5 reads input channel 2
  in.emplace(Role::w, std::move(w));
  const auto out = run_mma(p, in);
  const Tensor& y = out.at(Role::y);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  EXPECT_EQ(y.get((outs - 1) * 16 + 5), 2.0);
  EXPECT_EQ(y.get((outs - 2) * 16 + 5), 3.0);
  EXPECT_EQ(y.get((outs - 3) * 16 + 5), 0.0);
  EXPECT_EQ(y.get((outs - 1) * 16 + 4), 0.0);
}

// Backward-data writes dx [1][513^3][16] (2,160,091,152 elements) from dy
// [1][33^3][3] through a k1 s16 convolution. As for the portable scatter
// kernel above, only stride phase 0 of the plan's conv_mma launch runs (it
// holds every lattice position; the other 4095 phases write zeros, minutes
// of emulation), with the plan's block and dynamic LDS.
TEST(ConvLarge, MatrixCoreScatterWritesPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.bwd_data bf16 n1 c16 k3 d513 kd1 s16");
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const auto& cp = std::get<ConvProblem>(p);
  const kernels::Plan plan = kernels::plan(p);
  ASSERT_EQ(plan.variant.rfind("mma-", 0), 0u) << plan.variant;
  ASSERT_EQ(plan.steps.size(), 1u);  // no split of K: one tap
  ASSERT_EQ(plan.steps.at(0).grid[2], 4096u);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  std::vector<kgate::bf16> dyh(static_cast<std::size_t>(outs * 3), kgate::bf16::from_float(0.0f));
  dyh[static_cast<std::size_t>((outs - 1) * 3)] = kgate::bf16::from_float(5.0f);
  dyh[static_cast<std::size_t>((outs - 2) * 3)] = kgate::bf16::from_float(7.0f);
  std::vector<kgate::bf16> wh(3 * 16, kgate::bf16::from_float(0.0f));
  wh[15] = kgate::bf16::from_float(1.0f);  // dx channel 15 gets dy channel 0
  rt::DeviceBuffer<kgate::bf16> dy(dyh.size()), w(wh.size());
  dy.upload(dyh);
  w.upload(wh);
  constexpr std::int64_t E = 513, last = 512;
  const std::int64_t numel = E * E * E * 16;
  rt::DeviceBuffer<kgate::bf16> dx(static_cast<std::size_t>(numel));
  rt::device_memset(dx.data(), 0xff, static_cast<std::size_t>(numel) * 2);  // NaN where phase 0 writes nothing
  const cv::GemmArgs a{kernels::conv_device_geom(cp), dy.data(), w.data(), nullptr, dx.data(), 1};
  rt::LaunchConfig c = launch_of(plan.steps.at(0));
  c.grid.z = 1;
  c.lds_bytes = plan.steps.at(0).lds_bytes;
  rt::mma::with_default_atom<rt::MmaType::bf16>([&](auto atom) {
    KGATE_LAUNCH((cv::conv_mma<decltype(atom), kgate::bf16, kgate::bf16, true>), c, a);
  });
  auto at = [&](std::int64_t i) {
    kgate::bf16 v;
    rt::copy_d2h(&v, dx.data() + i, sizeof v);
    return v.to_float();
  };
  const std::int64_t at0 = ((last * E + last) * E + last) * 16 + 15, at1 = at0 - 16 * 16;
  ASSERT_GT(at1, std::int64_t{1} << 31);
  EXPECT_EQ(at(at0), 5.0f);
  EXPECT_EQ(at(at1), 7.0f);
  EXPECT_EQ(at(at0 - 1), 0.0f);          // channel 14 of the last position
  EXPECT_EQ(at(at1 - 16 * 16), 0.0f);    // the lattice position before
  EXPECT_TRUE(std::isnan(at(at0 - 16)));  // phase 1's position: not written by phase 0
}

// Backward-weight over x [1][417^3][32] (2,320,344,736 elements) and dy
// [1][27^3][16] (k1 s16): dw[co][ci] sums dy * x over the lattice, whose
// last positions lie past 2^31.
TEST(ConvLarge, MatrixCoreBackwardWeightReadsPastTwoToTheThirtyOne) {
  const Problem p = parse_descriptor("conv3d.bwd_weight bf16:fp32 n1 c32 k16 d417 kd1 s16");
  ASSERT_TRUE(kernels::is_supported(p)) << kernels::is_supported(p).reason;
  const auto& cp = std::get<ConvProblem>(p);
  const std::int64_t outs = cp.out()[0] * cp.out()[1] * cp.out()[2];
  constexpr std::int64_t E = 417, last = 416;
  std::map<Role, Tensor> in;
  in.emplace(Role::x, Tensor(DType::bf16, {1, E, E, E, 32}));
  const std::int64_t at0 = ((last * E + last) * E + last) * 32 + 31, at1 = at0 - 16 * 32;
  ASSERT_GT(at1, std::int64_t{1} << 31);
  in.at(Role::x).set(at0, 2.0);
  in.at(Role::x).set(at1, 3.0);
  Tensor dy(DType::bf16, {1, cp.out()[0], cp.out()[1], cp.out()[2], 16});
  dy.set((outs - 1) * 16 + 9, 5.0);
  dy.set((outs - 2) * 16 + 9, 7.0);
  in.emplace(Role::dy, std::move(dy));
  const auto out = run_mma(p, in);
  const Tensor& dw = out.at(Role::dw);  // [16][1][1][1][32]
  EXPECT_EQ(dw.get(9 * 32 + 31), 2.0 * 5.0 + 3.0 * 7.0);
  EXPECT_EQ(dw.get(9 * 32 + 30), 0.0);
  EXPECT_EQ(dw.get(8 * 32 + 31), 0.0);
}

}  // namespace
}  // namespace kgate
