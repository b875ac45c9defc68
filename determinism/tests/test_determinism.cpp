// Run-to-run determinism of the production kernels on the host backend:
// repeats, every workgroup order, every thread count, NaN-prefilled outputs
// and workspaces, fresh processes and concurrent noise all give the same
// digests; and the negative control (a float-atomic reduction) is caught.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "determinism/audit_env.hpp"
#include "determinism/run_digest.hpp"
#include "kernels/api.hpp"
#include "kernels/conv3d/conv3d.hpp"
#include "kernels/conv3d/conv_kernels.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/descriptor.hpp"

namespace kgate::determinism {
namespace {

namespace host = rt::host;

const char* kProblems[] = {
    "groupnorm.fwd bf16 n2 c64 g8 d6 relu",       "groupnorm.bwd bf16 n2 c64 g8 d6 relu",
    "groupnorm.fwd fp32 n1 c1024 g8 d3 relu",     "groupnorm.bwd fp32 n1 c1024 g8 d3 relu",
    "groupnorm.fwd fp16:fp16 n1 c12 g3 d9 h8 w7", "groupnorm.bwd fp16:fp16 n1 c12 g3 d9 h8 w7 noaffine",
    // The six convolution directions; the backward-weights split K (4 and 4
    // slices, dbias 4 and 32) so the fixed trees take part.
    "conv3d.fwd bf16 n1 c8 k12 d7 kd3 p1 bias",   "conv3d.bwd_data fp32 n1 c6 k8 d7 kd3 s2 p1",
    "conv3d.bwd_weight fp32 n2 c8 k8 d13 kd3 p1 bias",
    "conv_transpose3d.fwd bf16:fp32 n1 c8 k6 d5 kd2 s2 bias", "conv_transpose3d.bwd_data fp16 n1 c8 k6 d5 kd3 s2 p1",
    "conv_transpose3d.bwd_weight fp32 n1 c8 k8 d16 kd2 s2 bias",
};

// Large enough that several workgroups (chunks) take part.
const char* kMultiChunk = "groupnorm.bwd bf16 n1 c64 g8 d24 relu";

TEST(Determinism, RepeatsOrdersThreadCountsAndNanPrefill) {
  std::vector<const char*> all(std::begin(kProblems), std::end(kProblems));
  all.push_back(kMultiChunk);
  for (const char* d : all) {
    const Problem p = parse_descriptor(d);
    const Fill f = parse_fill("signed", 17);
    host::Config base = host::config();
    base.threads = 1;
    base.order = host::Order::in_order;
    std::map<std::string, std::string> want;
    {
      host::ScopedConfig c(base);
      want = run_digests(p, f);
    }
    // R = 8 repeats see a race of per-run probability p >= 0.31 with 95%.
    for (int r = 0; r < 8; ++r) {
      host::Config c = base;
      c.threads = 1 + r % 4;
      c.order = static_cast<host::Order>(r % 3);
      c.seed = 1000 + r;
      host::ScopedConfig s(c);
      EXPECT_EQ(run_digests(p, f), want) << d << " threads " << c.threads << " order " << r % 3;
    }
    host::ScopedConfig s(base);
    kernels::RunOptions nan;
    nan.prefill_nan = true;
    EXPECT_EQ(run_digests(p, f, nan), want) << d << " with NaN-prefilled outputs";
  }
}

// The matrix-core kernels (conv_mma contract and scatter, conv_wgrad_mma)
// on both emulated targets: gfx942's register staging and sm_90's
// asynchronous copies and K-major fragment loads, in all six directions.
const char* kMmaProblems[] = {
    "conv3d.fwd bf16 n1 c32 k40 d9 kd3 p1 bias",          "conv3d.bwd_data fp16 n1 c24 k32 d12 kd3 s2 p1",
    "conv3d.bwd_weight bf16 n2 c24 k32 d9 kd3 p1 bias",   "conv3d.bwd_weight bf16 n1 c3 k32 d12 kd3 p1",
    "conv_transpose3d.fwd bf16 n1 c32 k24 d6 kd2 s2 bias", "conv_transpose3d.bwd_data fp16 n1 c32 k24 d6 kd3 s2 p1",
    "conv_transpose3d.bwd_weight bf16 n1 c32 k24 d8 kd2 s2 bias",
};

TEST(Determinism, MatrixCoreKernelsOnBothTargetsAndEveryOrder) {
  for (const rt::Target target : {rt::Target::gfx942, rt::Target::sm90}) {
    for (const char* d : kMmaProblems) {
      const Problem p = parse_descriptor(d);
      const Fill f = parse_fill("signed", 23);
      host::Config base = host::config_for(target, host::config());
      base.threads = 1;
      base.order = host::Order::in_order;
      std::map<std::string, std::string> want;
      {
        host::ScopedConfig c(base);
        ASSERT_EQ(kernels::plan(p).variant.rfind("mma", 0), 0u) << d << ": not a matrix-core plan";
        want = run_digests(p, f);
      }
      for (int r = 0; r < 4; ++r) {
        host::Config c = base;
        c.threads = 1 + r % 4;
        c.order = static_cast<host::Order>((r + 1) % 3);
        c.seed = 2000 + r;
        host::ScopedConfig s(c);
        EXPECT_EQ(run_digests(p, f), want) << d << " threads " << c.threads << " order " << (r + 1) % 3;
      }
      host::ScopedConfig s(base);
      kernels::RunOptions nan;
      nan.prefill_nan = true;
      EXPECT_EQ(run_digests(p, f, nan), want) << d << " with NaN-prefilled outputs";
    }
  }
}

TEST(Determinism, ConcurrentNoiseChangesNothing) {
  const Problem p = parse_descriptor(kMultiChunk);
  const Fill f = parse_fill("signed", 3);
  const auto want = run_digests(p, f);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> sink{0};
  std::thread noise([&] {
    std::uint64_t x = 1;
    while (!stop) {
      for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
      sink += x;
    }
  });
  host::Config c = host::config();
  c.threads = 4;
  c.order = host::Order::shuffled;
  c.seed = 99;
  {
    host::ScopedConfig s(c);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(run_digests(p, f), want);
  }
  stop = true;
  noise.join();
}

// Fresh processes: this binary re-run with --digest prints the digests.
TEST(Determinism, FreshProcessesAgree) {
  std::string self;
  {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    ASSERT_GT(n, 0);
    self.assign(buf, static_cast<std::size_t>(n));
  }
  auto child = [&] {
    FILE* f = ::popen((self + " --digest 2>&1").c_str(), "r");
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    EXPECT_EQ(::pclose(f), 0);
    return out;
  };
  const std::string a = child(), b = child();
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a.find("dx "), std::string::npos) << a;
  EXPECT_EQ(a, b);
}

// Negative control (the audit's, determinism/audit_env.hpp): partial sums
// added with a float atomic in workgroup order. In fp32 a different order
// changes the result by more than an ulp on its inputs, so reordering the
// workgroups must change the output; without the atomic it must not.
TEST(Determinism, FloatAtomicNegativeControlIsCaught) {
  // Run environments 0, 2, 4: one thread, in order / reversed / shuffled.
  const auto in_order = control_run(0, 0, false);
  int differing = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) differing += control_run(4, seed, false) != in_order;
  differing += control_run(2, 0, false) != in_order;
  EXPECT_GT(differing, 0) << "the emulator's workgroup orders did not expose a float-atomic reduction";
  const auto plain = control_run(0, 0, true);
  for (std::uint64_t seed = 1; seed <= 4; ++seed) EXPECT_EQ(control_run(4, seed, true), plain);
}

