// Google Benchmark suite for the fast references over the configuration-A
// shapes of docs/CORPUS.md (every conv direction, both GroupNorm directions), with
// the machine's Eigen fp64 GEMM rate measured in the same run.
//
//   bench_ref --benchmark_filter=configA --benchmark_counters_tabular=true
//   bench_ref --benchmark_filter=smoke --benchmark_min_time=0.01   (CTest smoke run)
//   bench_ref --depth-scale=2 ...   every configuration-A extent divided by 2
//                                   (the shapes of torch_cpu_fp64.py --depth-scale 2)
//
// Counters: GFLOPs = flops()/time (flops of the full contraction, padding taps
// included); vs_gemm = that rate over the all-threads Eigen GEMM rate
// (ref_threads() independent 1024^3 products at once, best of 5, once per
// process, so filter the GEMM benchmark in beside the ones you compare);
// extra_MiB = peak resident memory during the call beyond the inputs and the
// fp64 outputs (/proc/self/clear_refs resets the peak before each call).
// On a shared machine the wall clock measures the other users too: the
// per-core counters divide by the process's CPU time instead (all threads),
// GFLOPs_core = flops / CPU seconds and vs_gemm_core = that over the GEMM's
// own per-core rate, which a busy machine changes far less (threads waiting
// for work are idle, not spinning).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "reference/conv3d/gemm_rate.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/fill.hpp"
#include "reference/host_memory.hpp"

