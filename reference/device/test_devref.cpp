// The device reference on the host emulator against the host references:
// convolutions bit for bit with Impl::dot2 (every direction, bias, groups,
// strides, dilation, the transposed operator), GroupNorm within a few ulps of
// the fast reference, and the planted defects seen. `kgate refcheck` runs the
// same comparison over the corpora (CTest refcheck_*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/device/devref.hpp"

namespace kgate {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (std::memcmp(&x, &y, sizeof x) != 0 && !(std::isnan(x) && std::isnan(y))) return false;
  }
  return true;
}

const char* kConv[] = {
    "conv3d.fwd fp32 n2 c6 k4 d5 h4 w6 kd3 kh2 kw3 s2 p1 bias",
    "conv3d.bwd_data fp32 n1 c4 k6 d6 h5 w4 kd3 s2 p1",
    "conv3d.bwd_weight fp32 n2 c4 k4 d5 kd3 p1 bias",
    "conv3d.fwd fp32 n1 c8 k4 g2 d6 kd3 p2 dil2",
    "conv_transpose3d.fwd fp32 n1 c4 k6 d3 kd2 s2 bias",
    "conv_transpose3d.bwd_data fp32 n1 c4 k4 d4 kd3 s2 p1",
    "conv_transpose3d.bwd_weight fp32 n2 c4 k2 g2 d3 kd3 s2 p1 bias",
};

TEST(DeviceReference, ConvolutionsEqualTheHostDot2ReferenceBitForBit) {
  for (const char* d : kConv) {
    const Problem p = parse_descriptor(d);
    const auto& c = std::get<ConvProblem>(p);
    const auto in = ref::make_inputs(p, parse_fill("signed", 7));
    const auto dev = ref::device::run(p, ref::refs(in));
    const auto dot2 = ref::conv(c, ref::refs(in), ref::Impl::dot2);
    const auto dot2_abs = ref::conv_abs(c, ref::refs(in), ref::Impl::dot2);
    for (const auto& s : c.outputs()) {
      EXPECT_TRUE(same_bits(dev.want.at(s.role), dot2.at(s.role))) << d << " " << name(s.role);
      EXPECT_TRUE(same_bits(dev.abs.at(s.role), dot2_abs.at(s.role))) << d << " " << name(s.role);
    }
  }
}

TEST(DeviceReference, PlantedConvolutionDefectIsSeen) {
  const Problem p = parse_descriptor(kConv[0]);
  const auto in = ref::make_inputs(p, parse_fill("signed", 7));
  const auto dev = ref::device::run(p, ref::refs(in), ref::device::Defect::bump_last);
  const auto dot2 = ref::conv(std::get<ConvProblem>(p), ref::refs(in), ref::Impl::dot2);
  EXPECT_FALSE(same_bits(dev.want.at(Role::y), dot2.at(Role::y)));
}

double worst_ulps(const Tensor& dev, const Tensor& host, const Tensor& scale) {
  double worst = 0;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const double s = std::fabs(scale.get(i));
    const double d = std::fabs(dev.get(i) - host.get(i));
    if (d == 0) continue;
    worst = std::max(worst, s > 0 ? d / std::ldexp(1.0, std::ilogb(s) - 52) : INFINITY);
  }
  return worst;
}

TEST(DeviceReference, GroupNormIsWithinFourUlpsOfTheHostFastReference) {
  for (const char* d : {"groupnorm.fwd fp32 n2 c8 g2 d5 h6 w7 relu", "groupnorm.fwd bf16:fp32 n1 c6 g3 d9 noaffine",
                        "groupnorm.bwd fp32 n2 c8 g4 d5 h4 w6 relu", "groupnorm.bwd fp32 n1 c4 g1 d40 h30 w8"}) {
    const Problem p = parse_descriptor(d);
    const auto& g = std::get<GroupNormProblem>(p);
    const auto in = ref::make_inputs(p, parse_fill("signed", 3));
    const auto dev = ref::device::run(p, ref::refs(in));
    const auto fast = ref::groupnorm(g, ref::refs(in), ref::Impl::fast);
    const auto comp = ref::groupnorm_companion(g, ref::refs(in));
    for (const auto& s : g.outputs()) {
      EXPECT_LE(worst_ulps(dev.want.at(s.role), fast.at(s.role), comp.abs.at(s.role)), 4) << d << " " << name(s.role);
      // The host companion's magnitudes are plain sums (relative error up to
      // gamma_n); the device's are Dot2.
      const double n = static_cast<double>(g.n * g.group_size()) + 2;
      EXPECT_LE(worst_ulps(dev.companion.abs.at(s.role), comp.abs.at(s.role), comp.abs.at(s.role)), 2 * n)
          << d << " companion " << name(s.role);
    }
    EXPECT_LE(worst_ulps(dev.companion.rstd, comp.rstd, comp.rstd), 4) << d;
    EXPECT_LE(worst_ulps(dev.companion.mean, comp.mean, comp.mean_abs), 4) << d;
  }
}

TEST(DeviceReference, PlantedGroupNormDefectIsSeen) {
  // d40 h30 w8: 9600 rows, three chunks per group; the defect drops one.
  const Problem p = parse_descriptor("groupnorm.fwd fp32 n1 c4 g2 d40 h30 w8");
  const auto in = ref::make_inputs(p, parse_fill("signed", 3));
  const auto dev = ref::device::run(p, ref::refs(in), ref::device::Defect::skip_chunk);
  const auto fast = ref::groupnorm(std::get<GroupNormProblem>(p), ref::refs(in), ref::Impl::fast);
  const auto comp = ref::groupnorm_companion(std::get<GroupNormProblem>(p), ref::refs(in));
  EXPECT_GT(worst_ulps(dev.want.at(Role::y), fast.at(Role::y), comp.abs.at(Role::y)), 1e6);
}

}  // namespace
}  // namespace kgate
