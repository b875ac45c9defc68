// Benchmarks of the host emulator (Google Benchmark).
//   BM_barrier/<block>            cost of one work-item barrier (counter ns_per_wi_barrier)
//   BM_shuffle/<block>            cost of one work-item shfl_xor (counter ns_per_wi_op)
//   BM_<kernel>_host/<check>      a conformance kernel on the host backend, LDS checker off/on
//   BM_<kernel>_plain             the same computation as plain C++ on one thread
//   BM_mma_exec<atom>             one emulated MMA instruction (layout gather, the
//                                 target's numeric model, scatter) without the
//                                 scheduler: counter MAC_per_s (multiply-adds per
//                                 second on one core)
//   BM_mma_tile_gemm/<target>     the conformance tile GEMM (256 x 256 x 64, bf16)
//                                 through the fiber scheduler on one thread:
//                                 counter MAC_per_s
// Inputs are uploaded once; only the launch (or the loop) is timed.
// Run: kgate_bench_runtime [--benchmark_filter=...]; KGATE_HOST_THREADS sets
// the emulator's threads for the kernel benchmarks (the barrier and shuffle
// benchmarks run one workgroup on one thread).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/conformance/kernels.hpp"

namespace rt = kgate::rt;
namespace kc = kgate::conformance;

namespace {

constexpr int kRounds = 64;

KGATE_KERNEL(barrier_loop, int* out, int rounds) {
  int v = 0;
  for (int r = 0; r < rounds; ++r) {
    v += r;
    rt::barrier();
  }
  out[rt::flat_thread_idx()] = v;
}

KGATE_KERNEL(shuffle_loop, int* out, int rounds) {
  int v = static_cast<int>(rt::flat_thread_idx());
  for (int r = 0; r < rounds; ++r) v += rt::shfl_xor(v, 1 + r % 31);
  out[rt::flat_thread_idx()] = v;
}

rt::host::Config one_thread(bool check = false) {
  rt::host::Config c = rt::host::config();
  c.threads = 1;
  c.check_lds = check;
  return c;
}

void BM_barrier(benchmark::State& state) {
  rt::host::ScopedConfig sc(one_thread());
  const auto n = static_cast<unsigned>(state.range(0));
  rt::DeviceBuffer<int> out(n);
  for (auto _ : state) KGATE_LAUNCH(barrier_loop, (rt::LaunchConfig{1, n}), out.data(), kRounds);
  const double per = static_cast<double>(n) * kRounds;
  state.counters["ns_per_wi_barrier"] =
      benchmark::Counter(per * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_barrier)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_shuffle(benchmark::State& state) {
  rt::host::ScopedConfig sc(one_thread());
  const auto n = static_cast<unsigned>(state.range(0));
  rt::DeviceBuffer<int> out(n);
  for (auto _ : state) KGATE_LAUNCH(shuffle_loop, (rt::LaunchConfig{1, n}), out.data(), kRounds);
  const double per = static_cast<double>(n) * kRounds;
  state.counters["ns_per_wi_op"] = benchmark::Counter(per * static_cast<double>(state.iterations()) * 1e-9,
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_shuffle)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

// --- conformance kernels: emulator vs plain C++ ------------------------------

constexpr int kN = 1 << 18;

std::vector<float> inputs(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
  return v;
}

rt::host::Config kernel_config(bool check) {
  rt::host::Config c = rt::host::config();
  c.check_lds = check;
  return c;
}

void BM_block_reduce_host(benchmark::State& state) {
  rt::host::ScopedConfig sc(kernel_config(state.range(0) != 0));
  const auto x = inputs(kN);
  rt::DeviceBuffer<float> dx(kN), out(kN / 1024);
  dx.upload(x);
  for (auto _ : state) KGATE_LAUNCH(kc::block_reduce, (rt::LaunchConfig{kN / 1024, 256}), dx.data(), out.data(), kN);
  state.SetItemsProcessed(state.iterations() * kN);
}
BENCHMARK(BM_block_reduce_host)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_block_reduce_plain(benchmark::State& state) {
  const auto x = inputs(kN);
  std::vector<float> out(kN / 1024);
  float part[256];
  for (auto _ : state) {
    for (int b = 0; b < kN / 1024; ++b) {
      for (int t = 0; t < 256; ++t) {
        float v = 0.0f;
        for (int i = 0; i < 4; ++i) v += x[b * 1024 + t + 256 * i];
        part[t] = v;
      }
      for (int s = 128; s > 0; s /= 2)
        for (int t = 0; t < s; ++t) part[t] = part[t] + part[t + s];
      out[b] = part[0];
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}
BENCHMARK(BM_block_reduce_plain)->Unit(benchmark::kMillisecond);

void BM_wave_reduce_host(benchmark::State& state) {
  rt::host::ScopedConfig sc(kernel_config(state.range(0) != 0));
  const auto x = inputs(kN);
  rt::DeviceBuffer<float> dx(kN), out(kN / 32);
  dx.upload(x);
  for (auto _ : state) KGATE_LAUNCH(kc::wave_reduce, (rt::LaunchConfig{kN / 256, 256}), dx.data(), out.data(), kN);
  state.SetItemsProcessed(state.iterations() * kN);
}
BENCHMARK(BM_wave_reduce_host)->Arg(0)->Unit(benchmark::kMillisecond);

void BM_wave_reduce_plain(benchmark::State& state) {
  const auto x = inputs(kN);
  std::vector<float> out(kN / 32);
  for (auto _ : state) {
    for (int seg = 0; seg < kN / 32; ++seg) {
      float v[32], w[32];
      std::memcpy(v, &x[seg * 32], sizeof v);
      for (int m = 16; m >= 1; m /= 2) {
        for (int l = 0; l < 32; ++l) w[l] = v[l] + v[l ^ m];
        std::memcpy(v, w, sizeof v);
      }
      out[seg] = v[0];
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}
BENCHMARK(BM_wave_reduce_plain)->Unit(benchmark::kMillisecond);

constexpr int kRows = 512, kCols = 512;

void BM_lds_transpose_host(benchmark::State& state) {
  rt::host::ScopedConfig sc(kernel_config(state.range(0) != 0));
  const auto x = inputs(kRows * kCols);
  rt::DeviceBuffer<float> dx(x.size()), out(x.size());
  dx.upload(x);
  for (auto _ : state)
    KGATE_LAUNCH(kc::lds_transpose, (rt::LaunchConfig{rt::dim3(kCols / 32, kRows / 32), rt::dim3(32, 8)}), dx.data(),
                 out.data(), kRows, kCols);
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
BENCHMARK(BM_lds_transpose_host)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_lds_transpose_plain(benchmark::State& state) {
  const auto x = inputs(kRows * kCols);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) out[c * kRows + r] = x[r * kCols + c];
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
BENCHMARK(BM_lds_transpose_plain)->Unit(benchmark::kMillisecond);

// --- MMA emulation -----------------------------------------------------------

// Operands: moderate bf16 / f16 values (exponents within +-8), accumulators
// near 1: the common case of a convolution's K loop.
template <class Atom>
void BM_mma_exec(benchmark::State& state) {
  namespace hd = rt::host::detail;
  std::vector<hd::Lane> lanes(Atom::lanes);
  std::mt19937 g(5);
  for (hd::Lane& l : lanes) {
    for (int e = 0; e < 16; ++e) {
      const bool bf = Atom::type == rt::MmaType::bf16;
      const auto sign = static_cast<std::uint16_t>((g() & 1) << 15);
      const auto v = static_cast<std::uint16_t>(bf ? sign | (119 + g() % 17) << 7 | (g() & 0x7f)
                                                  : sign | (7 + g() % 17) << 10 | (g() & 0x3ff));
      std::memcpy(l.in + 2 * e, &v, 2);
    }
    for (int r = 0; r < 16; ++r) {
      const float c = 1.0f + static_cast<float>(g() % 1000) * 1e-3f;
      std::memcpy(l.in + 32 + 4 * r, &c, 4);
    }
  }
  hd::WaveGroup w{};
  for (int l = 0; l < Atom::lanes; ++l) w.lanes[l] = &lanes[l];
  w.active = Atom::lanes == 64 ? ~rt::lane_mask{0} : (rt::lane_mask{1} << Atom::lanes) - 1;
  w.wave_size = Atom::lanes;
  w.target = Atom::target;
  w.mfma = Atom::target == rt::Target::gfx942 ? rt::MfmaModel::cdna3 : rt::MfmaModel::sm90;
  for (auto _ : state) {
    hd::exec_atom<Atom>(w);
    benchmark::DoNotOptimize(lanes[0].out);
  }
  state.counters["MAC_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * Atom::M * Atom::N * Atom::K, benchmark::Counter::kIsRate);
}
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::gfx942_32x32x8_bf16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::gfx942_16x16x16_bf16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::gfx942_32x32x8_f16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::sm90_m16n8k16_bf16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::sm90_m16n8k16_f16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mma_exec, rt::mma::sm90_m16n8k8_bf16)->Unit(benchmark::kMicrosecond);

constexpr int kGemmDim = 256, kGemmK = 64;

void BM_mma_tile_gemm(benchmark::State& state) {
  const auto target = static_cast<rt::Target>(state.range(0));
  rt::host::Config c = rt::host::config_for(target, one_thread());
  rt::host::ScopedConfig sc(c);
  std::vector<std::uint16_t> a(kGemmDim * kGemmK), b(kGemmK * kGemmDim);
  std::mt19937 g(9);
  for (auto& v : a) v = kgate::fp32_to_bf16_bits(static_cast<float>(static_cast<int>(g() % 17) - 8) * 0.37f);
  for (auto& v : b) v = kgate::fp32_to_bf16_bits(static_cast<float>(static_cast<int>(g() % 17) - 8) * 0.61f);
  rt::DeviceBuffer<std::uint16_t> da(a.size()), db(b.size());
  rt::DeviceBuffer<float> dc(kGemmDim * kGemmDim);
  da.upload(a);
  db.upload(b);
  const rt::dim3 grid(kGemmDim / 32, kGemmDim / 32);
  for (auto _ : state) {
    rt::mma::with_default_atom<rt::MmaType::bf16>([&](auto atom) {
      using Atom = decltype(atom);
      KGATE_LAUNCH((kc::tile_gemm<Atom, kGemmK>), (rt::LaunchConfig{grid, static_cast<unsigned>(Atom::lanes)}),
                   da.data(), db.data(), dc.data(), kGemmDim);
    });
  }
  state.SetLabel(rt::target_name(target));
  state.counters["MAC_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kGemmDim * kGemmDim * kGemmK, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_mma_tile_gemm)
    ->Arg(static_cast<int>(rt::Target::gfx942))
    ->Arg(static_cast<int>(rt::Target::sm90))
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
