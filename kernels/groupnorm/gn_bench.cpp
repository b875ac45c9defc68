// gn_bench: runs the production kernels (GroupNorm, and convolutions, for
// which it adds TFLOP/s) on one backend and prints, per problem, the digests
// of every output (for bit-for-bit comparison between
// backends), the kernel time and the bandwidth against the bytes the
// operator must move; with --copy, the device's copy bandwidth for scale.
//
//   gn_bench [--seed S] [--fill F] [--iters N] [--copy BYTES] [--steps]
//            DESCRIPTOR...
//
// --copy also measures streaming ceilings over a quarter of those bytes of
// bf16 input: a read-only pass, an fp32 write-only pass of the output's size,
// a bf16 -> fp32 widening pass (the forward apply's traffic without its
// arithmetic), and the read and the widening in sequence (the floor of any
// forward that reads its input twice). Then the bound on a forward that
// reads x once: it must read all of x before it writes any y (every output
// depends on its group's statistics over the whole volume), so it takes at
// least the read pass plus a widening pass in which the fraction f of x held
// on chip (registers, LDS, cache) is not loaded again; the widening is timed
// for f = 0, 1/4, ..., 1 and each bound printed as a share of the copy
// bandwidth. --steps prints each plan step's time.
//
// Derived inputs (backward's mean, rstd) come from this backend's forward
// kernel, so two backends that agree on the forward see identical inputs.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "determinism/run_digest.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"

using namespace kgate;

namespace {

constexpr int kBenchThreads = 256;
constexpr int kPerThread = 8;  // 16-byte units a work-item handles

struct U4 {
  std::uint32_t v[4];
};
struct alignas(8) Bf16x4 {
  kgate::bf16 v[4];
};
struct alignas(16) F32x4 {
  float v[4];
};

// Reads `units` 16-byte units; writes only if the xor of everything read is
// a value no input here produces, so the loads cannot be dropped.
KGATE_KERNEL_BOUNDS(read_ceiling, kBenchThreads, const U4* in, std::uint64_t units, std::uint32_t* out) {
  const std::uint64_t base = static_cast<std::uint64_t>(rt::block_idx().x) * kBenchThreads * kPerThread;
  std::uint32_t acc = 0;
  U4 v[kPerThread];
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    v[k] = i < units ? in[i] : U4{};
  }
  for (int k = 0; k < kPerThread; ++k) acc ^= v[k].v[0] ^ v[k].v[1] ^ v[k].v[2] ^ v[k].v[3];
  if (acc == 0x12345679u) out[0] = acc;
}

// bf16 -> fp32, 4 elements per unit (8-byte loads, 16-byte stores, read-once
// hints: the forward apply's access pattern without its arithmetic), units
// taken in reverse block order when `reverse` is set. Units below `held`
// are not loaded (they stand for data a single-read forward kept on chip:
// their values are made from the index).
KGATE_KERNEL_BOUNDS(widen_ceiling, kBenchThreads, const Bf16x4* in, std::uint64_t units, F32x4* out, int reverse,
                    std::uint64_t held) {
  const std::uint64_t b = reverse ? rt::grid_dim().x - 1 - rt::block_idx().x : rt::block_idx().x;
  const std::uint64_t base = b * kBenchThreads * kPerThread;
  Bf16x4 v[kPerThread] = {};
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i < held)
      for (int e = 0; e < 4; ++e) v[k].v[e] = kgate::bf16::from_bits(static_cast<std::uint16_t>(i + e));
    else if (i < units)
      v[k] = rt::load_once(in + i);
  }
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i >= units) continue;
    F32x4 o;
    for (int e = 0; e < 4; ++e) o.v[e] = v[k].v[e].to_float();
    rt::store_once(out + i, o);
  }
}

// fp32 stores only, 16 bytes per unit with the apply's pattern and hint.
KGATE_KERNEL_BOUNDS(write_ceiling, kBenchThreads, std::uint64_t units, F32x4* out) {
  const std::uint64_t base = static_cast<std::uint64_t>(rt::block_idx().x) * kBenchThreads * kPerThread;
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i < units) rt::store_once(out + i, F32x4{{1.0f, 2.0f, static_cast<float>(k), 0.0f}});
  }
}

template <class F>
double time_ms(F&& f, int iters) {
  f();
  rt::device_synchronize();
  rt::Event start, stop;
  start.record();
  for (int i = 0; i < iters; ++i) f();
  stop.record();
  stop.synchronize();
  return static_cast<double>(rt::elapsed_ms(start, stop)) / iters;
}

