#include "reference/conv3d/gemm_rate.hpp"

#include <time.h>

#include <Eigen/Core>
#include <chrono>
#include <thread>
#include <vector>

namespace kgate::ref {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

GemmRate measure_gemm_rate(int threads, int n, int trials, int reps) {
  std::vector<Eigen::MatrixXd> a, b, c;
  for (int t = 0; t < threads; ++t) {
    a.push_back(Eigen::MatrixXd::Random(n, n));
    b.push_back(Eigen::MatrixXd::Random(n, n));
    c.push_back(Eigen::MatrixXd::Zero(n, n));
  }
  const double flop = 2.0 * n * n * static_cast<double>(n) * reps * threads;
  GemmRate best{threads, n, trials, 0, 0, 0};
  for (int trial = 0; trial < trials; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (int r = 0; r < reps; ++r) c[t].noalias() += a[t] * b[t];
      });
    for (auto& t : ts) t.join();
    const double cpu = process_cpu_seconds() - c0;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (best.seconds == 0 || secs < best.seconds) {
      best.seconds = secs;
      best.gflops = flop / secs / 1e9;
    }
    if (cpu > 0) best.gflops_per_core = std::max(best.gflops_per_core, flop / cpu / 1e9);
  }
  return best;
}

}  // namespace kgate::ref