// The split count of backward-weight is a function of the problem alone: the
// same under every emulator configuration and for a re-parsed copy, and it
// changes only when the problem does (K = N*D*H*W grows).
TEST(Determinism, SplitCountIsAPureFunctionOfTheProblem) {
  const char* d = "conv3d.bwd_weight fp32 n2 c8 k8 d13 kd3 p1 bias";
  const Problem p = parse_descriptor(d);
  const kernels::Plan want = kernels::plan(p);
  ASSERT_GT(want.params.at("splits"), 1) << kernels::to_string(want);
  for (int t = 1; t <= 4; ++t) {
    host::Config c = host::config();
    c.threads = t;
    c.order = static_cast<host::Order>(t % 3);
    host::ScopedConfig s(c);
    EXPECT_EQ(kernels::plan(parse_descriptor(to_descriptor(p))), want);
  }
  EXPECT_EQ(want.reduction.at("dw").splits, want.params.at("splits"));
  const Problem bigger = parse_descriptor("conv3d.bwd_weight fp32 n2 c8 k8 d26 kd3 p1 bias");
  EXPECT_GT(kernels::plan(bigger).params.at("splits"), want.params.at("splits"));
}

// Negative control for backward-weight: the production slices (conv_wgrad)
// combined with a float atomic per slice in workgroup order instead of the
// fixed tree. In fp32 a different order changes some element by an ulp, so
// the emulator's workgroup orders must expose it; the production plan under
// the same orders does not move.
KGATE_KERNEL(atomic_combine, const float* ws, std::int64_t numel, float* out) {
  const std::int64_t e = static_cast<std::int64_t>(rt::block_idx().x) * 64 + rt::thread_idx().x;
  if (e < numel) rt::atomic_add_unordered(out + e, ws[rt::block_idx().y * numel + e]);
}