// Streaming ceilings over `bytes` of bf16 input (see the file comment);
// `copy` is the copy bandwidth the shares are taken of.
void ceilings(std::size_t bytes, int iters, double copy) {
  const std::uint64_t units16 = bytes / 16, units8 = bytes / 8;
  const std::uint64_t per_block = kBenchThreads * kPerThread;
  rt::DeviceBuffer<std::byte> in(units16 * 16), out(units16 * 32);
  rt::device_memset(in.data(), 0, units16 * 16);
  rt::LaunchConfig rcfg, wcfg;
  rcfg.grid = rt::dim3(static_cast<std::uint32_t>((units16 + per_block - 1) / per_block));
  wcfg.grid = rt::dim3(static_cast<std::uint32_t>((units8 + per_block - 1) / per_block));
  rcfg.block = wcfg.block = rt::dim3(kBenchThreads);
  auto read = [&] {
    KGATE_LAUNCH(read_ceiling, rcfg, reinterpret_cast<const U4*>(in.data()), units16,
                 reinterpret_cast<std::uint32_t*>(out.data()));
  };
  auto widen = [&](int reverse, std::uint64_t held) {
    KGATE_LAUNCH(widen_ceiling, wcfg, reinterpret_cast<const Bf16x4*>(in.data()), units8,
                 reinterpret_cast<F32x4*>(out.data()), reverse, held);
  };
  const double r = time_ms(read, iters);
  const double wr = time_ms([&] { KGATE_LAUNCH(write_ceiling, wcfg, units8, reinterpret_cast<F32x4*>(out.data())); },
                            iters);
  const double w = time_ms([&] { widen(0, 0); }, iters);
  const double both = time_ms([&] { read(); widen(1, 0); }, iters);
  const double b = static_cast<double>(units16 * 16);
  // GB/s of the forward's traffic (x read once, y written) in `ms`.
  const auto fwd_gbps = [&](double ms) { return 3 * b / (ms * 1e6); };
  std::printf("read-only %zu bytes: %.4f ms, %.1f GB/s\n", bytes, r, b / (r * 1e6));
  std::printf("write-only %zu bytes of fp32: %.4f ms, %.1f GB/s\n", 2 * bytes, wr, 2 * b / (wr * 1e6));
  std::printf("bf16->fp32 %zu bytes in: %.4f ms, %.1f GB/s (read + write)\n", bytes, w, fwd_gbps(w));
  std::printf("read, then bf16->fp32 reversed: %.4f ms, %.1f GB/s of read once + write, %.1f%% of copy\n", both,
              fwd_gbps(both), 100.0 * fwd_gbps(both) / copy);
  std::printf("single-read bound (read pass + widening with a fraction f of x held on chip):\n");
  for (int quarter = 0; quarter <= 4; ++quarter) {
    const std::uint64_t held = units8 * static_cast<std::uint64_t>(quarter) / 4;
    const double t = held == 0 ? w : time_ms([&] { widen(0, held); }, iters);  // f = 0 is the widening above
    std::printf("  f = %.2f (%.1f MB on chip): widening %.4f ms, bound %.4f ms, %.1f%% of copy\n", quarter / 4.0,
                static_cast<double>(held) * 8 / 1e6, t, r + t, 100.0 * fwd_gbps(r + t) / copy);
  }
}

// Device-to-device copy bandwidth (read + write) over `bytes`.
double copy_gbps(std::size_t bytes, int iters) {
  rt::DeviceBuffer<std::byte> a(bytes), b(bytes);
  rt::device_memset(a.data(), 0, bytes);
  const double ms = time_ms([&] { rt::copy_d2d(b.data(), a.data(), bytes); }, iters);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  std::string fill = "signed";
  int iters = 10;
  std::size_t copy_bytes = 0;
  bool steps = false;
  std::vector<std::string> problems;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--fill" && i + 1 < argc) fill = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--copy" && i + 1 < argc) copy_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--steps") steps = true;
    else problems.push_back(a);
  }
  try {
    std::printf("backend %s\n", kernels::backend_name().c_str());
    if (copy_bytes) {
      const double copy = copy_gbps(copy_bytes, iters);
      std::printf("copy %zu bytes: %.1f GB/s\n", copy_bytes, copy);
      ceilings(copy_bytes / 4, iters, copy);
    }
    for (const std::string& d : problems) {
      const Problem p = parse_descriptor(d);
      const Fill f = parse_fill(fill, seed);
      const auto in = determinism::make_inputs(p, f);
      std::map<Role, const Tensor*> ptr;
      for (const auto& [r, t] : in) ptr[r] = &t;
      double ms = 0;
      kernels::RunOptions opt;
      opt.kernel_ms = &ms;
      opt.timing_iters = iters;
      std::vector<double> step_ms;
      if (steps) opt.step_ms = &step_ms;
      const kernels::Plan plan = kernels::plan(p);
      const auto out = kernels::run(p, plan, ptr, opt);
      std::printf("%s\n", to_descriptor(p).c_str());
      for (const auto& [r, t] : out) std::printf("  %-7s %s\n", std::string(name(r)).c_str(), digest(t).c_str());
      const double bytes = static_cast<double>(min_bytes(p));
      std::printf("  time %.4f ms  min bytes %.0f  %.1f GB/s\n", ms, bytes, bytes / (ms * 1e6));
      if (std::holds_alternative<ConvProblem>(p)) std::printf("  %.2f TFLOP/s\n", flops(p) / (ms * 1e9));
      for (std::size_t k = 0; k < step_ms.size() && k < plan.steps.size(); ++k)
        std::printf("    step %-16s %.4f ms\n", plan.steps[k].kernel.c_str(), step_ms[k]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gn_bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