namespace {

using namespace kgate;
using namespace kgate::ref;

// ---------------------------------------------------------------------------
// Memory

long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k(key);
  while (std::getline(f, line))
    if (line.compare(0, k.size(), k) == 0) return std::stol(line.substr(k.size() + 1));
  return -1;
}
// Returns freed heap memory and the host block cache's idle blocks to the
// system first, so that the baseline is the live data and memory reused from
// earlier calls is counted as new. Every call is therefore timed cold (its
// large blocks first touched inside it); `kgate bench --arm ref` times warm
// calls.
void reset_peak_rss() {
  malloc_trim(0);
  host_cache_release();
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

// ---------------------------------------------------------------------------
// Eigen GEMM rate (measure_gemm_rate(): one 1024^3 product per thread, all
// threads at once, best of five).

// The best per-core GEMM rate seen (GFLOP/s per CPU second).
double& gemm_core_rate() {
  static double r = 0;
  return r;
}

double& gemm_rate() {  // GFLOP/s, all threads; measured by BM_EigenGemm
  static double r = 0;
  return r;
}

GemmRate measure(int threads) {
  const GemmRate g = measure_gemm_rate(threads);
  gemm_core_rate() = std::max(gemm_core_rate(), g.gflops_per_core);
  if (threads == ref_threads()) gemm_rate() = g.gflops;
  return g;
}

void BM_EigenGemm(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  GemmRate g;
  for (auto _ : st) {
    g = measure(threads);
    st.SetIterationTime(g.seconds);
  }
  st.counters["GFLOPs"] = g.gflops;
  st.counters["GFLOPs_core"] = gemm_core_rate();
  st.counters["threads"] = threads;
}

double ensure_gemm_rate() {
  if (gemm_rate() == 0) measure(ref_threads());
  return gemm_rate();
}

// ---------------------------------------------------------------------------
// Reference runs

void run_problem(benchmark::State& st, const std::string& descriptor) {
  const Problem p = parse_descriptor(descriptor);
  Outputs in;
  for (const auto& s : inputs(p)) {
    if (s.derived) continue;
    Tensor t(s.dtype, s.dims);
    fill_tensor(parse_fill("signed", 1), p, s.role, t);
    in.emplace(s.role, std::move(t));
  }
  for (auto& [r, t] : derived_inputs(p, refs(in))) in.emplace(r, std::move(t));
  std::int64_t out_bytes = 0;
  for (const auto& s : outputs(p)) out_bytes += checked_numel(s.dims, "out") * 8;
  const double gemm = std::holds_alternative<ConvProblem>(p) ? ensure_gemm_rate() : 0.0;
  double extra = 0, secs = 0, cpu = 0;
  std::int64_t iters = 0;
  for (auto _ : st) {
    reset_peak_rss();
    const long base = status_kib("VmRSS:");
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    Outputs o = run_reference(p, refs(in), Impl::fast);
    cpu += process_cpu_seconds() - c0;
    secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++iters;
    benchmark::DoNotOptimize(o);
    const long peak = status_kib("VmHWM:");
    extra = std::max(extra, (static_cast<double>(peak - base) * 1024.0 - static_cast<double>(out_bytes)) / (1 << 20));
  }
  const double gf = flops(p) * static_cast<double>(iters) / secs / 1e9;
  st.counters["GFLOPs"] = gf;
  if (gemm > 0) st.counters["vs_gemm"] = gf / gemm;
  const double core = flops(p) * static_cast<double>(iters) / cpu / 1e9;
  st.counters["GFLOPs_core"] = core;
  if (gemm > 0 && gemm_core_rate() > 0) st.counters["vs_gemm_core"] = core / gemm_core_rate();
  st.counters["extra_MiB"] = extra;
  st.SetLabel(descriptor);
}

void register_all(int scale) {
  const auto sd = [scale](int d) { return std::to_string(std::max(1, d / scale)); };
  benchmark::RegisterBenchmark("gemm/eigen_fp64_1024", BM_EigenGemm)
      ->Arg(1)
      ->Arg(ref_threads())
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  auto reg = [](const std::string& name, const std::string& d, int iters) {
    benchmark::RegisterBenchmark(name.c_str(), [d](benchmark::State& st) { run_problem(st, d); })
        ->Iterations(iters)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  };
  // Configuration A (docs/CORPUS.md): Conv3d k3 s1 p1 bf16 (Cin -> Cout @ D).
  const struct { int ci, co, d; } convs[] = {
      {3, 64, 128},   {64, 64, 128},  {64, 128, 64},  {128, 128, 64}, {128, 256, 32}, {256, 256, 32},
      {256, 512, 16}, {512, 512, 16}, {512, 1024, 8}, {1024, 1024, 8}, {1024, 512, 16}, {512, 256, 32},
      {256, 128, 64}, {128, 64, 128},
  };
  for (const char* dir : {"fwd", "bwd_data", "bwd_weight"}) {
    for (const auto& c : convs) {
      if (c.ci == 3 && std::string(dir) == "bwd_data") continue;  // the stem's input has no gradient
      const std::string d = "conv3d." + std::string(dir) + " bf16 n1 c" + std::to_string(c.ci) + " k" +
                            std::to_string(c.co) + " d" + sd(c.d) + " kd3 p1";
      reg("configA/conv3d." + std::string(dir) + "/" + std::to_string(c.ci) + "->" + std::to_string(c.co) + "@" +
              std::to_string(c.d),
          d, 1);
    }
    reg("configA/conv3d." + std::string(dir) + "/head64->6@128",
        "conv3d." + std::string(dir) + " bf16 n1 c64 k6 d" + sd(128) + " kd1 bias", 1);
    const struct { int ci, d; } ups[] = {{1024, 8}, {512, 16}, {256, 32}, {128, 64}};
    for (const auto& u : ups)
      reg("configA/conv_transpose3d." + std::string(dir) + "/" + std::to_string(u.ci) + "->" + std::to_string(u.ci / 2) +
              "@" + std::to_string(u.d),
          "conv_transpose3d." + std::string(dir) + " bf16 n1 c" + std::to_string(u.ci) + " k" +
              std::to_string(u.ci / 2) + " d" + sd(u.d) + " kd2 s2 bias",
          1);
  }
  const struct { int c, d; } gns[] = {{64, 128}, {128, 64}, {256, 32}, {512, 16}, {1024, 8}};
  for (const char* dir : {"fwd", "bwd"})
    for (const auto& g : gns)
      reg("configA/groupnorm." + std::string(dir) + "/c" + std::to_string(g.c) + "@" + std::to_string(g.d),
          "groupnorm." + std::string(dir) + " bf16 n1 c" + std::to_string(g.c) + " g8 d" + sd(g.d) + " relu",
          1);
  // Smoke: tiny problems for the CTest run.
  for (const char* d : {"conv3d.fwd bf16 n1 c8 k8 d8 kd3 p1", "conv3d.bwd_data bf16 n1 c8 k8 d8 kd3 p1",
                        "conv3d.bwd_weight bf16 n1 c8 k8 d8 kd3 p1 bias", "conv_transpose3d.fwd bf16 n1 c8 k4 d4 kd2 s2 bias",
                        "groupnorm.fwd bf16 n1 c16 g8 d8 relu", "groupnorm.bwd bf16 n1 c16 g8 d8 relu"}) {
    benchmark::RegisterBenchmark(("smoke/" + std::string(d)).c_str(), [d = std::string(d)](benchmark::State& st) {
      run_problem(st, d);
    })->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --depth-scale=N (ours, taken out before Google Benchmark sees the rest).
  int scale = 1, kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--depth-scale=", 0) == 0) {
      const std::string v = a.substr(14);
      char* end = nullptr;
      const long s = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || s < 1 || s > 1024) {
        std::fprintf(stderr, "bench_ref: --depth-scale must be an integer in 1..1024, got '%s'\n", v.c_str());
        return 2;
      }
      scale = static_cast<int>(s);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  try {
    (void)ref_threads();  // a bad KGATE_REF_THREADS is bad input, before any benchmark runs
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench_ref: error: %s\n", e.what());
    return 2;
  }
  register_all(scale);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
