// The conformance kernels on the host backend: bit-identical to the plain C++
// computation, under every workgroup order, thread count and MFMA model.
#include <gtest/gtest.h>

#include "kernels/conformance/conformance.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kc = kgate::conformance;
namespace rt = kgate::rt;

namespace {

void expect_identical(const std::vector<kc::Output>& a, const std::vector<kc::Output>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].bytes.size(), b[i].bytes.size()) << a[i].name;
    EXPECT_TRUE(a[i].bytes == b[i].bytes) << a[i].name << ": " << kc::digest_hex(a[i].bytes) << " vs "
                                          << kc::digest_hex(b[i].bytes);
  }
}

TEST(Conformance, HostMatchesPlainCpp) {
  rt::host::Config c = rt::host::config_for(rt::Target::gfx942, rt::host::config());
  c.check_lds = true;
  rt::host::ScopedConfig sc(c);
  expect_identical(kc::run_device(), kc::run_plain_cpp());
}

TEST(Conformance, IndependentOfOrderThreadsAndMfmaModel) {
  const auto ref = kc::run_plain_cpp();
  for (auto order : {rt::host::Order::reversed, rt::host::Order::shuffled}) {
    rt::host::Config c = rt::host::config_for(rt::Target::gfx942, rt::host::config());
    c.order = order;
    c.seed = 99;
    c.threads = order == rt::host::Order::reversed ? 1 : 2;
    c.mfma = order == rt::host::Order::reversed ? rt::MfmaModel::exact : rt::MfmaModel::cdna3;
    c.check_lds = false;
    rt::host::ScopedConfig sc(c);
    expect_identical(kc::run_device(), ref);
  }
}

// The sm90 target: warp 32, the tile GEMM through the m16n8k16 atom (2 x 4
// atoms per 32x32 tile) with the Hopper numerics, as the CUDA backend runs it.
TEST(Conformance, Sm90TargetMatchesPlainCpp) {
  for (auto model : {rt::MfmaModel::sm90, rt::MfmaModel::exact}) {
    rt::host::Config c = rt::host::config_for(rt::Target::sm90, rt::host::config());
    c.mfma = model;
    c.check_lds = true;
    rt::host::ScopedConfig sc(c);
    expect_identical(kc::run_device(), kc::run_plain_cpp());
  }
}

TEST(Conformance, DigestsAreStable) {
  // XXH3-64 of a known byte string (guards the digest the CUDA conformance run prints).
  EXPECT_EQ(kc::digest_hex({}), "2d06800538d394c2");
}

}  // namespace