TEST(Determinism, FloatAtomicBackwardWeightIsCaught) {
  const char* d = "conv3d.bwd_weight fp32 n1 c8 k8 d16 kd3 p1";
  const Problem p = parse_descriptor(d);
  const ConvProblem& cp = std::get<ConvProblem>(p);
  const std::int64_t splits = kernels::plan(p).params.at("splits");
  ASSERT_GT(splits, 2);
  const kernels::cv::Geom g = kernels::conv_device_geom(cp);
  const auto in = make_inputs(p, parse_fill("signed", 5));
  const Tensor& dy = in.at(Role::dy);
  const Tensor& x = in.at(Role::x);
  const std::int64_t numel = g.cs * g.taps * g.clg;
  auto run = [&](host::Order order, std::uint64_t seed) {
    host::Config c = host::config();
    c.threads = 1;
    c.order = order;
    c.seed = seed;
    host::ScopedConfig s(c);
    rt::DeviceBuffer<float> ddy(static_cast<std::size_t>(dy.numel())), dx(static_cast<std::size_t>(x.numel()));
    rt::DeviceBuffer<float> ws(static_cast<std::size_t>(splits * numel)), out(static_cast<std::size_t>(numel));
    rt::copy_h2d(ddy.data(), dy.data(), static_cast<std::size_t>(dy.nbytes()));
    rt::copy_h2d(dx.data(), x.data(), static_cast<std::size_t>(x.nbytes()));
    rt::device_memset(out.data(), 0, static_cast<std::size_t>(numel) * 4);
    const std::int64_t rows = g.n * g.s_pos;
    kernels::cv::WgradArgs wa{g, ddy.data(), dx.data(), ws.data(), 16, (rows + splits - 1) / splits};
    wa.rgroups = kernels::cv::kThreads / wa.bn;  // one split per workgroup (grid z)
    wa.splits = splits;
    rt::LaunchConfig cfg;
    cfg.grid = rt::dim3(static_cast<unsigned>(g.taps * ((g.clg + 63) / 64)), static_cast<unsigned>(g.groups),
                        static_cast<unsigned>(splits));
    cfg.block = rt::dim3(kernels::cv::kThreads);
    KGATE_LAUNCH((kernels::cv::conv_wgrad<float>), cfg, wa);
    rt::LaunchConfig ac;
    ac.grid = rt::dim3(static_cast<unsigned>((numel + 63) / 64), static_cast<unsigned>(splits));
    ac.block = rt::dim3(64);
    KGATE_LAUNCH(atomic_combine, ac, ws.data(), numel, out.data());
    const auto v = out.download();
    return std::vector<float>(v.begin(), v.end());
  };
  const auto in_order = run(host::Order::in_order, 0);
  int differing = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) differing += run(host::Order::shuffled, seed) != in_order;
  differing += run(host::Order::reversed, 0) != in_order;
  EXPECT_GT(differing, 0) << "the emulator's workgroup orders did not expose a float-atomic backward-weight";

  // The production plan (fixed tree) under the same orders.
  host::Config base = host::config();
  base.threads = 1;
  base.order = host::Order::in_order;
  std::map<std::string, std::string> want;
  {
    host::ScopedConfig s(base);
    want = run_digests(p, parse_fill("signed", 5));
  }
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    host::Config c = base;
    c.order = host::Order::shuffled;
    c.seed = seed;
    host::ScopedConfig s(c);
    EXPECT_EQ(run_digests(p, parse_fill("signed", 5)), want);
  }
}

}  // namespace
}  // namespace kgate::determinism

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--digest") {
    const auto d = kgate::determinism::run_digests(kgate::parse_descriptor(kgate::determinism::kMultiChunk),
                                                   kgate::parse_fill("signed", 3));
    for (const auto& [role, h] : d) std::printf("%s %s\n", role.c_str(), h.c_str());
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
